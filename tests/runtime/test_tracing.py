"""OpenTelemetry spans from agent runs (with the SDK's in-memory exporter), and no OpenTelemetry
import at all when it is not installed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fault_server import FaultServer
from rosetta.runtime.agent import load
from rosetta.runtime.result import RetryPolicy

GOOD = json.dumps({"severity": "high", "rationale": "Unauthenticated SQL injection in the login form."})
REPORT = {"report": "SQL injection in the login form lets an unauthenticated attacker bypass authentication."}
FAST = RetryPolicy(attempts=3, base=0.01, multiplier=2.0, cap=0.05, timeout=2.0)


@pytest.fixture(scope="module")
def exporter():
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # once per process (another module may have set it)
        provider = TracerProvider()
        trace.set_tracer_provider(provider)  # rosetta's tracer is a proxy to it
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return memory


@pytest.fixture
def agent(tree):
    from rosetta.compile.compiler import CompileOptions, compile_paths
    from rosetta.providers.adapter import load_adapters

    options = CompileOptions(out=tree / "compiled", root=tree, adapters=load_adapters(), models=("openai/gpt-4o",))
    compile_paths([tree / "signatures"], options, jobs=1)
    return load("vuln-triage", project=tree)


def test_a_run_emits_a_run_span_with_one_child_per_call(agent, exporter):
    exporter.clear()
    with FaultServer([("status", 503), ("ok", GOOD)]) as server:
        result = agent.run(REPORT, "openai/gpt-4o", api_base=server.url, api_key="sk-test-not-a-real-key",
                           policy=FAST)
    spans = exporter.get_finished_spans()
    run = next(s for s in spans if s.name == "rosetta.run")
    calls = sorted((s for s in spans if s.name == "rosetta.llm_call"), key=lambda s: s.attributes["rosetta.attempt"])
    assert [s.attributes["rosetta.outcome"] for s in calls] == ["transient", "ok"]
    assert all(s.parent.span_id == run.context.span_id for s in calls)
    ok = calls[1].attributes
    assert ok["gen_ai.request.model"] == "openai/gpt-4o" and ok["rosetta.artifact_id"] == result.artifact
    assert (ok["gen_ai.usage.input_tokens"], ok["gen_ai.usage.output_tokens"]) == (12, 8)
    assert calls[0].attributes["error.type"] == "ServiceUnavailableError"
    assert run.attributes["rosetta.agent"] == "vuln-triage" and run.attributes["rosetta.attempts"] == 2
    assert run.attributes["rosetta.artifact_id"] == result.artifact and run.attributes["rosetta.valid"] is True
    assert "rosetta.cost_usd" in run.attributes  # litellm prices gpt-4o


def test_a_failed_run_marks_its_span_as_an_error(agent, exporter):
    from opentelemetry.trace import StatusCode

    from rosetta.runtime.result import ModelCallError

    exporter.clear()
    with FaultServer([("status", 401)]) as server:
        with pytest.raises(ModelCallError):
            agent.run(REPORT, "openai/gpt-4o", api_base=server.url, api_key="sk-test-not-a-real-key", policy=FAST)
    run = next(s for s in exporter.get_finished_spans() if s.name == "rosetta.run")
    assert run.status.status_code is StatusCode.ERROR


def test_async_streams_left_with_break_log_no_context_error(agent, exporter, caplog):
    """Issue 83, item 5: ``async for ... break`` without ``aclose``: the stream's generators were
    finalized in another task, where detaching their spans' context failed, and OpenTelemetry
    logged "Failed to detach context" at ERROR twice per stream. Their spans still end."""
    import asyncio
    import gc
    import logging

    exporter.clear()
    caplog.set_level(logging.ERROR)

    async def abandon(url: str) -> None:
        for _ in range(20):
            async for _piece in agent.stream(REPORT, "openai/gpt-4o", api_base=url, api_key="sk-test-not-a-real-key",
                                             policy=FAST, fallbacks=[]):
                break
        await asyncio.sleep(0.1)

    with FaultServer([("ok", GOOD)]) as server:
        asyncio.run(abandon(server.url))
    gc.collect()
    assert not [r for r in caplog.records if "detach" in r.getMessage()]
    assert sum(s.name == "rosetta.run" for s in exporter.get_finished_spans()) == 20


BLOCK_OTEL = """
import sys
class Absent:  # behave as if opentelemetry were not installed
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(name)
        return None
sys.meta_path.insert(0, Absent())
"""


def test_without_opentelemetry_nothing_is_imported(agent, tree):
    code = BLOCK_OTEL + (
        "from rosetta.runtime.agent import load\n"
        f"agent = load('vuln-triage', project={str(tree)!r})\n"
        f"result = agent.run({REPORT!r}, 'openai/gpt-4o', extra={{'mock_response': {GOOD!r}}})\n"
        "assert result.valid\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tree)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
