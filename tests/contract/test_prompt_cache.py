"""Issue 85: a host that caches only up to a marked breakpoint (Anthropic; Bedrock's Converse, whose
cachePoint litellm writes from the same mark) gets one at the end of the prompt's stable prefix when
that prefix is long enough to be cached, and none when it is not; hosts that cache a prefix on their
own (OpenAI, Gemini) get no mark, and every host gets the stable text first. Checked on every bundled
agent and every catalog Claude, and on the wire through a recorder on 127.0.0.1."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest
from cloud_credentials import api_base_for, cloud_env
from conftest import REPO
from vendor_contracts import anthropic_problems
from vendor_recorder import VendorRecorder

from rosetta.definition import load_many
from rosetta.providers.adapter import bundled_adapters
from rosetta.providers.catalog import load_catalog
from rosetta.render.prompt import CACHE_CONTROL, RenderedPrompt, placeholder
from rosetta.runtime.agent import Agent, load
from rosetta.runtime.result import RetryPolicy

AGENTS = sorted(r.definition.name for r in load_many([REPO / "signatures"]) if r.definition)
CATALOG = load_catalog()
LIVE = [m for m in CATALOG.models if CATALOG.status(m).state != "retired" and m.weights is None]
CLAUDES = sorted(m.id for m in LIVE if m.adapter == "anthropic")
OTHERS = sorted(m.id for m in LIVE if m.adapter in ("openai", "google"))
ADAPTER_MINIMUM = {name: adapter.prompt_cache.min_tokens for name, adapter in bundled_adapters().items()
                   if adapter.prompt_cache is not None}
FAST = RetryPolicy(attempts=1, base=0.01, cap=0.01, timeout=10.0)
TEXT = ("CVE-2024-12345: SQL injection in the login form of the customer portal lets an unauthenticated "
        "attacker dump the users table.")


@cache
def _agent(name: str) -> Agent:
    return load(name, project=REPO)


def _prompt(agent: str, model: str) -> RenderedPrompt:
    return _agent(agent).explain(model).prompt


def _messages(prompt: RenderedPrompt) -> list[dict[str, Any]]:
    return prompt.messages({field.name: placeholder(field.name) for field in prompt.inputs})


def _marks(messages: list[dict[str, Any]]) -> list[int]:
    return [n for n, m in enumerate(messages) if isinstance(m["content"], list)
            and any(block.get("cache_control") == CACHE_CONTROL for block in m["content"])]


def _stable(prompt: RenderedPrompt) -> int:
    return prompt.tokens.get("tools", 0) + prompt.tokens["system"] + (prompt.tokens["demos"] if prompt.demos else 0)


def _minimum(model: str) -> int:
    """The model's own cache minimum from the catalog, else its adapter's."""
    entry = CATALOG.resolve(model)
    return entry.cache_min_tokens or ADAPTER_MINIMUM[entry.adapter]


@pytest.mark.parametrize("model", CLAUDES)
@pytest.mark.parametrize("agent", AGENTS)
def test_every_claude_gets_one_mark_at_the_stable_prefix_when_it_is_long_enough(agent: str, model: str) -> None:
    prompt = _prompt(agent, model)
    messages = _messages(prompt)
    marks = _marks(messages)
    prefix = prompt.cache_prefix
    assert prefix is not None and prefix.tokens == _stable(prompt) and prefix.minimum == _minimum(model)
    if _stable(prompt) < _minimum(model):
        assert not prefix.marked and not marks, f"{agent}@{model}: a short prefix is never marked"
        return
    assert prefix.marked and prefix.cached
    assert marks == [len(prompt.demos) if prompt.demos else 0]  # the system text, or the last fixed demo
    assert messages[0]["role"] == "system"
    assert all(not isinstance(m["content"], list) for m in messages[marks[0] + 1:])  # the request is never marked


def test_both_lengths_occur_among_the_bundled_agents() -> None:
    """The test above decides both ways: some bundled agent is long enough on Claude, some is not."""
    stables = {_stable(_prompt(agent, "anthropic/claude-sonnet-4-6")) >= _minimum("anthropic/claude-sonnet-4-6")
               for agent in AGENTS}
    assert stables == {True, False}


def test_each_model_has_its_own_minimum(portable) -> None:
    """A ~3,000-token prefix: cached on Sonnet 4.6 (1,024 tokens), too short for Haiku 5.5 (4,096),
    where it is sent unmarked; a model the catalog gives no minimum takes its adapter's."""
    from rosetta.definition.loader import load_definition
    from rosetta.render.renderer import render
    from rosetta.signature import lower

    context = "\n".join(f"- Rule {n}: a ticket naming system {n} goes to the team that owns system {n}."
                        for n in range(140))
    path = portable(body_extra=f"\n## Context\n{context}\n")
    signature = lower(load_definition(path))
    sonnet = render(signature, "anthropic/claude-sonnet-4-6")
    haiku = render(signature, "anthropic/claude-haiku-5-5")
    assert 2048 <= sonnet.cache_prefix.tokens < 4096
    assert (sonnet.cache_prefix.minimum, sonnet.cache_prefix.marked) == (1024, True) and _marks(_messages(sonnet))
    assert (haiku.cache_prefix.minimum, haiku.cache_prefix.marked) == (4096, False) and not _marks(_messages(haiku))
    assert "not cached" in haiku.cache_prefix.describe() and "4,096-token minimum" in haiku.cache_prefix.describe()
    gpt = render(signature, "openai/gpt-4o")
    assert gpt.cache_prefix.minimum == ADAPTER_MINIMUM["openai"] == 1024 and not gpt.cache_prefix.marked


@pytest.mark.parametrize("model", OTHERS)
@pytest.mark.parametrize("agent", ["vuln-triage", "question-type", "news-topic"])
def test_hosts_that_cache_on_their_own_get_no_mark_and_the_stable_text_first(agent: str, model: str) -> None:
    prompt = _prompt(agent, model)
    messages = _messages(prompt)
    prefix = prompt.cache_prefix
    assert prefix is not None and not prefix.marked and not _marks(messages)  # recorded, never marked
    assert prefix.tokens == _stable(prompt) and prefix.minimum == _minimum(model)
    assert ("on its own" in prefix.describe()) is prefix.cached
    if prompt.system:  # the instructions, then the fixed demos, then the request: nothing per-request before them
        first = messages[0]["content"]
        assert first.startswith(prompt.system) or messages[0]["role"] == "system"
    assert messages[-1]["role"] == "user" and placeholder(prompt.inputs[0].name) in messages[-1]["content"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VendorRecorder]:
    real = socket.getaddrinfo

    def loopback_only(host: Any, *args: Any, **kwargs: Any) -> Any:
        if str(host) not in ("127.0.0.1", "localhost", "::1"):
            raise OSError(f"the prompt-cache tests stay on 127.0.0.1; something tried to reach {host}")
        return real(host, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch, VendorRecorder(json.dumps({"severity": "high", "rationale": "x"})) \
            as server:
        patch.setattr(socket, "getaddrinfo", loopback_only)
        cloud_env(server, patch, tmp_path_factory.mktemp("cloud"))
        yield server


def _sent(served: VendorRecorder, agent: str, model: str) -> dict[str, Any]:
    before = len(served.requests)
    inputs = {field.name: TEXT for field in _prompt(agent, model).inputs}
    base = served.anthropic_base if model.startswith("anthropic/") else api_base_for(model, served)
    try:
        _agent(agent).run(inputs, model, fallbacks=[], policy=FAST, validation_retries=0, api_base=base,
                          **({"api_key": "sk-test-not-a-real-key"} if model.startswith("anthropic/") else {}))
    except Exception as error:  # noqa: BLE001  the recorder's answer need not validate: the request is checked
        assert len(served.requests) > before, f"{agent}@{model}: nothing was sent: {error}"
    body = served.requests[before].body
    assert isinstance(body, dict)
    return body


@pytest.mark.parametrize(("agent", "marked"), [("vuln-triage", True), ("release-notes", False)])
def test_anthropic_and_bedrock_bodies_carry_the_mark_exactly_when_it_is_due(served: VendorRecorder, agent: str,
                                                                            marked: bool) -> None:
    claude = "anthropic/claude-sonnet-4-6"
    assert _prompt(agent, claude).cache_prefix.marked is marked
    anthropic = _sent(served, agent, claude)
    assert not anthropic_problems(anthropic, f"{agent}@{claude}")  # the Anthropic SDK's own types accept it
    blocks = anthropic["system"] if isinstance(anthropic["system"], list) else [{"text": anthropic["system"]}]
    assert [block.get("cache_control") for block in blocks] == ([CACHE_CONTROL] if marked else [None])
    assert "cache_control" not in json.dumps(anthropic["messages"])
    bedrock = "bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0"
    converse = _sent(served, agent, bedrock)
    points = [block for block in converse["system"] if "cachePoint" in block]
    assert points == ([{"cachePoint": {"type": "default"}}] if marked else [])
    if marked:
        assert "cachePoint" in converse["system"][-1] and "text" in converse["system"][0]  # after the system text


def test_render_shows_the_mark_where_the_cached_prefix_ends_and_keeps_the_text_readable() -> None:
    prompt = _prompt("vuln-triage", "anthropic/claude-sonnet-4-6")
    shown = prompt.request_text()
    system = shown.split("--- system ---\n", 1)[1].split("\n--- ", 1)[0]
    assert system == f"{prompt.system}\n[cache_control: ephemeral — the cached prefix ends here]"
    assert "cache_control" not in _prompt("release-notes", "anthropic/claude-sonnet-4-6").request_text()


@pytest.mark.parametrize(("model", "says"), [
    ("anthropic/claude-sonnet-4-6", "marked with cache_control where it ends"),
    ("openai/gpt-5.6", "the host caches a prefix of 1,024+ tokens on its own"),
    ("anthropic/claude-haiku-5-5", "under the host's 4,096-token minimum: not cached"),
])
def test_rosetta_render_says_what_the_host_caches(cli, model: str, says: str) -> None:
    result = cli("--project", REPO, "render", REPO / "signatures" / "incident-responder.md", "--model", model)
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if line.startswith("prompt cache:"))
    assert says in line and "stable prefix (up to the system text)" in line


def test_an_artifact_from_before_the_prefix_record_reads_as_a_marked_prefix() -> None:
    """Versions kept from before this record (compiled/*/*.versions/) name the mark
    ``cache_breakpoint``: they read as a marked, cached prefix, and an unmarked one as none."""
    prompt = _prompt("vuln-triage", "anthropic/claude-sonnet-4-6")
    data = prompt.to_dict()
    del data["cache_prefix"]
    old = RenderedPrompt.from_dict({**data, "cache_breakpoint": {"after": "system", "tokens": 1041}})
    assert old.cache_prefix.marked and old.cache_prefix.cached and old.cache_prefix.tokens == 1041
    assert _marks(_messages(old)) == [0]
    assert RenderedPrompt.from_dict({**data, "cache_breakpoint": None}).cache_prefix is None
