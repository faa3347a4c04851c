"""agent.chat(): multi-turn conversations on one model, saved and resumed as JSON, recorded to files."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from fault_server import FaultServer
from rosetta.errors import UsageError
from rosetta.runtime.agent import load
from rosetta.runtime.guardrails import GuardrailError
from rosetta.runtime.result import ModelCallError, RetryPolicy

GOOD = json.dumps({"severity": "high", "rationale": "Unauthenticated SQL injection in the login form."})
LOWER = json.dumps({"severity": "medium", "rationale": "Only reachable from the internal network."})
REPORT = {"report": "SQL injection in the login form lets an unauthenticated attacker bypass authentication."}
FAST = RetryPolicy(attempts=2, base=0.01, multiplier=2.0, cap=0.05, timeout=2.0)


@pytest.fixture
def agent(tree):
    from rosetta.compile.compiler import CompileOptions, compile_paths
    from rosetta.providers.adapter import load_adapters

    options = CompileOptions(out=tree / "compiled", root=tree, adapters=load_adapters(),
                             models=("openai/gpt-4o", "o3", "sonnet"))
    compile_paths([tree / "signatures"], options, jobs=1)
    return load("vuln-triage", project=tree)


def connection(server):
    return {"api_base": server.url, "api_key": "sk-test-not-a-real-key", "policy": FAST}


def test_later_turns_send_the_history_and_stay_on_one_model(agent):
    with FaultServer([("ok", GOOD), ("ok", LOWER)]) as server:
        chat = agent.chat("openai/gpt-4o")
        first = chat.send(REPORT, **connection(server))
        second = chat.send("It is only reachable from the internal network. Re-assess.", **connection(server))
    assert first.data["severity"] == "high" and second.output.severity == "medium"
    sent_first, sent_second = (r["body"]["messages"] for r in server.requests)
    assert sent_second[:len(sent_first)] == sent_first  # the history, exactly as it was sent
    assert sent_second[len(sent_first)] == {"role": "assistant", "content": GOOD}
    assert sent_second[-1] == {"role": "user", "content": "It is only reachable from the internal network. Re-assess."}
    assert server.requests[1]["body"]["response_format"] == server.requests[0]["body"]["response_format"]
    assert chat.model == "openai/gpt-4o" and len(chat.turns) == 2 and chat.state["response_id"] == "chatcmpl-2"


def test_the_first_turn_may_fall_back_but_later_turns_never_switch(agent):
    script = [("status", 503), ("status", 503), ("ok", GOOD), ("status", 503)]
    with FaultServer(script) as server:
        chat = agent.chat("openai/gpt-4o", fallbacks=["sonnet"])
        first = chat.send(REPORT, **connection(server))
        assert first.model == "anthropic/claude-sonnet-5-5" and chat.model == first.model
        history = json.loads(chat.to_json())
        with pytest.raises(ModelCallError):
            chat.send("And if the form is behind a VPN?", **connection(server))
    # the failed turn went to Claude only (its Messages API), and left the conversation as it was
    assert all(r["path"].endswith("/messages") for r in server.requests[2:])
    assert json.loads(chat.to_json()) == history
    # Claude's own compiled prompt began the history, and its native structured output shaped the answer
    assert chat.messages[:-1] == agent.prompt_for("sonnet").messages(REPORT) != agent.prompt_for(
        "openai/gpt-4o").messages(REPORT)
    assert server.requests[2]["body"]["output_config"]["format"]["type"] == "json_schema"


def test_saved_conversations_resume_in_another_process(agent, tree):
    with FaultServer([("ok", GOOD), ("ok", LOWER)]) as server:
        chat = agent.chat("openai/gpt-4o")
        chat.send(REPORT, **connection(server))
        saved = chat.save(tree / "chat.json")
        script = (
            "import json, sys\n"
            "from rosetta.runtime.agent import load\n"
            "from rosetta.runtime.result import RetryPolicy\n"
            f"agent = load('vuln-triage', project={str(tree)!r})\n"
            f"chat = agent.chat(resume={str(saved)!r})\n"
            f"result = chat.send('Re-assess for an internal service.', api_base={server.url!r}, "
            "api_key='sk-test-not-a-real-key')\n"
            f"chat.save({str(saved)!r})\n"
            "print(result.data['severity'])\n"
        )
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tree)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "medium"
    resumed = json.loads(saved.read_text())
    assert len(resumed["turns"]) == 2 and resumed["model"] == "openai/gpt-4o"
    assert server.requests[1]["body"]["messages"] == resumed["messages"][:-1]  # history + the new turn


def test_record_dir_leaves_readable_files_for_every_turn(agent, tree):
    record = tree / "runs" / "triage-1"
    with FaultServer([("ok", GOOD), ("ok", LOWER)]) as server:
        chat = agent.chat("openai/gpt-4o", record_dir=record)
        chat.send(REPORT, **connection(server))
        chat.send("Re-assess for an internal service.", **connection(server))
    names = sorted(p.name for p in record.iterdir())
    assert names == ["conversation.json", "turn-001-conversation.json", "turn-001-prompt.md",
                     "turn-001-response.md", "turn-002-conversation.json", "turn-002-prompt.md",
                     "turn-002-response.md"]
    assert "=== REQUEST ===" in (record / "turn-001-prompt.md").read_text()
    second = (record / "turn-002-prompt.md").read_text()
    assert "=== ASSISTANT ===\n" + GOOD in second and second.rstrip().endswith("}")
    assert (record / "turn-002-response.md").read_text() == LOWER + "\n"
    assert len(json.loads((record / "turn-001-conversation.json").read_text())["turns"]) == 1
    assert (record / "conversation.json").read_text() == (record / "turn-002-conversation.json").read_text()


def test_run_with_record_dir_records_one_turn(agent, tree):
    with FaultServer([("ok", GOOD)]) as server:
        result = agent.run(REPORT, "openai/gpt-4o", record_dir=tree / "rec", **connection(server))
    assert result.valid and (tree / "rec" / "turn-001-response.md").read_text() == GOOD + "\n"


def test_async_turns(agent):
    async def talk(server):
        chat = agent.chat("openai/gpt-4o")
        await chat.asend(REPORT, **connection(server))
        return chat, await chat.asend("Re-assess.", **connection(server))

    with FaultServer([("ok", GOOD), ("ok", LOWER)]) as server:
        chat, second = asyncio.run(talk(server))
    assert second.data["severity"] == "medium" and len(server.requests[1]["body"]["messages"]) == \
        len(server.requests[0]["body"]["messages"]) + 2


def test_bad_turns_and_bad_files_are_clear_errors(agent, tree):
    chat = agent.chat("openai/gpt-4o")
    with pytest.raises(UsageError, match="missing value"):
        chat.send({}, api_key="sk-test")
    (tree / "broken.json").write_text("{not json")
    with pytest.raises(UsageError, match="not valid JSON"):
        agent.chat(resume=tree / "broken.json")
    with pytest.raises(UsageError, match="not a saved rosetta conversation"):
        agent.chat(resume={"hello": 1})
    with pytest.raises(UsageError, match="this conversation is with 'other'"):
        agent.chat(resume={"rosetta_conversation": 1, "agent": "other", "model": "x", "messages": [], "turns": []})
    with pytest.raises(UsageError, match="cannot read"):
        agent.chat(resume=tree / "missing.json")


def test_free_text_turns_obey_forbidden_input_patterns(agent):
    leaked = "Here is the server key:\n-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----"
    with FaultServer([("ok", GOOD)]) as server:
        chat = agent.chat("openai/gpt-4o")
        chat.send(REPORT, **connection(server))
        with pytest.raises(GuardrailError, match="private key"):
            chat.send(leaked, **connection(server))
        with pytest.raises(GuardrailError, match="40 characters"):
            chat.send({"report": "too short"}, **connection(server))  # inputs get every rule, as in run()
    assert len(server.requests) == 1 and len(chat.turns) == 1


def test_recorded_turns_are_redacted_but_the_history_is_kept_exact(agent, tree):
    key = "AKIAIOSFODNN7EXAMPLE"
    with FaultServer([("ok", GOOD), ("ok", LOWER), ("ok", LOWER)]) as server:
        chat = agent.chat("openai/gpt-4o", record_dir=tree / "rec")
        chat.send(REPORT, **connection(server))
        chat.send(f"The attacker also used the key {key}. Re-assess.", **connection(server))
        assert key in chat.messages[-2]["content"] and key in server.requests[1]["body"]["messages"][-1]["content"]
        assert key not in chat.to_json()  # an export, redacted as the record_dir files are
        assert not any(key in f.read_text() for f in (tree / "rec").iterdir())
        assert "[redacted aws access key]" in (tree / "rec" / "turn-002-prompt.md").read_text()
        resumed = agent.chat(resume=chat.to_dict(), record_dir=tree / "raw", raw_transcripts=True)
        resumed.send(f"And {key} again?", **connection(server))
    assert key in (tree / "raw" / "turn-003-prompt.md").read_text()
