"""Tool calls for the embedded models, which have no tool-calling format of their own.

The request's tools are described in the prompt, and a grammar makes the reply one JSON object:
``{"tool_call": {"name": ..., "arguments": {...}}}`` — one declared tool, its arguments shaped by
the tool's JSON Schema — or ``{"response": ...}``, the answer (text, or the ``response_format``'s
JSON). :func:`read_reply` turns it into OpenAI's ``message.tool_calls`` or the message's content,
so rosetta's tool loop (and any litellm caller) sees what a hosted model would send. The history's
tool turns become text the model can read: its chat template knows user and assistant turns only.

One call per turn (a small model gets one decision at a time); ``tool_choice`` ``"none"`` leaves
the tools out, ``"required"`` or a named function leaves the answer out.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rosetta.errors import Problem, UsageError

CALL, ANSWER = "tool_call", "response"


@dataclass(frozen=True)
class ToolTurns:
    """What a request with tools lets the model reply: a call of one of ``tools``, or (where
    ``may_answer``) the answer, valid against ``answer`` (None: the answer is text)."""

    tools: tuple[dict[str, Any], ...]  # OpenAI function specs: name, description, parameters
    answer: dict[str, Any] | None
    may_answer: bool = True

    def schema(self) -> dict[str, Any]:
        """The JSON Schema every reply is decoded by."""
        calls = [{"type": "object", "properties": {"name": {"const": tool["name"]},
                                                   "arguments": tool.get("parameters") or {"type": "object"}},
                  "required": ["name", "arguments"], "additionalProperties": False} for tool in self.tools]
        branches = [{"type": "object", "properties": {CALL: {"anyOf": calls}}, "required": [CALL],
                     "additionalProperties": False}] if calls else []
        if self.may_answer:
            branches.append({"type": "object", "properties": {ANSWER: self.answer or {"type": "string"}},
                             "required": [ANSWER], "additionalProperties": False})
        return branches[0] if len(branches) == 1 else {"anyOf": branches}

    def instructions(self) -> str:
        """How the model is told about its tools and the reply's form."""
        lines = ["You can call these tools:"]
        for tool in self.tools:
            lines.append(f"- {tool['name']}: {tool.get('description') or 'no description'} Arguments (JSON "
                         f"Schema): {json.dumps(tool.get('parameters') or {'type': 'object'}, ensure_ascii=False)}")
        call = '{"%s": {"name": "<tool>", "arguments": {...}}}' % CALL
        lines.append(f"Reply with one JSON object: {call} to call a tool (its result comes back in the next "
                     "message)" + (f', or {{"{ANSWER}": <your answer>}} once you have what you need.'
                                   if self.may_answer else "."))
        return "\n".join(lines)


def tool_turns(params: Mapping[str, Any], answer: dict[str, Any] | None) -> ToolTurns | None:
    """The reply a request with ``tools`` allows (None: a request without tools, or ``tool_choice:
    "none"``); ``answer`` is the schema ``response_format`` gives the answer."""
    if params.get("functions"):
        raise UsageError(Problem("local models take tools, not the legacy functions parameter", field="functions"))
    tools = [t.get("function") if isinstance(t, Mapping) else None for t in params.get("tools") or []]
    if not all(isinstance(t, Mapping) and isinstance(t.get("name"), str) for t in tools):
        raise UsageError(Problem("each tool must be {'type': 'function', 'function': {'name': ..., 'parameters': "
                                 "{...}}}", field="tools"))
    choice = params.get("tool_choice") or "auto"
    if not tools or choice == "none":
        return None
    if isinstance(choice, Mapping):  # {"type": "function", "function": {"name": ...}}
        name = (choice.get("function") or {}).get("name")
        tools = [t for t in tools if t["name"] == name]
        if not tools:
            raise UsageError(Problem(f"tool_choice names {name!r}, which is not among the tools", field="tool_choice"))
        return ToolTurns(tuple(tools), answer, may_answer=False)
    if choice not in ("auto", "required"):
        raise UsageError(Problem(f"unknown tool_choice {choice!r}", field="tool_choice",
                                 expected='"auto" | "required" | "none" | {"type": "function", ...}'))
    return ToolTurns(tuple(tools), answer, may_answer=choice == "auto")


def as_text(messages: list[dict[str, Any]], turns: ToolTurns | None) -> list[dict[str, Any]]:
    """``messages`` as the model reads them: the tools described at the end of the first
    (system) message, an assistant turn's calls as the JSON it would have written, and the tool
    results that follow it as one user turn (contents stay text parts, read by the provider)."""
    names = {call["id"]: call["function"]["name"] for m in messages if m.get("role") == "assistant"
             for call in m.get("tool_calls") or [] if call.get("id")}
    out: list[dict[str, Any]] = []
    results = False  # whether the last turn holds tool results
    for message in messages:
        role = message.get("role")
        if role == "tool":
            name = message.get("name") or names.get(message.get("tool_call_id"), "the tool")
            parts = [_part(("\n\n" if results else "") + f"Result of {name}: "), *_parts(message.get("content"))]
            if results:
                out[-1] = {"role": "user", "content": out[-1]["content"] + parts}
            else:
                out.append({"role": "user", "content": parts})
            results = True
            continue
        results = False
        if role == "assistant" and message.get("tool_calls"):
            written = [json.dumps({CALL: {"name": call["function"]["name"], "arguments": _arguments(call)}},
                                  ensure_ascii=False) for call in message["tool_calls"]]
            said = [p["text"] for p in _parts(message.get("content")) if isinstance(p, dict) and p.get("text")]
            out.append({"role": "assistant", "content": "\n".join(said + written)})
        else:
            out.append(dict(message))
    if turns is not None:
        if out and out[0].get("role") == "system":
            out[0] = {**out[0], "content": [*_parts(out[0].get("content")), _part("\n\n" + turns.instructions())]}
        else:
            out.insert(0, {"role": "system", "content": turns.instructions()})
    return out


def read_reply(text: str, turns: ToolTurns) -> tuple[str | None, list[dict[str, Any]]]:
    """(content, tool_calls) from a reply decoded by ``turns.schema()``; a reply that does not
    parse (cut off by ``max_tokens``) is returned as the content, for the caller to see."""
    try:
        reply = json.loads(text)
    except json.JSONDecodeError:
        return text, []
    if isinstance(reply, dict) and isinstance(reply.get(CALL), dict):
        call = reply[CALL]
        return None, [{"id": f"call_{secrets.token_hex(12)}", "type": "function",
                       "function": {"name": call.get("name"),
                                    "arguments": json.dumps(call.get("arguments"), ensure_ascii=False)}}]
    if isinstance(reply, dict) and ANSWER in reply:
        answer = reply[ANSWER]
        return (answer if isinstance(answer, str) and turns.answer is None
                else json.dumps(answer, ensure_ascii=False)), []
    return text, []


def _arguments(call: Mapping[str, Any]) -> Any:
    arguments = call["function"].get("arguments")
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
    return arguments


def _parts(content: Any) -> list[Any]:
    if content is None:
        return []
    return [_part(content)] if isinstance(content, str) else list(content)


def _part(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}
