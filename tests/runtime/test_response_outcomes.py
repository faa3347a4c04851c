"""Issue 83: whether a response holds an answer is decided in one place for every call path — run,
arun, stream, astream and chat — over real HTTP on 127.0.0.1 (tests/fault_server.py). A 200 with
no answer (no choices, an HTML page, an empty body, a stream without choices, null or empty
content) is an empty response: retried, then the next model; a refusal goes to the next model at
once; an answer the content filter withheld ends the run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from fault_server import FaultServer

import rosetta
from rosetta.runtime.result import ModelCallError, RetryPolicy

FAST = RetryPolicy(attempts=2, base=0.01, cap=0.02, timeout=5)
NOTES = """---
name: notes
description: Summarizes a note in one sentence.
identity: {role: Note Summarizer}
inputs:
  text: {type: string, description: The note.}
model: openai/gpt-4o
---

## Role
Summarize the note in one sentence.
"""
SSE = "text/event-stream"


def completion(message: dict[str, Any], finish: str = "stop") -> str:
    return json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                       "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
                       "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})


def chunks(*deltas: dict[str, Any], finish: str = "stop") -> str:
    events = [{"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": None}]} for delta in deltas]
    events.append({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"


@pytest.fixture
def agent(tmp_path: Path) -> Any:
    (tmp_path / "signatures").mkdir()
    (tmp_path / "signatures" / "notes.md").write_text(NOTES, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'notes'\n", encoding="utf-8")
    return rosetta.load("notes", project=tmp_path)


def every_path(agent: Any, server: FaultServer) -> dict[str, Any]:
    """What each call path gives for the server's scripted reply: the Result, or the ModelCallError."""
    options = {"model": "openai/gpt-4o", "api_base": server.url, "api_key": "sk-test-not-real", "fallbacks": [],
               "policy": FAST}
    inputs = {"text": "The build broke after the dependency upgrade; pinning it fixed it."}

    def streamed() -> Any:
        stream = agent.stream(inputs, **options)
        "".join(stream)
        return stream.result()

    async def astreamed() -> Any:
        stream = agent.stream(inputs, **options)
        async for _ in stream:
            pass
        return await stream.aresult()

    paths = {"run": lambda: agent.run(inputs, **options), "arun": lambda: asyncio.run(agent.arun(inputs, **options)),
             "stream": streamed, "astream": lambda: asyncio.run(astreamed()),
             "chat": lambda: agent.chat(**options).send(inputs)}
    found = {}
    for name, call in paths.items():
        server.requests.clear()
        try:
            found[name] = (call(), len(server.requests))
        except ModelCallError as error:
            found[name] = (error, len(server.requests))
    return found


EMPTY_WHOLE = {
    "no choices": ("empty",),
    "an HTML page": ("body", 200, "<html><body>502 Bad Gateway</body></html>", "text/html"),
    "an empty body": ("body", 200, "", "application/json"),
    "null content": ("body", 200, completion({"content": None})),
    "empty content": ("body", 200, completion({"content": ""})),
}
EMPTY_STREAMED = {
    "no choices": ("empty",),
    "an HTML page": ("body", 200, "<html><body>502 Bad Gateway</body></html>", "text/html"),
    "an empty body": ("body", 200, "", SSE),
    "chunks without choices": ("body", 200, 'data: {"id": "c", "object": "chat.completion.chunk", "created": 0, '
                                            '"model": "m"}\n\ndata: [DONE]\n\n', SSE),
    "empty deltas": ("body", 200, chunks({"role": "assistant", "content": ""}), SSE),
}


@pytest.mark.parametrize("case", sorted(set(EMPTY_WHOLE) | set(EMPTY_STREAMED)))
def test_a_200_without_an_answer_is_never_a_valid_result_on_any_path(agent, case):
    steps = [EMPTY_WHOLE.get(case), EMPTY_STREAMED.get(case)]
    for step, paths in zip(steps, (("run", "arun", "chat"), ("stream", "astream")), strict=True):
        if step is None:
            continue
        with FaultServer([step]) as server:
            found = every_path(agent, server)
        for path in paths:
            outcome, requests = found[path]
            assert isinstance(outcome, ModelCallError), f"{case} on {path}: {outcome!r}"
            assert requests == FAST.attempts, (case, path)  # retried as the provider failing, no correction spent
            assert [a.outcome for a in outcome.attempts] == ["transient"] * FAST.attempts, (case, path)


def test_a_refusal_goes_to_the_next_model_at_once(agent):
    with FaultServer([("body", 200, completion({"content": None, "refusal": "I can't help with that."}))]) as server:
        found = every_path(agent, server)
    for path in ("run", "arun", "chat"):
        error, requests = found[path]
        assert isinstance(error, ModelCallError) and requests == 1, path  # not retried
        assert error.attempts[-1].outcome == "refused" and "I can't help with that." in error.attempts[-1].error
        assert "declined to answer" in str(error)


def test_an_answer_the_content_filter_withheld_ends_the_run(agent):
    with FaultServer([("body", 200, completion({"content": None}, finish="content_filter"))]) as server:
        found = every_path(agent, server)
    for path in ("run", "arun", "chat"):
        error, requests = found[path]
        assert isinstance(error, ModelCallError) and requests == 1 and error.kind == "hard", path
        assert "content filter" in error.attempts[-1].error


def test_a_structured_answer_cut_off_at_the_token_limit_is_said_so(tmp_path):
    """Issue 83, item 9: ``finish_reason: length`` on a JSON answer was reported as "no JSON value
    found". Now each such attempt is outcome ``cut_off`` and the Result's first issue names the
    limit; the text is kept. (It is corrected like any invalid answer: an embedded model's decoder
    ends a looping answer with ``length`` too, and a correction often breaks the loop.)"""
    import shutil

    from conftest import REPO

    (tmp_path / "signatures").mkdir()
    shutil.copy(REPO / "signatures" / "vuln-triage.md", tmp_path / "signatures")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'cut'\n", encoding="utf-8")
    triage = rosetta.load("vuln-triage", project=tmp_path)
    cut = '{"severity": "high", "rationale": "Unauthenticated SQL injection in the lo'
    with FaultServer([("body", 200, completion({"content": cut}, finish="length"))]) as server:
        result = triage.run({"report": "SQL injection in the login form lets anyone in without a password."},
                            model="openai/gpt-4o", fallbacks=[],
                            api_base=server.url, api_key="sk-test-not-real", policy=FAST)
    assert len(server.requests) == 2 and [a.outcome for a in result.attempts] == ["cut_off", "cut_off"]
    assert not result.valid and result.raw == cut
    assert result.issues[0].message.startswith("the answer was cut off at the token limit (finish_reason length")
    assert "max_tokens" in result.issues[0].message


NOT_UTF8 = completion({"content": "The build broke: café@@ pinned."}).encode().replace(b"caf\\u00e9@@", b"caf\xe9\xff")
PARTS = completion({"content": [{"type": "text", "text": "The build broke; "},
                                {"type": "image_url", "image_url": {"url": "https://example.invalid/x.png"}},
                                {"type": "text", "text": "pinning the dependency fixed it."}]})


@pytest.mark.parametrize("case", ["not UTF-8", "content parts"])
def test_a_reply_litellm_cannot_convert_is_read_once_and_kept(agent, tmp_path, case):
    """Issue 83, items 7 and 10: a 200 whose body is not valid UTF-8, or whose content is a list of
    parts, made litellm raise after the reply was paid for: retried as a provider failure (3 paid
    replies, then the fallback), its text never reached the Result or record_dir. Now it is read,
    once, on every whole-reply path, and recorded."""
    body = NOT_UTF8 if case == "not UTF-8" else PARTS
    assert b"caf\xe9\xff" in NOT_UTF8
    with FaultServer([("body", 200, body, "application/json")]) as server:
        found = every_path(agent, server)
        server.requests.clear()
        recorded = agent.run({"text": "x"}, "openai/gpt-4o", api_base=server.url, api_key="sk-test-not-real",
                             fallbacks=[], policy=FAST, record_dir=tmp_path / "record")
    expected = ("The build broke: caf\ufffd\ufffd pinned." if case == "not UTF-8"
                else "The build broke; pinning the dependency fixed it.")
    for path in ("run", "arun", "chat"):
        result, requests = found[path]
        assert not isinstance(result, Exception), (case, path, result)
        assert result.valid and result.raw == expected and requests == 1, (case, path)
        assert [a.outcome for a in result.attempts] == ["ok"], (case, path)
        assert result.usage.get("total_tokens") == 6, (case, path)
    note = found["run"][0].attempts[0].error
    assert (note == "the reply was not valid UTF-8: 2 invalid byte sequences read as U+FFFD" if case == "not UTF-8"
            else note is None)
    assert recorded.raw == expected and len(server.requests) == 1
    assert any(expected in path.read_text(encoding="utf-8") for path in (tmp_path / "record").rglob("*")
               if path.is_file())


@pytest.mark.parametrize("answer", ["", "  \n"])
def test_an_empty_manual_answer_is_not_a_valid_result(agent, tmp_path, monkeypatch, answer):
    """Issue 83, item 9, for the one path without a provider: a person's empty answer to a free-text
    agent was a valid empty Result."""
    monkeypatch.chdir(tmp_path)
    result = agent.run_manual({"text": "The build broke."}, answer=answer)
    assert not result.valid and result.raw == answer
    assert [issue.message for issue in result.issues] == ["the answer is empty; expected text"]
    assert [a.outcome for a in result.attempts] == ["invalid"]
    assert agent.run_manual({"text": "The build broke."}, answer="It broke.").valid
