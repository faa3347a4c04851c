"""A finer score for classification: the probability the model gave the correct label, read from
the log-probabilities of one answer, instead of 0 or 1 for the label it happened to pick.

Two prompts that both get a row right (or wrong) still differ in how sure the model was, so a
race over candidates separates them on fewer rows. It applies where the metric scores exactly
one enum-valued field (``exact`` on an output whose only field is a label, or ``fields`` with one
weighted enum field) and the provider returns log-probabilities (``logprobs``, OpenAI's shape:
the embedded model, OpenAI, and others through litellm). Reported scores stay the plain metric.

The probability is read along the answer's own tokens: where the label's value starts, the mass
of the alternatives consistent with the correct label, times the same at each following token
while the answer itself keeps to the correct label. A label the answer left at token ``i`` gets
the consistent mass at ``i`` only (the rest of its path is unknown; no second call is made).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rosetta.optimize.metrics import Metric
    from rosetta.signature import Signature

TOP_LOGPROBS = 20
"""Alternatives asked per token: OpenAI's maximum, and more than the labels a task usually has."""


@dataclass(frozen=True)
class LabelField:
    """The output field a classification metric scores (``None``: the whole output is the label)."""

    name: str | None
    labels: tuple[str, ...]

    def value(self, output: object) -> object:
        return output.get(self.name) if self.name is not None and isinstance(output, dict) else output


def label_field(signature: Signature, metric: Metric) -> LabelField | None:
    """The one enum field ``metric`` scores, or None when its score is not a single label's match."""
    schema = signature.output_schema or {}
    properties = schema.get("properties") or {}
    if metric.name == "exact":
        if isinstance(schema.get("enum"), list) and schema.get("type") == "string":
            return LabelField(None, tuple(map(str, schema["enum"])))
        scored = list(properties) if len(properties) == 1 else []
    elif metric.name == "fields":
        weights = metric.settings.get("fields") or {name: 1.0 for name in properties}
        scored = [name for name, weight in weights.items() if weight]
    else:
        return None
    if len(scored) != 1:
        return None
    prop = properties.get(scored[0]) or {}
    enum = prop.get("enum") if isinstance(prop, dict) else None
    if not isinstance(enum, list) or not enum or not all(isinstance(v, str) for v in enum):
        return None
    return LabelField(scored[0], tuple(enum))


def label_probability(content: Sequence[Any], field: LabelField, correct: str) -> float | None:
    """P(``correct``) from an answer's ``logprobs.content`` (entries with ``token``, ``logprob`` and
    ``top_logprobs``, as dicts or litellm objects); None when the answer holds no such value."""
    tokens = [_get(entry, "token") or "" for entry in content]
    text = "".join(tokens)
    start = _value_start(text, field.name)
    if start is None:
        return None
    target = json.dumps(correct, ensure_ascii=False)[1:]  # the label as JSON text, with its closing quote
    offset, index = 0, 0
    while index < len(tokens) and offset + len(tokens[index]) <= start:
        offset += len(tokens[index])
        index += 1
    skip = start - offset  # the value may start inside a token (e.g. `":"p`)
    probability, consumed = 1.0, 0
    while index < len(tokens):
        entry = content[index]
        rest = target[consumed:]
        alternatives = _get(entry, "top_logprobs") or [entry]
        mass = 0.0
        for alternative in alternatives:
            token = _get(alternative, "token") or ""
            if skip and not token.startswith(tokens[index][:skip]):
                continue
            piece = token[skip:]
            if piece and (rest.startswith(piece) or piece.startswith(rest)):
                mass += math.exp(float(_get(alternative, "logprob")))
        probability *= min(mass, 1.0)
        chosen = tokens[index][skip:]
        if not chosen or not rest.startswith(chosen) or chosen == rest:
            break  # the answer left the correct label here, or finished it
        consumed += len(chosen)
        index, skip = index + 1, 0
    return max(0.0, min(1.0, probability))


def _value_start(text: str, name: str | None) -> int | None:
    """Where the string value of ``name`` begins in ``text`` (after its opening quote)."""
    if name is None:
        match = re.match(r'\s*"', text)
    else:
        match = re.search(re.escape(json.dumps(name)) + r'\s*:\s*"', text)
    return match.end() if match else None


def _get(item: object, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)
