"""Issue 53: the runtime as a hostile server and a careless caller find it, over real HTTP on
127.0.0.1 (tests/fault_server.py): streams their reader abandons or keeps unread, a 200 with no
choices, cancelled async runs, errors that belong to one endpoint, ``Retry-After`` in its other
forms, and an enormous bad answer quoted back in a correction."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from email.utils import formatdate
from typing import Any

import psutil
import pytest
from fault_server import FaultServer

from rosetta.runtime.agent import load
from rosetta.runtime.health import HealthPolicy, ProviderHealth
from rosetta.runtime.invoke import classify, retry_after
from rosetta.runtime.result import ModelCallError, RetryPolicy
from rosetta.runtime.limits import Gate, credential_key

GOOD = json.dumps({"severity": "high", "rationale": "Unauthenticated SQL injection in the login form."})
LONG = json.dumps({"severity": "high", "rationale": "Unauthenticated SQL injection in the login form. " * 40})
"""About 2,000 characters: some 250 stream events, so a reader that stops after the first leaves most unread."""
REPORT = {"report": "SQL injection in the login form lets an unauthenticated attacker bypass authentication."}
KEY = "sk-test-not-a-real-key"
FAST = RetryPolicy(attempts=3, base=0.01, multiplier=2.0, cap=0.05, timeout=5.0)
PRIMARY, FALLBACK = "openai/gpt-4o", "anthropic/claude-sonnet-5-5"


def compiled(tree: Any) -> Any:
    from rosetta.compile.compiler import CompileOptions, compile_paths
    from rosetta.providers.adapter import load_adapters

    options = CompileOptions(out=tree / "compiled", root=tree, adapters=load_adapters(), models=(PRIMARY, FALLBACK))
    compile_paths([tree / "signatures"], options, jobs=1)
    return load("vuln-triage", project=tree)


@pytest.fixture
def agent(tree):
    return compiled(tree)


def base_for(model: str, server: FaultServer) -> str:
    """The ``api_base`` that sends ``model``'s provider to ``server`` (litellm adds /v1/messages for Anthropic)."""
    return server.url if model.startswith("openai/") else server.url.removesuffix("/v1")


@contextlib.contextmanager
def two_providers(monkeypatch: pytest.MonkeyPatch, primary: list[tuple], fallback: list[tuple]
                  ) -> Iterator[tuple[FaultServer, FaultServer]]:
    """PRIMARY's provider on one server, FALLBACK's on another (each endpoint from its environment)."""
    with FaultServer(primary) as first, FaultServer(fallback) as second:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("OPENAI_API_BASE", base_for(PRIMARY, first))
        monkeypatch.setenv("ANTHROPIC_API_BASE", base_for(FALLBACK, second))
        yield first, second


def within(seconds: float, work: Callable[[], Any]) -> Any:
    """``work()`` in a watched thread: the test fails, showing where that thread is stuck, if it
    has not returned after ``seconds`` (a deadlocked thread never would)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = work()
        except BaseException as error:  # noqa: BLE001 (re-raised in the test's thread)
            box["error"] = error

    thread = threading.Thread(target=target, daemon=True, name="watched")
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        stack = "".join(traceback.format_stack(sys._current_frames()[thread.ident]))
        pytest.fail(f"still running after {seconds}s; stuck here:\n{stack}")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def sockets_to(server: FaultServer) -> int:
    """This process's open TCP sockets connected to ``server`` (the client ends)."""
    port = server.httpd.server_address[1]
    return sum(1 for c in psutil.Process().net_connections(kind="tcp") if c.raddr and c.raddr.port == port)


# -- 1. streams: closed when their reader stops, and a bounded wait for a slot ------------------------

def test_abandoned_streams_close_their_response_and_free_their_slot_at_once(agent):
    """100 OpenAI-compatible and 100 Anthropic streams, each dropped after its first piece of text:
    every response is closed then and there (none waits for the garbage collector, whose
    finalizer could run inside the next request, under the pool's lock, and deadlock)."""
    seen: list[tuple[str, int, int]] = []  # (model, sockets open, slots held) after each abandoned stream
    with FaultServer([("ok", LONG)]) as server:
        before = sockets_to(server)

        def abandon_two_hundred() -> None:
            for model in (PRIMARY, FALLBACK):
                options = {"api_base": base_for(model, server), "api_key": KEY}
                gate = agent.traffic.limiter.gate({"model": model, **options})
                for _ in range(100):
                    for _text in agent.stream(REPORT, model, fallbacks=[], policy=FAST, **options):
                        break  # the reader stops early; the stream is dropped
                    seen.append((model, sockets_to(server), gate.held))

        began = time.monotonic()
        within(120, abandon_two_hundred)
        wall = time.monotonic() - began
        after = sockets_to(server)
    assert len(server.requests) == 200 and all(r["body"]["stream"] for r in server.requests)
    leaks = [(model, sockets, held) for model, sockets, held in seen if sockets or held]
    assert before == 0 and after == 0 and not leaks, f"{len(leaks)} streams left open, first {leaks[:3]} ({wall:.1f}s)"


def test_streams_kept_unread_hold_their_slots_and_the_next_call_says_so_instead_of_waiting_forever(tree):
    (tree / "pyproject.toml").write_text("[project]\nname = 'demo'\n\n[tool.rosetta.rate_limits]\n"
                                         "openai = {max_in_flight = 4}\n")
    agent = compiled(tree)
    policy = RetryPolicy(attempts=2, base=0.01, cap=0.05, timeout=5.0, queue_timeout=0.5)
    with FaultServer([("ok", LONG)] * 4 + [("ok", GOOD)]) as server:
        options = {"api_base": server.url, "api_key": KEY, "policy": policy}
        held = [agent.stream(REPORT, PRIMARY, fallbacks=[], **options) for _ in range(4)]
        for stream in held:
            next(stream)  # read one piece, then keep the stream without reading or closing it
        gate = agent.traffic.limiter.gate({"model": PRIMARY, "api_base": server.url, "api_key": KEY})
        assert gate.held == 4 and sockets_to(server) == 4

        def fifth() -> ModelCallError:
            with pytest.raises(ModelCallError) as caught:
                agent.run(REPORT, PRIMARY, fallbacks=[], **options)
            return caught.value

        began = time.monotonic()
        error = within(30, fifth)
        waited = time.monotonic() - began
        assert [a.outcome for a in error.attempts] == ["busy"] and 0.5 <= waited < 5  # once: waiting was the retry
        assert "all 4 in-flight slots" in str(error) and "stream.close()" in str(error)
        assert len(server.requests) == 4  # nothing more was sent
        moved_on = within(30, lambda: agent.run(REPORT, PRIMARY, fallbacks=[FALLBACK], **options))
        assert moved_on.model == FALLBACK and [a.outcome for a in moved_on.attempts] == ["busy", "ok"]
        open_before = sockets_to(server)
        for stream in held:
            stream.close()
        assert gate.held == 0 and open_before - sockets_to(server) == 4  # slot and socket, at once
        assert within(30, lambda: agent.run(REPORT, PRIMARY, fallbacks=[], **options)).model == PRIMARY


def test_a_gate_wait_is_bounded_for_threads_and_tasks_and_leaves_no_place_in_line():
    from rosetta.runtime.limits import GateTimeout

    gate = Gate(1)
    gate.acquire()
    began = time.monotonic()
    with pytest.raises(GateTimeout, match="all 1 in-flight slots"):
        gate.acquire(timeout=0.2)
    assert time.monotonic() - began >= 0.2 and gate.waiting == 0

    async def wait_in_a_task() -> None:
        with pytest.raises(GateTimeout):
            await gate.acquire_async(timeout=0.2)
        assert gate.waiting == 0

    asyncio.run(wait_in_a_task())
    gate.release()
    assert gate.held == 0
    gate.acquire(timeout=0.2)  # a free slot is taken at once, bound or not
    assert gate.held == 1


def test_abandoned_streams_of_the_embedded_model_stop_generating_at_once(tmp_path, local_model):
    from conftest import make_project

    project = make_project(tmp_path / "p")
    (project / "signatures" / "storyteller.md").write_text(
        "---\nname: storyteller\ndescription: Tells long stories about what it is given.\n---\n"
        "You tell long, winding stories about whatever you are given. Never stop early.\n")
    agent = load("storyteller", project=project)
    for number in range(3):
        for _text in agent.stream({"request": f"A dragon called {number} and its long journey"}, local_model,
                                  fallbacks=[], overrides={"max_tokens": 1500}):
            break
        generating = [t for t in threading.enumerate() if t.name == "rosetta-local-stream"]
        for thread in generating:
            thread.join(5.0)  # the generation ends at its next token, not after 1,500 of them
        assert not any(t.is_alive() for t in generating)


# -- 2. a 200 without choices is a failed attempt of that model ---------------------------------------

@pytest.mark.parametrize("mode", ["run", "arun", "record_dir"])
def test_a_response_without_choices_is_retried_then_the_next_model_answers(agent, monkeypatch, tmp_path, mode):
    with two_providers(monkeypatch, [("empty",)], [("ok", GOOD)]) as (empty, healthy):
        options = {"fallbacks": [FALLBACK], "policy": FAST}
        if mode == "run":
            result = agent.run(REPORT, PRIMARY, **options)
        elif mode == "arun":
            result = asyncio.run(agent.arun(REPORT, PRIMARY, **options))
        else:
            result = agent.run(REPORT, PRIMARY, record_dir=tmp_path / "records", **options)
    assert result.valid and result.model == FALLBACK
    assert [a.outcome for a in result.attempts] == ["transient"] * FAST.attempts + ["ok"]
    assert "no choices" in result.attempts[0].error and len(empty.requests) == FAST.attempts
    assert len(healthy.requests) == 1


def test_a_stream_without_choices_falls_back_too(agent, monkeypatch):
    with two_providers(monkeypatch, [("empty",)], [("ok", GOOD)]):
        result = agent.stream(REPORT, PRIMARY, fallbacks=[FALLBACK], policy=FAST).result()
    assert result.valid and result.model == FALLBACK and result.attempts[-1].outcome == "ok"
    assert all(a.outcome != "ok" for a in result.attempts[:-1])


# -- 6. a cancelled arun ends its spans at once, in its own context -----------------------------------

@pytest.fixture
def spans():
    """Spans started and ended, by name, from now on (a processor on the process's one tracer provider)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

    class Counting(SpanProcessor):
        def __init__(self) -> None:
            self.started: dict[str, int] = {}
            self.ended: dict[str, int] = {}

        def on_start(self, span: Any, parent_context: Any = None) -> None:
            self.started[span.name] = self.started.get(span.name, 0) + 1

        def on_end(self, span: Any) -> None:
            self.ended[span.name] = self.ended.get(span.name, 0) + 1

    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # one provider per process: share whichever test set it
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    counting = Counting()
    provider.add_span_processor(counting)
    return counting


def test_cancelled_async_runs_end_their_spans_at_once_and_detach_every_context(agent, spans, caplog):
    with FaultServer([("stall", 5.0, GOOD)]) as server:
        options = {"fallbacks": [], "api_base": server.url, "api_key": KEY, "policy": FAST}

        async def cancel_fifty() -> list:
            tasks = [asyncio.create_task(agent.arun(REPORT, PRIMARY, **options)) for _ in range(50)]
            while len(server.requests) < 50:  # every call is out
                await asyncio.sleep(0.01)
            for task in tasks:
                task.cancel()
            return await asyncio.gather(*tasks, return_exceptions=True)

        with caplog.at_level(logging.ERROR, logger="opentelemetry.context"):
            outcomes = asyncio.run(cancel_fifty())  # the outcomes keep each run's frames alive meanwhile
            ended = dict(spans.ended)
        assert all(isinstance(o, asyncio.CancelledError) for o in outcomes)
    assert spans.started == ended == {"rosetta.run": 50, "rosetta.llm_call": 50}
    assert [r.getMessage() for r in caplog.records if r.name.startswith("opentelemetry")] == []
    gate = agent.traffic.limiter.gate({"model": PRIMARY, "api_base": server.url, "api_key": KEY})
    assert (gate.held, gate.waiting) == (0, 0)


# -- 7. what an error means: by status, the same on every provider ------------------------------------

def litellm_error(model: str, status: int) -> Exception:
    from rosetta.local.litellm_offline import import_litellm

    with FaultServer([("status", status)]) as server:
        try:
            import_litellm().completion(model=model, messages=[{"role": "user", "content": "hi"}], api_key=KEY,
                                        api_base=base_for(model, server), num_retries=0, max_retries=0, timeout=5)
        except Exception as error:  # noqa: BLE001 (the point: what litellm raised)
            return error
    raise AssertionError(f"{model} answered a scripted {status}")


@pytest.mark.parametrize("status, kind", [(401, "denied"), (402, "denied"), (403, "denied"), (404, "denied"),
                                          (400, "hard"), (413, "hard"), (422, "hard"), (408, "transient"),
                                          (409, "transient"), (429, "transient"), (500, "transient"),
                                          (503, "transient"), (529, "transient")])
def test_a_status_means_the_same_whichever_provider_sent_it(status, kind):
    """litellm raises an OpenAI-compatible server's 403 as APIError and Anthropic's as
    PermissionDeniedError (and Anthropic's 409 as BadRequestError): the status decides."""
    errors = {model: litellm_error(model, status) for model in (PRIMARY, FALLBACK)}
    assert {model: classify(error) for model, error in errors.items()} == {PRIMARY: kind, FALLBACK: kind}, {
        model: type(error).__name__ for model, error in errors.items()}


@pytest.mark.parametrize("status", [401, 403, 404])
def test_an_endpoint_refusing_the_key_or_model_is_not_retried_and_the_next_provider_answers(agent, monkeypatch,
                                                                                             status):
    health = ProviderHealth(HealthPolicy(window_s=60, min_calls=1, error_rate=0.5, cooldown_s=60))
    with two_providers(monkeypatch, [("status", status)], [("ok", GOOD)]) as (refusing, healthy):
        result = agent.run(REPORT, PRIMARY, fallbacks=[FALLBACK], policy=FAST, health=health)
    assert result.valid and result.model == FALLBACK
    assert [a.outcome for a in result.attempts] == ["denied", "ok"]
    assert len(refusing.requests) == 1 and len(healthy.requests) == 1  # never retried on the same model
    assert health.cooling(credential_key({"model": PRIMARY})) == 0.0  # and not held against the endpoint


def test_when_every_endpoint_refuses_the_final_error_says_none_was_retried(agent, monkeypatch):
    with two_providers(monkeypatch, [("status", 403)], [("status", 401)]) as (first, second):
        with pytest.raises(ModelCallError) as caught:
            agent.run(REPORT, PRIMARY, fallbacks=[FALLBACK], policy=FAST)
    assert caught.value.kind == "exhausted" and len(first.requests) == len(second.requests) == 1
    problems = caught.value.problems[1:]
    assert [p.message.split(":")[0] for p in problems] == [PRIMARY, FALLBACK]
    assert all("not retried" in p.hint and "next model" in p.hint for p in problems)


def test_an_http_date_retry_after_is_honoured(agent):
    when = formatdate(time.time() + 3, usegmt=True)  # whole seconds: 2 to 3 s from now
    with FaultServer([("status", 429, {"Retry-After": when}), ("ok", GOOD)]) as server:
        result = agent.run(REPORT, PRIMARY, fallbacks=[], api_base=server.url, api_key=KEY,
                           policy=RetryPolicy(attempts=2, base=0.01, cap=10.0, timeout=5.0))
    gap = server.requests[1]["time"] - server.requests[0]["time"]
    assert [a.outcome for a in result.attempts] == ["transient", "ok"]
    assert 1.5 < result.attempts[1].waited_s <= 3.0 and gap >= result.attempts[1].waited_s


def test_retry_after_reads_seconds_and_dates_and_ignores_the_rest():
    class Refused(Exception):
        def __init__(self, value: str) -> None:
            self.litellm_response_headers = {"retry-after": value}

    now = 1_700_000_000.0
    assert retry_after(Refused("2"), now) == 2.0
    assert retry_after(Refused(formatdate(now + 30, usegmt=True)), now) == 30.0
    assert retry_after(Refused(formatdate(now - 30, usegmt=True)), now) == 0.0  # already past: at once
    assert [retry_after(Refused(v), now) for v in ("nan", "inf", "soon", "")] == [None] * 4


def test_a_retry_after_longer_than_the_cap_is_said_not_cut_short_silently(agent, caplog):
    policy = RetryPolicy(attempts=2, base=0.01, cap=0.2, timeout=5.0)
    with FaultServer([("status", 429, {"Retry-After": "30"}), ("ok", GOOD)]) as server:
        with caplog.at_level(logging.WARNING, logger="rosetta.runtime"):
            result = agent.run(REPORT, PRIMARY, fallbacks=[], api_base=server.url, api_key=KEY, policy=policy)
    said = "the server asked to wait 30s; RetryPolicy.cap allows 0.2s"
    assert result.valid and result.attempts[1].waited_s == pytest.approx(0.2)
    assert said in result.attempts[0].error
    assert any(said in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


# -- 8. a bad answer is quoted back as a bounded excerpt ----------------------------------------------

def test_a_huge_bad_answer_is_quoted_back_as_a_bounded_excerpt(agent):
    huge = "The severity is high. " + "x" * 5_000_000 + " The end."
    with FaultServer([("ok", huge), ("ok", GOOD)]) as server:
        result = agent.run(REPORT, PRIMARY, fallbacks=[], api_base=server.url, api_key=KEY, policy=FAST)
    assert result.valid and [a.outcome for a in result.attempts] == ["invalid", "ok"]
    first, second = (r["body"]["messages"] for r in server.requests)
    quoted, correction = second[-2]["content"], second[-1]["content"]
    assert second[:-2] == first and len(json.dumps(second)) - len(json.dumps(first)) < 6_000
    assert quoted.startswith("The severity is high.") and quoted.endswith("The end.")
    assert "characters left out" in quoted and f"{len(huge):,} characters long" in correction


def test_validation_errors_quoting_a_huge_value_are_bounded(agent):
    bad = json.dumps({"severity": "s" * 600_000, "rationale": "r" * 300_000})
    with FaultServer([("ok", bad), ("ok", GOOD)]) as server:
        result = agent.run(REPORT, PRIMARY, fallbacks=[], api_base=server.url, api_key=KEY, policy=FAST)
    first, second = (r["body"]["messages"] for r in server.requests)
    correction = second[-1]["content"]
    assert "$.severity" in correction and len(correction) < 2_000
    assert len(json.dumps(second)) - len(json.dumps(first)) < 8_000
    assert len(result.attempts[0].error) < 2_000
