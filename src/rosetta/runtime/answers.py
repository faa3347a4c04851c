"""Reading a model's answer: take it from where the prompt's structured-output mechanism puts it,
decode it, and validate it against the agent's own schema.

Native schema responses and forced tool calls carry clean JSON; open models answer in text, often
with a code fence or a sentence around the JSON, so text answers are searched for the first JSON
value that decodes. Validation always uses the agent's original schema (numeric and string
constraints included) with jsonschema, whatever the provider was sent.

An answer is data from outside: its size and nesting are bounded, and one over a bound is an
answer issue like any other (the model is asked again), never an error of the caller's. Issue
messages quote the answer, so credentials are redacted from them, and they are cut to a bounded
excerpt, as is the bad answer a correction quotes back: a 5 MB answer costs one 5 MB response,
not a 5 MB request on every re-ask.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rosetta.definition.patterns import schema_validator
from rosetta.parts import deeper_than
from rosetta.render.mechanisms import MECHANISMS, RESPOND_TOOL
from rosetta.render.prompt import RenderedPrompt
from rosetta.runtime.secrets import redact

MAX_ANSWER_CHARS = 1_000_000
"""Longer answers are not decoded: searching them for JSON would cost the caller's time, not the model's."""
MAX_DEPTH = 64
"""Deeper JSON is not validated: Python's decoder and jsonschema recurse once per level (or more)."""
_TOO_DEEP = f"the answer nests JSON more than {MAX_DEPTH} levels deep"
QUOTE_CHARS = 4_000
"""The most of a bad answer a correction quotes back to the model (its head and tail)."""
ISSUE_CHARS = 500
"""The most of one issue's path or message kept (validation messages quote the offending value)."""
MAX_ISSUES = 20
"""Issues a correction lists; the rest are counted."""

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Issue:
    """One way an answer is wrong, by JSON path."""

    path: str  # e.g. "$.affected[0].ecosystem"
    message: str


@dataclass(frozen=True)
class Answer:
    """A decoded answer: ``data`` is the JSON value (or the text for free-text agents)."""

    raw: str
    data: Any
    issues: tuple[Issue, ...] = ()

    @property
    def valid(self) -> bool:
        return not self.issues


def answer_text(message: object, prompt: RenderedPrompt) -> str:
    """The part of a chat completion message that holds the answer (tool arguments for forced tools)."""
    if prompt.structured_output is not None and MECHANISMS[prompt.structured_output].answer_in_tool:
        for call in _get(message, "tool_calls") or []:
            function = _get(call, "function")
            if _get(function, "name") == RESPOND_TOOL:
                arguments = _get(function, "arguments")
                return arguments if isinstance(arguments, str) else json.dumps(arguments)
    return _get(message, "content") or ""


def tool_calls(message: object) -> list[dict[str, Any]]:
    """The agent's own tool calls in a message (not rosetta's structured-output tool), as
    ``{"id", "name", "arguments"}``; arguments that are not a JSON object stay as the text sent,
    and a call the provider gave no id gets one from its position."""
    calls = []
    for position, call in enumerate(_get(message, "tool_calls") or []):
        function = _get(call, "function")
        name = _get(function, "name")
        if name == RESPOND_TOOL:
            continue
        arguments = _get(function, "arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except (json.JSONDecodeError, RecursionError):
                pass
        calls.append({"id": _get(call, "id") or f"call_{position}", "name": name, "arguments": arguments})
    return calls


def answered_in_tool(message: object, prompt: RenderedPrompt) -> bool:
    """Whether the message holds rosetta's structured-output tool call (the answer, not a request
    for the agent's tools)."""
    return (prompt.structured_output is not None and MECHANISMS[prompt.structured_output].answer_in_tool
            and any(_get(_get(call, "function"), "name") == RESPOND_TOOL for call in _get(message, "tool_calls") or []))


def read_answer(raw: str, prompt: RenderedPrompt) -> Answer:
    """Decode and validate ``raw`` for ``prompt``; problems become issues, never exceptions."""
    if prompt.output_schema is None:  # free text: any text but none (a person's empty manual answer)
        return Answer(raw, raw, () if raw.strip() else (Issue("$", "the answer is empty; expected text"),))
    found, error = decode_json(raw)
    if error:
        return Answer(raw, None, (Issue("$", error),))
    return Answer(raw, found, tuple(validate(found, prompt.output_schema)))


def decode_json(text: str) -> tuple[Any, str | None]:
    """The JSON value in ``text``: the whole text, a fenced block, or the first value that decodes.

    Answers over :data:`MAX_ANSWER_CHARS`, and JSON too deep for the decoder, are not read."""
    stripped = text.strip()
    if not stripped:
        return None, "the answer is empty; expected a JSON value"
    if len(text) > MAX_ANSWER_CHARS:
        return None, f"the answer is {len(text):,} characters long; answers over {MAX_ANSWER_CHARS:,} are not read"
    try:
        return _first_json(text, stripped)
    except RecursionError:  # json recurses once per level: whatever the depth the stack allows, it is too deep
        return None, _TOO_DEEP


def _first_json(text: str, stripped: str) -> tuple[Any, str | None]:
    candidates = [stripped] + [m.group(1).strip() for m in _FENCE.finditer(text)]
    for candidate in candidates:
        try:
            return json.loads(candidate), None
        except json.JSONDecodeError:
            pass
    decoder = json.JSONDecoder()
    for start in (i for i, ch in enumerate(text) if ch in "{["):
        try:
            value, _ = decoder.raw_decode(text, start)
            return value, None
        except json.JSONDecodeError:
            continue
    return None, "no JSON value found in the answer; reply with a single JSON object"


def validate(data: object, schema: dict[str, Any]) -> list[Issue]:
    """Every schema violation of ``data``, by path (sorted, so messages are stable), credentials
    redacted; data nested deeper than :data:`MAX_DEPTH` is one issue, not validated."""
    if deeper_than(data, MAX_DEPTH):
        return [Issue("$", _TOO_DEEP)]
    validator = schema_validator(json.dumps(schema, sort_keys=True))
    issues = [Issue(excerpt(redact(_json_path(error.absolute_path)), ISSUE_CHARS),
                    excerpt(redact(error.message), ISSUE_CHARS)) for error in validator.iter_errors(data)]
    return sorted(issues, key=lambda issue: (issue.path, issue.message))


def excerpt(text: str, limit: int = QUOTE_CHARS) -> str:
    """``text`` when it fits in ``limit`` characters, else its head and tail around a marker that
    says how much was left out (about ``limit`` characters in all)."""
    if len(text) <= limit:
        return text
    head = limit * 3 // 4
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - head - tail:,} characters left out ...]\n{text[-tail:]}"


def quoted_answer(answer: Answer) -> str:
    """The bad answer as a correction quotes it back (the assistant turn): a bounded excerpt."""
    return excerpt(answer.raw or "")


def correction_message(answer: Answer) -> str:
    """The user turn that asks for a corrected answer, naming each problem by field path (at most
    :data:`MAX_ISSUES`, each bounded); says so when the answer quoted before it was shortened."""
    lines = [f"- {excerpt(issue.path, ISSUE_CHARS)}: {excerpt(issue.message, ISSUE_CHARS)}"
             for issue in answer.issues[:MAX_ISSUES]]
    if len(answer.issues) > MAX_ISSUES:
        lines.append(f"- and {len(answer.issues) - MAX_ISSUES} more")
    shortened = (f"(Your previous answer was {len(answer.raw):,} characters long; only its start and end are "
                 "quoted above.)\n" if len(answer.raw or "") > QUOTE_CHARS else "")
    return (shortened + "Your previous answer is not valid against the required JSON Schema:\n" + "\n".join(lines)
            + "\nReply again with the corrected JSON value only.")


def _json_path(parts: Iterable[str | int]) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _get(value: object, key: str) -> Any:
    """Attribute or key access (litellm returns objects; tests and recordings use dicts)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return value.get(key)
    return getattr(value, key, None)
