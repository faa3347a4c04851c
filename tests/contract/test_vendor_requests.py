"""Every bundled agent on every OpenAI, Anthropic and Google catalog model sends requests the vendor's
own SDK types accept: rosetta's runtime → litellm → a real HTTP server on 127.0.0.1 that records the
bodies (tests/vendor_recorder.py), checked with tests/contract/vendor_contracts.py.

Mocking litellm would check what rosetta hands litellm; this checks what litellm puts on the wire,
which is what a provider rejects. The matrix follows the catalog and signatures/, so a new model
or agent is covered without editing this file. Corrections after an answer that does not validate
are requests too, and are checked like the first.
"""

from __future__ import annotations

import copy
import json
import socket
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import pytest
from conftest import REPO
from vendor_contracts import anthropic_problems, google_problems, openai_problems
from vendor_recorder import Recorded, VendorRecorder

from rosetta.definition import load_many
from rosetta.providers.catalog import load_catalog
from rosetta.runtime.agent import Agent, load
from rosetta.runtime.result import ModelCallError, RetryPolicy

VENDORS: dict[str, tuple[Callable[[Any, str], list[str]], tuple[str, ...]]] = {
    "openai": (openai_problems, ("/chat/completions",)),
    "anthropic": (anthropic_problems, ("/v1/messages",)),
    "google": (google_problems, (":generateContent", ":streamGenerateContent")),
}
"""Per catalog adapter: the body check, and where its requests must arrive."""
AGENTS = sorted(r.definition.name for r in load_many([REPO / "signatures"]) if r.definition)
CATALOG = load_catalog()
MODELS = sorted((m.id, m.adapter, m.provider) for m in CATALOG.models
                if m.adapter in VENDORS and CATALOG.status(m).state != "retired")
"""Retired models are refused before any request is made; deprecated ones are still called."""
CASES = [(agent, *model, mode) for agent in AGENTS for model in MODELS for mode in ("run", "stream")]
TEXT = ("CVE-2024-12345: SQL injection in the login form of the customer portal lets an unauthenticated "
        "attacker dump the users table.")
"""Every input of every agent: long enough, and naming a CVE, for each agent's input rules."""
FAST = RetryPolicy(attempts=1, base=0.01, cap=0.01, timeout=10.0)
KEY = "sk-test-not-a-real-key"


@pytest.fixture(scope="module")
def recorder() -> Iterator[VendorRecorder]:
    """One recording server for the module, and no connection anywhere else while it runs."""
    real = socket.getaddrinfo

    def loopback_only(host: Any, *args: Any, **kwargs: Any) -> Any:
        if str(host) not in ("127.0.0.1", "localhost", "::1"):
            raise OSError(f"the contract tests stay on 127.0.0.1; something tried to reach {host}")
        return real(host, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch, VendorRecorder("{}") as server:
        patch.setattr(socket, "getaddrinfo", loopback_only)
        yield server


@cache
def _agent(name: str) -> Agent:
    return load(name, project=REPO)


def _problems(requests: list[Recorded], adapter: str, where: str) -> list[str]:
    check, routes = VENDORS[adapter]
    problems = []
    for number, request in enumerate(requests, 1):
        label = f"{where} (request {number})"
        if request.method != "POST" or not request.path.endswith(routes):
            problems.append(f"{adapter} request for {label} went to {request.method} {request.path}, "
                            f"not …{' or …'.join(routes)}")
            continue
        problems += check(request.body, label)
    return problems


def _streamed(request: Recorded) -> bool:
    """Whether a request asked for a stream: in the body (OpenAI, Anthropic) or the method (Gemini)."""
    return request.path.endswith(":streamGenerateContent") or (
        isinstance(request.body, dict) and request.body.get("stream") is True)


@pytest.mark.parametrize(("agent", "model", "adapter", "provider", "mode"), CASES,
                         ids=[f"{agent}@{model}:{mode}" for agent, model, _, _, mode in CASES])
def test_requests_match_the_vendor_sdk_types(recorder: VendorRecorder, agent: str, model: str, adapter: str,
                                             provider: str, mode: str) -> None:
    runner = _agent(agent)
    inputs = {name: TEXT for name in runner.spec.input_names}
    options = {"fallbacks": [], "policy": FAST, "api_base": recorder.base_for(provider), "api_key": KEY}
    recorder.requests.clear()
    failure = None
    try:
        if mode == "run":
            runner.run(inputs, model, **options)
        else:
            list(runner.stream(inputs, model, **options))
    except ModelCallError as error:
        if error.kind != "invalid":  # "{}" never validating is expected; a refused request is not
            failure = error
    requests = list(recorder.requests)
    assert requests, f"{agent}@{model} ({mode}) sent no request: {failure}"
    problems = _problems(requests, adapter, f"{agent}@{model} ({mode})")
    assert not problems, "\n".join(problems)
    assert failure is None, str(failure)
    streams = mode == "stream" and CATALOG.resolve(model).capabilities.streaming
    assert _streamed(requests[0]) == streams, f"{agent}@{model} ({mode}): the first request should stream: {streams}"
    sent = json.dumps([r.body for r in requests])
    missing = [tool.name for tool in runner.spec.tools if json.dumps(tool.name) not in sent]
    assert not missing, f"{agent}@{model} ({mode}) declares tools it never sent, so the check missed them: {missing}"


# -- the checks themselves reject what a vendor would ------------------------------------------------

VALID: dict[str, dict[str, Any]] = {
    "openai": {"model": "gpt-4o", "max_tokens": 400, "messages": [
        {"role": "system", "content": "Classify."}, {"role": "user", "content": "A report."}],
        "tools": [{"type": "function", "function": {"name": "search_logs", "parameters": {"type": "object"}}}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": {"type": "object"},
                                                                    "strict": True}}},
    "anthropic": {"model": "claude-sonnet-5-5", "max_tokens": 400, "system": "Classify.",
                  "messages": [{"role": "user", "content": [{"type": "text", "text": "A report."}]}],
                  "tools": [{"name": "search_logs", "input_schema": {"type": "object"}}],
                  "tool_choice": {"type": "tool", "name": "search_logs"}},
    "google": {"contents": [{"role": "user", "parts": [{"text": "A report."}]}],
               "systemInstruction": {"parts": [{"text": "Classify."}]},
               "generationConfig": {"maxOutputTokens": 400, "responseMimeType": "application/json"},
               "tools": [{"functionDeclarations": [{"name": "search_logs", "parameters": {"type": "OBJECT"}}]}]},
}
BROKEN: dict[str, list[tuple[str, tuple[Any, ...], Any, str]]] = {
    # (what, path to set, value, the problem expected)
    "openai": [
        ("unknown top-level key", ("zzz",), 1, "`zzz`: extra key not allowed"),
        ("unknown key in a message", ("messages", 1, "zzz"), 1, "`messages[1].zzz`: extra key not allowed"),
        ("unknown key in a tool", ("tools", 0, "function", "zzz"), 1, "`tools[0].function.zzz`: extra key not allowed"),
        ("wrong type", ("max_tokens",), "400", "`max_tokens`: expected int | null, got string"),
        ("unknown role", ("messages", 0, "role"), "boss", '`messages[0].role`: "boss" is not one of'),
    ],
    "anthropic": [
        ("unknown top-level key", ("temperature",), 0.2, "`temperature`: extra key not allowed"),
        ("unknown key in a content block", ("messages", 0, "content", 0, "zzz"), 1,
         "`messages[0].content[0].zzz`: extra key not allowed"),
        ("unknown key in a tool", ("tools", 0, "zzz"), 1, "`tools[0].zzz`: extra key not allowed"),
        ("wrong type", ("max_tokens",), "400", "`max_tokens`: expected int, got string"),
    ],
    "google": [
        ("unknown top-level key", ("zzz",), 1, "`zzz`: extra key not allowed"),
        ("unknown key in a part", ("contents", 0, "parts", 0, "zzz"), 1,
         "`contents[0].parts[0].zzz`: Extra inputs are not permitted"),
        ("unknown key in a tool", ("tools", 0, "functionDeclarations", 0, "zzz"), 1,
         "`tools[0].functionDeclarations[0].zzz`: Extra inputs are not permitted"),
        ("wrong type", ("generationConfig", "maxOutputTokens"), "400",
         "`generationConfig.maxOutputTokens`: Input should be a valid integer"),
        ("unknown enum value", ("safetySettings",), [{"category": "HARM_CATEGORY_NOPE", "threshold": "BLOCK_NONE"}],
         "`safetySettings`: HARM_CATEGORY_NOPE is not a valid HarmCategory"),
    ],
}


def _check(vendor: str) -> Callable[[Any, str], list[str]]:
    return VENDORS[vendor][0]


@pytest.mark.parametrize("vendor", sorted(VALID))
def test_a_valid_body_passes(vendor: str) -> None:
    assert _check(vendor)(VALID[vendor], "example") == []


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_a_streamed_body_is_checked_as_one(vendor: str) -> None:
    """``"stream": true`` picks the SDK's Streaming type; Gemini streams by URL, not in the body."""
    assert _check(vendor)({**VALID[vendor], "stream": True}, "example") == []
    problems = _check(vendor)({**VALID[vendor], "stream": "yes"}, "example")
    assert len(problems) == 1 and problems[0].startswith(f"{vendor} body for example: `stream`: "), problems


@pytest.mark.parametrize(("vendor", "what", "path", "value", "expected"),
                         [(vendor, *case) for vendor, cases in BROKEN.items() for case in cases],
                         ids=[f"{vendor}-{case[0]}" for vendor, cases in BROKEN.items() for case in cases])
def test_the_check_rejects(vendor: str, what: str, path: tuple[Any, ...], value: Any, expected: str) -> None:
    body = copy.deepcopy(VALID[vendor])
    target = body
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    problems = _check(vendor)(body, "example")
    assert len(problems) == 1 and problems[0].startswith(f"{vendor} body for example: {expected}"), problems


def test_a_missing_required_key_is_reported() -> None:
    body = {k: v for k, v in VALID["anthropic"].items() if k != "max_tokens"}
    assert anthropic_problems(body, "example") == ["anthropic body for example: `max_tokens`: missing required key"]
