"""Issue 82: agents with tools finish their work. A model that calls the agent's declared tools gets
their results back and goes on until it answers, on every call path, against a real HTTP server on
127.0.0.1 that speaks OpenAI's, Anthropic's and Gemini's wire shapes (tests/vendor_recorder.py)."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from vendor_recorder import VendorRecorder

import rosetta
from rosetta.runtime.result import ModelCallError

SQL_REVIEW = REPO / "tests" / "fixtures" / "tools" / "sql-review.md"
"""An agent with three declared tools, two of them allowed to run."""
ANSWER = json.dumps({"verdict": "fix", "reason": "users has no column named mail"})
QUERY = {"query": "SELECT mail FROM users"}
MODELS = {"openai": "openai/gpt-4o", "anthropic": "anthropic/claude-sonnet-4-5", "gemini": "gemini/gemini-2.5-pro"}


@pytest.fixture
def agent(tmp_path: Path) -> Any:
    (tmp_path / "signatures").mkdir()
    shutil.copy(SQL_REVIEW, tmp_path / "signatures")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    return rosetta.load("sql-review", project=tmp_path)


def describe_table(table: str) -> dict[str, str]:
    return {"users": {"id": "integer", "email": "text"}}.get(table, {})


def first_describe(results: list[str]) -> list[tuple[str, Any]] | None:
    """A model that looks the table up once, then answers."""
    return [("describe_table", {"table": "users"})] if not results else None


def run_on(server: VendorRecorder, agent: Any, provider: str, **options: Any) -> Any:
    return agent.run(QUERY, model=MODELS[provider], api_base=server.base_for(provider), api_key="sk-test-not-real",
                     fallbacks=[], **options)


@pytest.mark.parametrize("provider", sorted(MODELS))
def test_a_tool_call_then_its_result_then_the_answer(agent, provider):
    with VendorRecorder(ANSWER, tools=first_describe) as server:
        result = run_on(server, agent, provider, tools={"describe_table": describe_table})
    assert result.valid and result.data == json.loads(ANSWER) and not result.wants_tools
    assert [a.outcome for a in result.attempts] == ["ok", "ok"]  # two requests, no correction spent
    (step,) = result.tool_calls
    assert step["name"] == "describe_table" and step["arguments"] == {"table": "users"}
    assert step["result"] == {"id": "integer", "email": "text"} and "error" not in step
    second = json.dumps(server.requests[1].body)
    assert '\\"email\\": \\"text\\"' in second or '"email": "text"' in second  # the result went back


def test_without_functions_a_tool_call_is_an_outcome_not_an_empty_answer(agent):
    with VendorRecorder(ANSWER, tools=first_describe) as server:
        result = run_on(server, agent, "openai")
    assert result.wants_tools and result.valid and result.data is None and len(server.requests) == 1
    assert [a.outcome for a in result.attempts] == ["tool_calls"]
    shutil.copy(REPO / "signatures" / "rubric-reviewer.md", agent.dirs.signatures_dir)
    with VendorRecorder(ANSWER, tools=first_describe) as server:  # no answer yet: nothing for a reviewer to grade
        reviewed = run_on(server, agent, "openai", review=["Names the missing column"])
    assert reviewed.wants_tools and reviewed.review is None and len(server.requests) == 1
    assert result.tool_calls == [{"id": "call_0_0", "name": "describe_table", "arguments": {"table": "users"}}]


def test_parallel_calls_run_at_the_same_time(agent):
    running, overlap, lock = [0], [0], threading.Lock()

    def slow_count(table: str) -> int:
        with lock:
            running[0] += 1
            overlap[0] = max(overlap[0], running[0])
        time.sleep(0.3)
        with lock:
            running[0] -= 1
        return 42

    def both(results: list[str]) -> list[tuple[str, Any]] | None:
        return [("row_count", {"table": "users"}), ("row_count", {"table": "orders"})] if not results else None

    with VendorRecorder(ANSWER, tools=both) as server:
        result = run_on(server, agent, "openai", tools={"row_count": slow_count})
        assert result.valid and [call["result"] for call in result.tool_calls] == [42, 42]
        assert overlap[0] == 2  # both ran at once

        async def aslow_count(table: str) -> int:
            with lock:
                running[0] += 1
                overlap[0] = max(overlap[0], running[0])
            await asyncio.sleep(0.3)
            with lock:
                running[0] -= 1
            return 7

        overlap[0] = 0
        aresult = asyncio.run(agent.arun(QUERY, model=MODELS["openai"], api_base=server.openai_base,
                                         api_key="sk-test-not-real", fallbacks=[], tools={"row_count": aslow_count}))
    assert aresult.valid and [call["result"] for call in aresult.tool_calls] == [7, 7] and overlap[0] == 2


def test_a_raising_tool_and_invalid_arguments_go_back_to_the_model_which_recovers(agent):
    calls = iter([[("describe_table", {"table": "Users; DROP"})],  # the schema's pattern refuses it
                  [("describe_table", {"table": "orders"})],  # the function raises
                  [("describe_table", {"table": "users"})]])

    def flaky(table: str) -> dict[str, str]:
        if table == "orders":
            raise LookupError("no such table: orders")
        return describe_table(table)

    with VendorRecorder(ANSWER, tools=lambda results: next(calls, None)) as server:
        result = run_on(server, agent, "openai", tools={"describe_table": flaky})
    assert result.valid and len(server.requests) == 4
    errors = [call.get("error") for call in result.tool_calls]
    assert "invalid arguments" in errors[0] and "does not match" in errors[0]
    assert errors[1] == "the tool raised LookupError: no such table: orders" and errors[2] is None
    sent = [m for m in server.requests[3].body["messages"] if m["role"] == "tool"]
    assert [m["content"].startswith("error: ") for m in sent] == [True, True, False]
    calls = iter([[("describe_table", {"table": "orders"})]])
    with VendorRecorder(ANSWER, tools=lambda results: next(calls, None)) as server:  # asked otherwise: no second try
        with pytest.raises(ModelCallError, match="no such table: orders"):
            run_on(server, agent, "openai", tools={"describe_table": flaky}, max_tool_errors=0)
    assert len(server.requests) == 1


def test_a_tool_that_does_not_return_within_the_calls_timeout_is_reported_and_the_run_goes_on(agent):
    release = threading.Event()

    def hangs(table: str) -> int:
        release.wait(10)
        return 1

    async def ahangs(table: str) -> int:
        await asyncio.sleep(10)
        return 1

    count_once = lambda results: [("row_count", {"table": "users"})] if not results else None  # noqa: E731
    try:
        with VendorRecorder(ANSWER, tools=count_once) as server:
            started = time.monotonic()
            result = run_on(server, agent, "openai", tools={"row_count": hangs}, timeout=0.5)
            blocking = time.monotonic() - started
            started = time.monotonic()
            aresult = asyncio.run(agent.arun(QUERY, model=MODELS["openai"], api_base=server.openai_base,
                                             api_key="sk-test-not-real", fallbacks=[], timeout=0.5,
                                             tools={"row_count": ahangs}))
            awaited = time.monotonic() - started
    finally:
        release.set()
    for answered, took in ((result, blocking), (aresult, awaited)):
        assert answered.valid and took < 5, took  # the model was told, and answered
        (step,) = answered.tool_calls
        assert step["error"] == "the tool did not return within 0.5 s (the call's timeout)"
    sent = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert sent[0]["content"] == "error: the tool did not return within 0.5 s (the call's timeout)"


def test_an_undeclared_or_disallowed_tool_is_refused_and_reported(agent):
    calls = iter([[("shell", {"command": "rm -rf /"}), ("drop_table", {"table": "users"})]])
    ran: list[str] = []
    with VendorRecorder(ANSWER, tools=lambda results: next(calls, None)) as server:
        result = run_on(server, agent, "openai", tools={"describe_table": lambda table: ran.append(table)})
    assert result.valid and not ran
    assert [call["error"] for call in result.tool_calls] == [
        "there is no tool 'shell'; the tools are: describe_table, drop_table, row_count",
        "the tool 'drop_table' is not allowed here"]


def test_a_function_for_an_undeclared_tool_is_refused_before_any_request(agent):
    with VendorRecorder(ANSWER) as server:
        with pytest.raises(rosetta.UsageError, match="declares no tool 'shell'"):
            run_on(server, agent, "openai", tools={"shell": print})
    assert server.requests == []


def test_max_tool_steps_stops_a_model_that_never_answers(agent):
    with VendorRecorder(ANSWER, tools=lambda results: [("describe_table", {"table": "users"})]) as server:
        with pytest.raises(ModelCallError, match="still calling tools after 3 rounds") as stopped:
            run_on(server, agent, "openai", tools={"describe_table": describe_table}, max_tool_steps=3)
    assert len(server.requests) == 4 and "max_tool_steps" in str(stopped.value)


def test_the_stream_shows_text_between_tool_turns_and_its_result_every_step(agent):
    with VendorRecorder(ANSWER, tools=first_describe) as server:
        stream = agent.stream(QUERY, model=MODELS["openai"], api_base=server.openai_base, api_key="sk-test-not-real",
                              fallbacks=[], tools={"describe_table": describe_table})
        text = "".join(stream)
        result = stream.result()
    assert text == "Looking it up. " + ANSWER  # the first turn's text, then the answer's
    assert result.valid and result.tool_calls[0]["result"] == {"id": "integer", "email": "text"}
    assert [body.body.get("stream") for body in server.requests] == [True, True]


def test_a_conversation_answers_the_tool_calls_itself_and_keeps_every_step(agent, tmp_path):
    requests = iter(range(1, 100))

    def odd_requests_call(results: list[str]) -> list[tuple[str, Any]] | None:  # requests 1 and 3 ask for a tool
        return [("describe_table", {"table": "users"})] if next(requests) % 2 else None

    with VendorRecorder(ANSWER, tools=odd_requests_call) as server:
        chat = agent.chat(MODELS["openai"], api_base=server.openai_base, api_key="sk-test-not-real", fallbacks=[],
                          record_dir=tmp_path / "record")
        asked = chat.send(QUERY)
        assert asked.wants_tools and asked.tool_calls[0]["id"] == "call_0_0"
        with pytest.raises(rosetta.UsageError, match="exactly the waiting calls, by id: call_0_0"):
            chat.send_tool_results({"call_9": "?"})
        answered = chat.send_tool_results({"call_0_0": describe_table("users")})
        assert answered.valid and answered.data == json.loads(ANSWER)
        with pytest.raises(rosetta.UsageError, match="no tool call is waiting"):
            chat.send_tool_results({"call_0_0": "again"})
        # the functions given to a later turn run in its own loop, and the history keeps those steps too
        looped = chat.send("And the orders table?", tools={"describe_table": describe_table})
        assert looped.valid and looped.tool_calls[0]["result"] == {"id": "integer", "email": "text"}
    roles = [message["role"] for message in chat.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"]
    assert chat.messages[2]["tool_calls"][0]["function"]["name"] == "describe_table"
    assert json.loads(chat.messages[3]["content"]) == {"id": "integer", "email": "text"}
    saved = json.loads((tmp_path / "record" / "conversation.json").read_text())
    assert [turn["message"] for turn in saved["turns"]][1] == {"tool_results": {"call_0_0": {"id": "integer",
                                                                                              "email": "text"}}}
    resumed = rosetta.Conversation.resume(agent, tmp_path / "record" / "conversation.json")
    assert resumed.messages == json.loads(json.dumps(chat.messages))


def test_the_bundled_code_reviewer_reads_the_files_of_a_change_from_its_folder_only(tmp_path):
    """The bundled code-reviewer declares ``read_file``; ``rosetta.file_reader(folder)`` is a real one
    confined to the folder under review. A scripted model on a local OpenAI-shaped server reads the
    changed file, tries to leave the folder (refused, and told so), then reviews."""
    checkout = tmp_path / "checkout"
    (checkout / "src").mkdir(parents=True)
    (checkout / "src" / "login.py").write_text('query = "SELECT * FROM users WHERE name = \'" + name + "\'"\n')
    (tmp_path / "secret.txt").write_text("not for the model")
    (checkout / "src" / "link.py").symlink_to(tmp_path / "secret.txt")
    steps = iter([[("read_file", {"path": "src/login.py"})],
                  [("read_file", {"path": "../secret.txt"}), ("read_file", {"path": "src/link.py"})]])
    review = "1. **Must fix** — `src/login.py:1`: SQL built by concatenation; use a bound parameter.\nneeds another pass"
    agent = rosetta.load("code-reviewer", project=REPO)
    with VendorRecorder(review, tools=lambda results: next(steps, None)) as server:
        result = agent.run({"request": "Review the change to src/login.py"}, model="openai/gpt-5.6",
                           api_base=server.openai_base, api_key="sk-test-not-real", fallbacks=[],
                           tools={"read_file": rosetta.file_reader(checkout)})
        bodies = [request.body for request in server.requests]
    assert result.valid and result.data == review and len(bodies) == 3
    read, outside, linked = result.tool_calls
    assert read["result"].startswith("query = ") and "SELECT * FROM users" in json.dumps(bodies[1])
    assert "not a path inside the folder under review" in outside["error"] and "symlink" in linked["error"]
    assert "not for the model" not in json.dumps(bodies)


def test_manual_mode_says_how_to_use_the_tools_from_a_chat(tmp_path, monkeypatch, cli):
    """Copy/paste mode cannot run tools: the prompt tells the model how to ask for one and how the
    result comes back, and the person pasting is told to run each call and paste its result."""
    monkeypatch.chdir(tmp_path)
    review = "Looks fine.\nready to merge"
    (tmp_path / "answer.txt").write_text(review)
    result = cli("-C", REPO, "run", "code-reviewer", "--manual", "--prompt-file", tmp_path / "p.md",
                 "--answer-file", tmp_path / "answer.txt", "-i", "request=Review src/login.py")
    assert result.exit_code == 0, result.output
    prompt = (tmp_path / "p.md").read_text()
    assert "=== USING THE TOOLS HERE ===" in prompt and "CALL <tool name> <arguments as one JSON object>" in prompt
    assert "The tools above (read_file)" in prompt
    assert "run that tool yourself and paste RESULT <tool>: <its result>" in " ".join(result.output.split())
    shown = cli("-C", REPO, "render", "code-reviewer", "--manual", "-m", "openai/gpt-5.6")
    assert shown.exit_code == 0 and "RESULT <tool name>:" in shown.output


def test_record_dir_keeps_every_step_with_credentials_redacted(agent, tmp_path):
    """Tool arguments and results go through the same redaction as answers: in record_dir, in the
    saved conversation (what the model was sent is exact in this process)."""
    key = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"

    def leaky(table: str) -> str:
        return f"columns: id, email; connection token {key}"

    with VendorRecorder(ANSWER, tools=first_describe) as server:
        result = run_on(server, agent, "openai", tools={"describe_table": leaky}, record_dir=tmp_path / "rec")
        sent = json.dumps(server.requests[1].body)
    assert result.valid and key in sent  # the model needed the tool's answer as it was
    saved = (tmp_path / "rec" / "conversation.json").read_text()
    roles = [message["role"] for message in json.loads(saved)["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant"] and key not in saved
    assert "[redacted github token]" in saved


def test_a_fallback_model_restarts_the_loop_with_its_own_render(agent):
    """Gemini calls a tool, then fails (503) when its result goes back: the next model of the chain
    starts over from its own prompt (none of Gemini's turns), runs its own loop, and answers."""
    from rosetta import RetryPolicy

    def gemini_fails_after_a_tool(request: Any) -> bool:
        return ":generateContent" in request.path and "function_response" in json.dumps(request.body)

    with VendorRecorder(ANSWER, tools=first_describe, unavailable=gemini_fails_after_a_tool) as server:
        result = agent.run(QUERY, model=MODELS["gemini"], fallbacks=[MODELS["openai"]], api_base=server.root,
                           api_key="sk-test-not-real", tools={"describe_table": describe_table},
                           policy=RetryPolicy(attempts=1, base=0.01, cap=0.01))
        paths = [request.path for request in server.requests]
        restarted = server.requests[2].body["messages"]
    assert result.valid and result.model == MODELS["openai"]
    assert [path.rsplit("/", 1)[-1] for path in paths] == ["gemini-2.5-pro:generateContent"] * 2 + ["completions"] * 2
    assert [m["role"] for m in restarted] == ["system", "user"]  # its own render, from the start
    assert [a.outcome for a in result.attempts] == ["ok", "transient", "ok", "ok"]
    assert [call["result"] for call in result.tool_calls] == [{"id": "integer", "email": "text"}]


def test_a_key_in_what_a_tool_returns_is_not_a_key_in_the_answer(tmp_path):
    """``no_secrets_in_output`` (the code-reviewer has it) is about what the model writes: a file the
    reviewer reads may hold a key, and ``on_secret="fail"`` still lets the run answer."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "settings.py").write_text('GITHUB_TOKEN = "ghp_' + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8" + '"\n')
    steps = iter([[("read_file", {"path": "settings.py"})]])
    review = "1. **Must fix** — `settings.py:1`: a token committed in the code; load it from the environment.\nneeds another pass"
    with VendorRecorder(review, tools=lambda results: next(steps, None)) as server:
        result = rosetta.load("code-reviewer", project=REPO).run(
            {"request": "Review settings.py"}, model="openai/gpt-5.6", api_base=server.openai_base,
            api_key="sk-test-not-real", fallbacks=[], tools={"read_file": rosetta.file_reader(checkout)},
            on_secret="fail")
    assert result.valid and result.data == review and "ghp_" in json.dumps(server.requests[1].body)
