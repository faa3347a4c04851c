"""The embedded models call tools through the grammar (rosetta.local.tool_calls): every reply is a
call of a declared tool with arguments shaped by its schema, or the answer, and comes back in
OpenAI's shape — whole or streamed — so rosetta's tool loop runs on them like on a hosted model.
Real Gemma 3 270M, greedy decoding; what the 270M/135M models choose is measured in
bench/local_tool_calls.py, not asserted here."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from conftest import LOCAL_MODEL as MODEL
from conftest import REPO

import rosetta
from rosetta import RunOptions
from rosetta.local.litellm_offline import import_litellm
from rosetta.local.tool_calls import as_text, tool_turns
from rosetta.runtime.result import ModelCallError

litellm = import_litellm()

TABLE = {"type": "object", "properties": {"table": {"type": "string", "enum": ["users", "orders"]}},
         "required": ["table"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "describe_table", "description": "The columns of a table.",
                                           "parameters": TABLE}},
         {"type": "function", "function": {"name": "row_count", "description": "How many rows a table holds.",
                                           "parameters": TABLE}}]
MESSAGES = [{"role": "system", "content": "You review SQL queries. Look up every table a query reads."},
            {"role": "user", "content": "QUERY: SELECT email FROM users"}]


@pytest.fixture(autouse=True)
def cache_env(local_model: str, local_model_cache: Path) -> Path:
    return local_model_cache


def call(**params: object):
    return litellm.completion(model=MODEL, messages=MESSAGES, tools=TOOLS, temperature=0, max_tokens=60, **params)


def test_a_required_call_names_a_declared_tool_with_arguments_its_schema_accepts():
    response = call(tool_choice="required")
    message = response.choices[0].message
    assert response.choices[0].finish_reason == "tool_calls" and message.content is None
    [made] = message.tool_calls
    assert made.function.name in ("describe_table", "row_count") and made.id.startswith("call_")
    jsonschema.validate(json.loads(made.function.arguments), TABLE)


def test_tool_choice_picks_the_tool_or_leaves_the_tools_out():
    named = call(tool_choice={"type": "function", "function": {"name": "row_count"}}).choices[0].message
    assert [c.function.name for c in named.tool_calls] == ["row_count"]
    plain = call(tool_choice="none").choices[0]
    assert not plain.message.tool_calls and isinstance(plain.message.content, str)


def test_auto_replies_with_a_call_or_an_answer_in_the_answer_format():
    verdict = {"type": "object", "properties": {"verdict": {"type": "string", "enum": ["ok", "fix"]}},
               "required": ["verdict"], "additionalProperties": False}
    response = call(response_format={"type": "json_schema", "json_schema": {"name": "v", "schema": verdict}})
    message = response.choices[0].message
    if message.tool_calls:
        jsonschema.validate(json.loads(message.tool_calls[0].function.arguments), TABLE)
    else:
        jsonschema.validate(json.loads(message.content), verdict)


def test_a_streamed_call_arrives_as_tool_calls_sync_and_async():
    whole = call(tool_choice="required").choices[0].message.tool_calls[0]
    chunks = list(call(tool_choice="required", stream=True))
    built = litellm.stream_chunk_builder(chunks).choices[0]
    assert built.finish_reason == "tool_calls"
    assert [(c.function.name, c.function.arguments) for c in built.message.tool_calls] == \
        [(whole.function.name, whole.function.arguments)]

    async def streamed() -> list:
        stream = await litellm.acompletion(model=MODEL, messages=MESSAGES, tools=TOOLS, temperature=0, max_tokens=60,
                                           tool_choice="required", stream=True)
        return [chunk async for chunk in stream]

    import asyncio

    built = litellm.stream_chunk_builder(asyncio.run(streamed())).choices[0].message
    assert built.tool_calls[0].function.arguments == whole.function.arguments


def test_the_history_tool_turns_become_text_the_model_reads():
    history = [*MESSAGES,
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "c1", "type": "function", "function": {"name": "describe_table", "arguments": '{"table": "users"}'}},
                   {"id": "c2", "type": "function", "function": {"name": "row_count", "arguments": '{"table": "users"}'}}]},
               {"role": "tool", "tool_call_id": "c1", "content": '{"email": "text"}'},
               {"role": "tool", "tool_call_id": "c2", "content": "120000"}]
    shown = as_text(history, tool_turns({"tools": TOOLS}, None))
    assert [m["role"] for m in shown] == ["system", "user", "assistant", "user"]  # a chat template's turns only
    system = "".join(p["text"] for p in shown[0]["content"])
    assert "- describe_table: The columns of a table." in system and '{"response": <your answer>}' in system
    assert shown[2]["content"].splitlines() == ['{"tool_call": {"name": "describe_table", "arguments": {"table": "users"}}}',
                                                '{"tool_call": {"name": "row_count", "arguments": {"table": "users"}}}']
    results = "".join(p["text"] for p in shown[3]["content"])
    assert results.startswith('Result of describe_table: {"email": "text"}\n\nResult of row_count: 120000')
    response = litellm.completion(model=MODEL, messages=history, tools=TOOLS, temperature=0, max_tokens=40)
    assert response.choices[0].finish_reason in ("stop", "tool_calls", "length")  # the history reads without error


def test_bad_tool_requests_are_clear_errors():
    with pytest.raises(litellm.BadRequestError, match="tool_choice names 'drop_table'"):
        call(tool_choice={"type": "function", "function": {"name": "drop_table"}})
    with pytest.raises(litellm.BadRequestError, match="not the legacy functions parameter"):
        litellm.completion(model=MODEL, messages=MESSAGES, functions=[{"name": "f", "parameters": {}}], max_tokens=4)


def test_the_tool_loop_runs_on_the_embedded_model():
    """The sql-review fixture on Gemma 3 270M: the model's calls reach the functions with arguments
    the tools' schemas accept, their results go back, and the run ends with a valid answer or, at
    ``max_tool_steps``, with the loop's own error (the 270M model tends to repeat its call: see
    bench/local_tool_calls.py) — never with a malformed call or an undocumented exception."""
    agent = rosetta.load(REPO / "tests/fixtures/tools/sql-review.md")
    seen: list[tuple[str, dict]] = []

    def tool(name: str):
        def run(**arguments: object) -> object:
            seen.append((name, arguments))
            return {"columns": {"id": "integer", "email": "text"}} if name == "describe_table" else 120_000
        return run

    options = RunOptions(tools={"describe_table": tool("describe_table"), "row_count": tool("row_count")},
                         fallbacks=[], max_tool_steps=2, overrides={"temperature": 0})
    try:
        result = agent.run({"query": "SELECT email FROM users"}, model=MODEL, options=options)
        assert result.valid, result.raw
    except ModelCallError as error:
        assert "still calling tools after 2 rounds of tool results" in str(error), error
    schemas = {spec.name: spec.parameters for spec in agent.prompt_for(MODEL).tool_specs}
    assert seen, "the model made no call the loop could run"
    for name, arguments in seen:
        jsonschema.validate(arguments, schemas[name])
