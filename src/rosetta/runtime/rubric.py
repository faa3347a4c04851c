"""A rubric: binary criteria an answer is graded against (rosetta.runtime.review grades it).

Its own module so that what only reads a rubric (``RunOptions`` checks one when it is made) does not
import the reviewer and the runtime behind it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rosetta.errors import Problem, UsageError


@dataclass(frozen=True)
class Criterion:
    """One binary criterion; ``weight`` counts in :attr:`Review.score`."""

    id: str
    text: str
    weight: float = 1.0


@dataclass(frozen=True)
class Rubric:
    criteria: tuple[Criterion, ...]

    @classmethod
    def of(cls, value: Rubric | str | Sequence[Any] | Mapping[str, Any]) -> Rubric:
        """A rubric from a Rubric, lines of text, a list of texts or ``{text, weight}`` mappings, or
        ``{id: text}``. Criteria without ids are numbered C1, C2, ..."""
        if isinstance(value, Rubric):
            return value
        if isinstance(value, str):
            value = [line.strip() for line in value.splitlines() if line.strip()]
        if not isinstance(value, Mapping | Sequence) or isinstance(value, bytes):
            raise UsageError(Problem(f"a rubric cannot be read from {type(value).__name__} {value!r}"[:200],
                                     field="rubric", expected="criteria: a text (one per line), a list of texts or "
                                                              "{criterion: ..., weight: ...}, or {id: text}"))
        items: list[Criterion] = []
        entries = list(value.items()) if isinstance(value, Mapping) else list(enumerate(value, start=1))
        for key, entry in entries:
            default_id = str(key) if isinstance(value, Mapping) else f"C{key}"
            if isinstance(entry, Criterion):
                items.append(entry)
            elif isinstance(entry, str) and entry.strip():
                items.append(Criterion(default_id, entry.strip()))
            elif isinstance(entry, Mapping) and str(entry.get("criterion") or entry.get("text") or "").strip():
                weight = entry.get("weight", 1.0)
                if not isinstance(weight, (int, float)) or isinstance(weight, bool) or weight <= 0:
                    raise UsageError(Problem(f"rubric criterion {default_id}: weight must be a positive number, "
                                             f"not {weight!r}", field="rubric", expected="a number > 0"))
                items.append(Criterion(str(entry.get("id") or default_id),
                                       str(entry.get("criterion") or entry.get("text")).strip(), float(weight)))
            else:
                raise UsageError(Problem(f"rubric criterion {default_id} is empty or not text: {entry!r}",
                                         field="rubric", expected="a sentence, or {criterion: ..., weight: ...}"))
        if not items:
            raise UsageError(Problem("the rubric has no criteria", field="rubric",
                                     hint="give one binary criterion per line or list item"))
        return cls(tuple(items))

    def text(self) -> str:
        return "\n".join(f"{c.id}: {c.text}" for c in self.criteria)
