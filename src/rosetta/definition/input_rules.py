"""``guardrails.input_validation`` rules in every shape the ADR allows, and what rosetta can
enforce of them before a call."""

from __future__ import annotations

import re
from typing import Any

from pydantic import model_validator

from rosetta.definition.patterns import PatternError, compile_pattern, shown
from rosetta.definition.spec_base import SpecSection

_REGEX_SYNTAX = re.compile(r"[\\^$\[\]{}*+?|]")
"""Marks a short-shape value as a regular expression; a sentence without them is a precondition
(parentheses alone do not count: prose has them too)."""
_TARGET_SUFFIXES = ("_format", "_pattern", "_regex", "_validation")


class InputRule(SpecSection):
    """One ``guardrails.input_validation`` entry, in any of the shapes the ADR allows:
    ``{field, pattern, reject, message}``, the short ``{rule_name: regex}``, and non-regex
    preconditions (``{roe_authorized: true}``, ``{scope: "signed off by the client"}``).

    Every shape loads and is kept; :meth:`unenforced` says why rosetta cannot check one."""

    field: str | None = None
    """Input name the rule applies to; omit for every text input."""
    pattern: str | None = None
    """The input must match this expression (searched with a time limit: see ``rosetta.definition.patterns``)."""
    reject: str | None = None
    """The input must not match this expression (searched the same way)."""
    message: str | None = None
    """What to tell the caller when the rule fails."""
    rule: str | None = None
    """The rule's name in the short ``{rule_name: value}`` shape."""
    precondition: Any = None
    """A non-regex value in the short shape (a boolean, a number, a sentence): kept, not enforced."""

    @model_validator(mode="before")
    @classmethod
    def _accept_short_shapes(cls, data: Any) -> Any:
        if isinstance(data, dict) and len(data) == 1:
            (key, value), = data.items()
            if key not in cls.model_fields:
                is_regex = isinstance(value, str) and (_REGEX_SYNTAX.search(value) or not value.split()[1:])
                return {"rule": key, "pattern": value} if is_regex else {"rule": key, "precondition": value}
        return data

    @model_validator(mode="after")
    def _check_expressions(self) -> InputRule:
        for expression in (self.pattern, self.reject):
            if expression is not None:
                try:
                    compile_pattern(expression)
                except PatternError as exc:
                    raise ValueError(f"invalid regular expression {shown(expression)}: {exc}") from None
        return self

    def target(self, inputs: tuple[str, ...]) -> str | None:
        """The declared input this rule checks; None when it checks every text input (no field,
        no rule name) or names no declared input (see :meth:`unenforced`)."""
        if self.field is not None:
            return self.field if self.field in inputs else None
        if self.rule is None:
            return None
        candidates = [self.rule] + [self.rule.removesuffix(s) for s in _TARGET_SUFFIXES if self.rule.endswith(s)]
        return next((name for name in candidates if name in inputs), None)

    def unenforced(self, inputs: tuple[str, ...]) -> str | None:
        """Why rosetta cannot check this rule before a call, or None when it does."""
        if self.precondition is not None:
            return f"{self.precondition!r} is a precondition, not a regular expression"
        if self.pattern is None and self.reject is None:
            return "it has neither 'pattern' nor 'reject'"
        named = self.field if self.field is not None else self.rule
        if named is not None and self.target(inputs) is None:
            return f"{named!r} is not a declared input (inputs: {', '.join(inputs)})"
        return None
