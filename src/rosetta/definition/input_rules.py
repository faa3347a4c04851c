"""``guardrails.input_validation`` rules in every shape written in the wild, and what rosetta can
enforce of them before a call.

The list shape (``- {field, pattern, message}``, ``- {rule_name: regex}``) is the ADR's; older
agents write a mapping of input name to rule (``project_id: {format: ..., on_invalid: {action,
message}}``), which :func:`rules_by_input` reads into the same rules, so both are enforced alike."""

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
_EXPRESSION_KEYS = ("pattern", "format", "regex")
"""Names the mapping shape gives the expression an input must match."""
REJECTING_ACTIONS = frozenset({"reject", "block", "deny", "error", "fail", "refuse"})
"""``on_invalid.action`` values that mean "refuse the call"; others (warn, log) let the input through."""


def looks_like_regex(value: str) -> bool:
    """Whether a bare text rule is an expression (it has regex syntax, or is a single word), not a sentence."""
    return bool(_REGEX_SYNTAX.search(value)) or not value.split()[1:]


def rules_by_input(mapping: dict[Any, Any]) -> list[Any]:
    """The mapping shape ``{input: rule}`` as list-shape rules, one per check the rule states:
    an expression (``format`` / ``pattern`` / ``regex``, or the rule itself as text), ``reject``,
    ``enum``, ``min_length`` / ``max_length`` and ``required``, each with the rule's message
    (``message`` or ``on_invalid.message``). Keys it does not know stay on the first rule, as written."""
    rules: list[Any] = []
    for name, rule in mapping.items():
        if isinstance(rule, str):
            key = "pattern" if looks_like_regex(rule) else "precondition"
            rules.append({"field": name, key: rule})
        elif isinstance(rule, dict):
            rules.extend(_checks_of(str(name), rule))
        else:
            rules.append({"field": name, "precondition": rule})
    return rules


def _checks_of(name: str, rule: dict[Any, Any]) -> list[dict[str, Any]]:
    rest = dict(rule)
    on_invalid = rest.pop("on_invalid", None)
    on_invalid = on_invalid if isinstance(on_invalid, dict) else {"action": on_invalid} if on_invalid else {}
    common = {"field": name, "message": rest.pop("message", None) or on_invalid.get("message"),
              "action": str(on_invalid.get("action", "reject"))}
    expressions = [rest.pop(key) for key in _EXPRESSION_KEYS if isinstance(rest.get(key), str)]
    checks: list[dict[str, Any]] = [{"pattern": expression} for expression in expressions]
    if isinstance(rest.get("reject"), str):
        checks.append({"reject": rest.pop("reject")})
    if isinstance(rest.get("enum"), list) and rest["enum"]:
        values = rest.pop("enum")
        checks.append({"pattern": "^(?:" + "|".join(re.escape(str(v)) for v in values) + ")$",
                       "message": common["message"] or f"{name} must be one of: {', '.join(map(str, values))}"})
    for key, quantifier, words in (("min_length", "{%d,}", "at least"), ("max_length", "{0,%d}", "at most")):
        if isinstance(rest.get(key), int) and not isinstance(rest[key], bool):
            size = rest.pop(key)
            checks.append({"pattern": r"^[\s\S]" + quantifier % min(max(size, 0), 10**9) + r"\Z",  # regex's limit
                           "message": common["message"] or f"{name} must be {words} {size} characters"})
    if rest.get("required") is True:
        rest.pop("required")
        checks.append({"pattern": r"\S", "message": common["message"] or f"{name} is required"})
    if not checks:
        checks.append({"precondition": rest or rule})
        rest = {}
    checks = [{**common, **check} for check in checks]
    checks[0].update(rest)  # what the rule says beyond its checks, kept as written
    return checks


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
    action: str = "reject"
    """What to do when the rule fails (the mapping shape's ``on_invalid.action``): reject, block, deny
    and error refuse the call; any other action (warn, log) lets the input through, so the rule is kept
    and not enforced."""

    @model_validator(mode="before")
    @classmethod
    def _accept_short_shapes(cls, data: Any) -> Any:
        if isinstance(data, dict) and len(data) == 1:
            (key, value), = data.items()
            if key not in cls.model_fields:
                is_regex = isinstance(value, str) and looks_like_regex(value)
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
        if self.action.lower() not in REJECTING_ACTIONS:
            return f"its action is {self.action!r}, which lets the input through"
        if self.pattern is None and self.reject is None:
            return "it has neither 'pattern' nor 'reject'"
        named = self.field if self.field is not None else self.rule
        if named is not None and self.target(inputs) is None:
            return f"{named!r} is not a declared input (inputs: {', '.join(inputs)})"
        return None
