"""How each structured-output mechanism works, in one table keyed by mechanism (the way sqlglot
keys transforms by node): the request parameters that ask for the schema, the Format-section
instruction, which schema transforms apply, whether the schema travels in the request, and where
the answer comes back. The renderer builds requests from it; the runtime reads answers with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rosetta.providers.kinds import StructuredOutput

RESPOND_TOOL = "respond"
"""Name of the tool that carries the answer when structured output is a forced tool call."""


@dataclass(frozen=True)
class Request:
    """What a request builder knows: the provider-ready schema, its name, and the call's context."""

    schema: dict[str, Any]
    name: str
    has_tools: bool  # the agent has tools of its own
    json_mode: bool  # the model offers a plain "answer in JSON" mode
    constrained_decoding: bool  # a JSON Schema in response_format constrains decoding (llama.cpp grammars)


@dataclass(frozen=True)
class Mechanism:
    """One mechanism's rules."""

    request: Callable[[Request], dict[str, Any]]
    instruction: Callable[[dict[str, Any]], str]
    schema_in_request: bool  # the schema's tokens travel in the request, not the prompt text
    answer_in_tool: bool  # the answer is the arguments of the RESPOND_TOOL call, not the message text
    only_transforms: frozenset[str] | None = None  # the adapter's schema transforms that apply (None: all)


def _json_schema(strict: bool) -> Callable[[Request], dict[str, Any]]:
    def request(call: Request) -> dict[str, Any]:
        spec: dict[str, Any] = {"name": call.name, "schema": call.schema, **({"strict": True} if strict else {})}
        return {"response_format": {"type": "json_schema", "json_schema": spec}}
    return request


def _forced_tool(call: Request) -> dict[str, Any]:
    tool = {"type": "function", "function": {
        "name": RESPOND_TOOL, "description": "Give the final answer in the required structure.",
        "parameters": call.schema}}
    choice: Any = "required" if call.has_tools else {"type": "function", "function": {"name": RESPOND_TOOL}}
    return {"tools": [tool], "tool_choice": choice}


def _output_config(call: Request) -> dict[str, Any]:
    # sent as Anthropic spells it: litellm passes output_config through, while its translation of
    # response_format still emits the beta `output_format` that the current API no longer documents
    return {"output_config": {"format": {"type": "json_schema", "schema": call.schema}}}


def _prompt_schema(call: Request) -> dict[str, Any]:
    if call.constrained_decoding:  # the schema in the prompt, and constraining decoding too
        return _json_schema(strict=False)(call)
    return {"response_format": {"type": "json_object"}} if call.json_mode else {}


def _json_object(call: Request) -> dict[str, Any]:
    return {"response_format": {"type": "json_object", "schema": call.schema}}


def _in_prompt(schema: dict[str, Any]) -> str:
    return ("Respond with a single JSON object that is valid against this JSON Schema, and nothing after it:\n"
            "```json\n" + json.dumps(schema, indent=2) + "\n```")


def _native(_schema: dict[str, Any]) -> str:
    return "Respond in JSON matching the response schema."


MECHANISMS: dict[StructuredOutput, Mechanism] = {
    StructuredOutput.JSON_SCHEMA_STRICT: Mechanism(_json_schema(strict=True), _native, True, False),
    StructuredOutput.RESPONSE_SCHEMA: Mechanism(_json_schema(strict=False), _native, True, False),
    StructuredOutput.OUTPUT_CONFIG: Mechanism(_output_config, _native, True, False),
    StructuredOutput.FORCED_TOOL: Mechanism(
        _forced_tool, lambda _schema: f"Give your final answer by calling the `{RESPOND_TOOL}` tool.", True, True,
        only_transforms=frozenset({"inline_refs", "constraints_to_descriptions", "gemini_subset"})),
    StructuredOutput.JSON_OBJECT: Mechanism(_json_object, _in_prompt, False, False,
                                            only_transforms=frozenset({"inline_refs"})),
    StructuredOutput.PROMPT_SCHEMA: Mechanism(_prompt_schema, _in_prompt, False, False,
                                              only_transforms=frozenset({"inline_refs"})),
}
