"""Reading answers per adapter mechanism (through litellm's mock responses) and validating them."""

from __future__ import annotations

import json

import pytest
from conftest import REPO

from rosetta.definition import load_definition
from rosetta.render import Knobs, render
from rosetta.runtime.answers import (
    MAX_ANSWER_CHARS,
    MAX_DEPTH,
    answer_text,
    correction_message,
    decode_json,
    read_answer,
    tool_calls,
    validate,
)
from rosetta.signature import lower

GOOD = {"severity": "high", "rationale": "Unauthenticated SQL injection in the login form."}


@pytest.fixture(scope="module")
def triage():
    return lower(load_definition(REPO / "signatures" / "vuln-triage.md"))


def complete(prompt, **mock):
    from rosetta.local.litellm_offline import import_litellm

    litellm = import_litellm()
    return litellm.completion(**prompt.to_litellm({"report": "SQLi in login"}), **mock).choices[0].message


def test_native_schema_answer(triage):
    prompt = render(triage, "openai/gpt-4o")
    answer = read_answer(answer_text(complete(prompt, mock_response=json.dumps(GOOD)), prompt), prompt)
    assert answer.valid and answer.data == GOOD


def test_output_config_answer_is_the_message_text(triage):
    prompt = render(triage, "sonnet")
    answer = read_answer(answer_text(complete(prompt, mock_response=json.dumps(GOOD)), prompt), prompt)
    assert answer.valid and answer.data == GOOD


def test_forced_tool_call_arguments(triage):
    prompt = render(triage, "claude-sonnet-4-6", Knobs(structured_output="forced_tool"))
    call = {"id": "c1", "type": "function", "function": {"name": "respond", "arguments": json.dumps(GOOD)}}
    message = complete(prompt, mock_tool_calls=[call])
    answer = read_answer(answer_text(message, prompt), prompt)
    assert answer.valid and answer.data["severity"] == "high"


def test_json_in_prose_and_fences_for_open_models(triage):
    prompt = render(triage, "ollama/llama3.1")
    prose = f"Let me think step by step. The report shows...\n\n```json\n{json.dumps(GOOD, indent=2)}\n```\nDone."
    answer = read_answer(answer_text(complete(prompt, mock_response=prose), prompt), prompt)
    assert answer.valid and answer.data == GOOD
    bare = "Severity assessment: " + json.dumps(GOOD) + " -- end"
    assert read_answer(bare, prompt).data == GOOD


def test_schema_violations_are_listed_by_path(triage):
    prompt = render(triage, "openai/gpt-4o")
    answer = read_answer(json.dumps({"severity": "severe", "rationale": "x" * 500, "extra": 1}), prompt)
    paths = [issue.path for issue in answer.issues]
    assert not answer.valid and paths == ["$", "$.rationale", "$.severity"]
    message = correction_message(answer)
    assert "$.severity: 'severe' is not one of" in message and "is too long" in message


def test_undecodable_answers():
    assert decode_json("")[1] == "the answer is empty; expected a JSON value"
    assert "no JSON value" in decode_json("I cannot help with that.")[1]
    assert decode_json('{"a": [1, 2]} trailing')[0] == {"a": [1, 2]}


def test_free_text_agents_keep_the_text():
    signature = lower(load_definition(REPO / "signatures" / "security-advisor.md"))
    prompt = render(signature, "openai/gpt-4o")
    answer = read_answer("## L0 — Executive summary\nRotate the keys.", prompt)
    assert answer.valid and answer.data.startswith("## L0")


def test_deep_or_huge_answers_are_answer_issues_not_errors(triage):
    prompt = render(triage, "openai/gpt-4o")
    for raw in ("[" * 1000, "Here it is: " + "[" * 1000 + " done", '{"a": "' + "[" * 100_000, "[" * 200 + "]" * 200):
        answer = read_answer(raw, prompt)
        assert not answer.valid
        assert answer.issues[0].message == f"the answer nests JSON more than {MAX_DEPTH} levels deep"
    huge = read_answer(json.dumps({**GOOD, "rationale": "x" * MAX_ANSWER_CHARS}), prompt)
    assert not huge.valid and "answers over 1,000,000 are not read" in huge.issues[0].message
    in_a_string = read_answer(json.dumps({**GOOD, "rationale": "[" * 5000}), prompt)
    assert [issue.path for issue in in_a_string.issues] == ["$.rationale"]  # too long, not too deep


def test_validation_stops_at_the_depth_bound():
    recursive = {"type": "array", "items": {"$ref": "#"}}
    assert validate(json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH), recursive) == []
    deeper = json.loads("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    assert [issue.path for issue in validate(deeper, recursive)] == ["$"]
    assert tool_calls({"tool_calls": [{"function": {"name": "lookup", "arguments": "[" * 5000}}]}) == \
        [{"id": "call_0", "name": "lookup", "arguments": "[" * 5000}]  # left as the text sent; an id by position


def test_a_deep_answer_from_the_wire_is_an_invalid_result(tree):
    from fault_server import FaultServer

    from rosetta.runtime.agent import load
    from rosetta.runtime.result import RetryPolicy

    report = {"report": "SQL injection in the login form lets an unauthenticated attacker bypass authentication."}
    with FaultServer([("ok", "[" * 1000)]) as server:
        result = load("vuln-triage", project=tree).run(report, "openai/gpt-4o", policy=RetryPolicy(attempts=1),
                                                       api_base=server.url, api_key="sk-test-not-a-real-key")
    assert not result.valid and [a.outcome for a in result.attempts] == ["invalid", "invalid"]
    assert "more than 64 levels deep" in result.attempts[0].error


def test_an_answer_is_checked_against_schema_patterns_within_a_time_limit():
    """Issue 52: the pattern is the definition's, the text the model's; a backtracking pattern on a
    hostile answer is an invalid answer within the time limit, not a hung process."""
    import time

    schema = {"type": "object", "properties": {"id": {"type": "string", "pattern": "^(a|aa)+$"},
                                               "code": {"type": "string", "pattern": "^[A-Z]{3}$"}}}
    started = time.monotonic()
    issues = validate({"id": "a" * 64 + "!", "code": "ABC"}, schema)
    assert time.monotonic() - started < 5
    assert [i.path for i in issues] == ["$.id"] and "ran out of time" in issues[0].message
    assert validate({"id": "aaaa", "code": "ABC"}, schema) == []
    assert "does not match" in validate({"id": "aa", "code": "abc"}, schema)[0].message
