"""Reading answers per adapter mechanism (through litellm's mock responses) and validating them."""

from __future__ import annotations

import json

import pytest

from conftest import REPO
from rosetta.definition import load_definition
from rosetta.render import render
from rosetta.runtime.answers import answer_text, correction_message, decode_json, read_answer
from rosetta.signature import lower

GOOD = {"severity": "high", "rationale": "Unauthenticated SQL injection in the login form."}


@pytest.fixture(scope="module")
def triage():
    return lower(load_definition(REPO / "signatures" / "vuln-triage.md"))


def complete(prompt, **mock):
    from rosetta.providers.litellm_offline import import_litellm

    litellm = import_litellm()
    return litellm.completion(**prompt.to_litellm({"report": "SQLi in login"}), **mock).choices[0].message


def test_native_schema_answer(triage):
    prompt = render(triage, "openai/gpt-4o")
    answer = read_answer(answer_text(complete(prompt, mock_response=json.dumps(GOOD)), prompt), prompt)
    assert answer.valid and answer.data == GOOD


def test_forced_tool_call_arguments(triage):
    prompt = render(triage, "sonnet")
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
