"""Instruction candidates, MIPRO-style: a model reads a summary of the data and the current
instructions and proposes rewrites.

The proposer may be weak (the embedded base model is): an answer that is not a usable instruction
— unparsable, too short or long, a copy of the original or of the data, full of template debris —
is dropped, never fatal. When nothing usable comes back the search runs over demos and format
knobs only, and says so.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rosetta.datasets import Example
    from rosetta.runtime.salvage import Complete
    from rosetta.signature import Signature

MIN_CHARS = 80
MAX_CHARS = 4000


@dataclass(frozen=True)
class Proposals:
    """What the proposer produced and what became of it."""

    model: str | None
    asked: int
    usable: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()  # one reason per unusable proposal
    calls: int = 0
    cost: float = 0.0
    note: str = ""
    errors: tuple[str, ...] = field(default=())

    def describe(self) -> dict[str, Any]:
        data: dict[str, Any] = {"model": self.model, "asked": self.asked, "usable": len(self.usable),
                                "calls": self.calls}
        if self.note:
            data["note"] = self.note
        return data


def original_instructions(signature: Signature) -> str:
    """The role and context text the candidates replace (constraints and format are kept)."""
    return "\n\n".join(s.content for s in signature.instructions if s.role.value not in ("constraints", "format")
                       and s.content).strip()


def data_summary(signature: Signature, train: tuple[Example, ...], label_of: Callable[[Any], str] | None) -> str:
    """A few plain sentences about the training data (what MIPRO calls the dataset summary)."""
    lines = [f"{len(train)} labeled examples."]
    for field_ in signature.inputs:
        lengths = [len(str(e.inputs.get(field_.name, ""))) for e in train]
        if lengths:
            lines.append(f"Input `{field_.name}`: {min(lengths)}–{max(lengths)} characters, "
                         f"median {sorted(lengths)[len(lengths) // 2]}.")
    if label_of is not None:
        counts = Counter(label_of(e.output) for e in train)
        lines.append("Answer labels: " + ", ".join(f"{label} ({n})" for label, n in counts.most_common()) + ".")
    for example in train[:2]:
        text = json.dumps(example.inputs, ensure_ascii=False)[:300]
        answer = json.dumps(example.output, ensure_ascii=False)[:200]
        lines.append(f"Example input: {text}\nExample answer: {answer}")
    return "\n".join(lines)


def proposal_prompt(signature: Signature, summary: str, original: str, tip: str, number: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You improve the instructions of an AI agent. Reply with JSON only: "
                                      '{"instruction": "<the complete new instructions>"}.'},
        {"role": "user", "content": (
            f"Agent: {signature.name} — {signature.description}\n\nWhat the data looks like:\n{summary}\n\n"
            f"Current instructions:\n{original}\n\nWrite improved instructions for this task (candidate {number}). "
            f"{tip} Keep every rule that decides the answer; do not include examples.")},
    ]


TIPS = (
    "Be concise and direct.",
    "Make the decision criteria explicit, as a short checklist.",
    "Describe the role and the audience precisely.",
    "Emphasize the most common mistakes to avoid.",
    "Restate the task in plain words first, then the rules.",
    "Prefer short numbered rules.",
)


PROPOSAL_SCHEMA = {
    "type": "object",
    "properties": {"instruction": {"type": "string", "minLength": MIN_CHARS, "maxLength": 1600}},
    "required": ["instruction"],
    "additionalProperties": False,
}
"""What a proposal must be. Sent as ``response_format`` to a model that constrains its output to a
schema, so even a weak base model answers with parsable JSON (the bound keeps it within max_tokens)."""


def propose(signature: Signature, train: tuple[Example, ...], *, model: str | None, count: int,
            complete: Complete, label_of: Callable[[Any], str] | None = None,
            max_tokens: int = 700, structured: bool = False,
            on_call: Callable[[int], None] | None = None) -> Proposals:
    """Ask ``model`` for ``count`` candidates; never raises for what the model says or fails to say.

    ``structured``: the model accepts a JSON Schema ``response_format`` (see ``PROPOSAL_SCHEMA``);
    ``on_call(n)`` is told before the n-th call (1-based), for progress."""
    if not model or count <= 0:
        return Proposals(model, 0, note="no proposer: the search covers demos, format knobs and the terse built-in "
                                        "instruction only")
    original = original_instructions(signature)
    summary = data_summary(signature, train, label_of)
    usable: list[str] = []
    dropped: list[str] = []
    errors: list[str] = []
    calls = 0
    cost = 0.0
    for number in range(count):
        if on_call is not None:
            on_call(number + 1)
        messages = proposal_prompt(signature, summary, original, TIPS[number % len(TIPS)], number + 1)
        try:
            extra = {"response_format": {"type": "json_schema", "json_schema": {
                "name": "proposal", "schema": PROPOSAL_SCHEMA, "strict": False}}} if structured else {}
            response = complete(model=model, messages=messages, temperature=0.7, max_tokens=max_tokens,
                                seed=number, num_retries=0, **extra)
            calls += 1
            cost += float((getattr(response, "_hidden_params", {}) or {}).get("response_cost") or 0.0)
            text = response.choices[0].message.content or ""
        except Exception as error:  # any provider failure: this proposal is lost, the search goes on
            calls += 1
            errors.append(f"{type(error).__name__}: {str(error).splitlines()[0][:160] if str(error) else ''}")
            dropped.append("the call failed")
            continue
        candidate, reason = _usable(text, original, train, usable)
        if candidate is None:
            dropped.append(reason)
        else:
            usable.append(candidate)
    note = ""
    if not usable:
        note = (f"the proposer ({model}) gave no usable instruction ({_reasons(dropped)}): "
                "the search covers demos, format knobs and the terse built-in instruction only")
    elif dropped:
        note = f"{len(dropped)} of {count} proposals dropped ({_reasons(dropped)})"
    return Proposals(model, count, tuple(usable), tuple(dropped), calls, cost, note, tuple(errors))


def _reasons(dropped: list[str]) -> str:
    return ", ".join(f"{reason} ×{n}" if n > 1 else reason for reason, n in Counter(dropped).most_common())


def _usable(text: str, original: str, train: tuple[Example, ...], accepted: list[str]) -> tuple[str | None, str]:
    """The instruction in ``text``, or None and why it cannot be used."""
    candidate = _extract(text)
    if candidate is None:
        if text.lstrip().startswith("{") and "}" not in text:  # what a schema-constrained answer looks like cut off
            return None, "unfinished JSON (a loop or the token limit cut it off)"
        return None, "not JSON with an instruction"
    candidate = candidate.strip()
    if len(candidate) < MIN_CHARS:
        return None, "too short"
    if len(candidate) > MAX_CHARS:
        return None, "too long"
    if re.search(r"[{}]{2}|\{[A-Za-z_]+\}|<\|[^>]*\|>|<(start|end)_of_turn>", candidate):
        return None, "template debris"
    words = re.findall(r"[A-Za-z]{2,}", candidate)
    if len(words) < 12 or len(set(w.lower() for w in words)) < len(words) * 0.3:
        return None, "not prose (repetitive or too few words)"
    if _normal(candidate) == _normal(original) or any(_normal(candidate) == _normal(a) for a in accepted):
        return None, "a copy of an existing instruction"
    for example in train:
        for value in example.inputs.values():
            if isinstance(value, str) and len(value) > 60 and value[:60] in candidate:
                return None, "copies training data"
    return candidate, ""


def _extract(text: str) -> str | None:
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if match is None:
        return None
    try:
        data = json.loads(match.group(0))
    except json.JSONDecodeError:
        return None
    value = data.get("instruction") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()
