"""Guardrails around a call: input rules before any token is spent, output rules after.

Input rules are the definition's ``guardrails.input_validation`` regular expressions (the ones
rosetta can enforce: see ``InputRule.unenforced``), each search bounded by
:data:`~rosetta.definition.patterns.SEARCH_TIMEOUT_S`. A search that runs out of time refuses the
input, naming the rule's file, line and expression: the rule could not be shown to hold, and a
guardrail that waves unchecked text through to the model is none (it fails closed). Output rule
``no_secrets_in_output`` is enforced (credentials are redacted from the answer, or the call fails
with ``on_secret="fail"`` or the rule's ``action: block``), as are rules with a ``pattern`` (redact
each match, block the answer, or flag it); the other named rules are recorded on the Result as
post-checks for the caller or a reviewer to act on.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from rosetta.definition.patterns import SEARCH_TIMEOUT_S, PatternTimeout, compile_pattern, search, shown
from rosetta.definition.yaml_source import format_path
from rosetta.errors import Location, Problem, UsageError
from rosetta.runtime.secrets import find_secrets, redact, redact_problems

if TYPE_CHECKING:
    from rosetta.definition.input_rules import InputRule
    from rosetta.definition.models import OutputRule

NO_SECRETS = "no_secrets_in_output"
"""The output rule rosetta enforces on every answer, streamed text included."""

Source = str | os.PathLike[str] | None


class GuardrailError(UsageError):
    """An input or output broke one of the agent's guardrails (its problems carry no credential)."""

    def __init__(self, problems: Problem | list[Problem] | str) -> None:
        super().__init__(redact_problems(problems))


def check_inputs(rules: Iterable[InputRule], declared: tuple[str, ...], inputs: Mapping[str, Any], agent: str, *,
                 source: Source = None) -> None:
    """Raise :class:`GuardrailError` listing every input rule that fails (no model is called).

    ``declared`` are the agent's input names; rules rosetta cannot enforce (preconditions, rules
    naming no declared input) are skipped here and reported by ``rosetta validate`` (RS-002).
    ``source`` is the definition file, named with its line when a rule's search times out."""
    problems: list[Problem] = []
    for index, rule in enumerate(rules):
        if rule.unenforced(declared):
            continue
        target = rule.target(declared)
        names = [target] if target else [k for k, v in inputs.items() if isinstance(v, str)]
        for name in names:
            value = inputs.get(name)
            if not isinstance(value, str):
                continue
            subject = f"input {name!r}"
            if rule.pattern is not None and _found(rule, index, "pattern", value, subject, source, problems) is False:
                problems.append(Problem(rule.message or f"input {name!r} does not match {rule.pattern!r}",
                                        field=f"inputs.{name}", hint=f"{agent} requires {rule.pattern!r}"))
            if rule.reject is not None and _found(rule, index, "reject", value, subject, source, problems):
                problems.append(Problem(rule.message or f"input {name!r} matches the forbidden {rule.reject!r}",
                                        field=f"inputs.{name}"))
    if problems:
        raise GuardrailError(problems)


def check_message(rules: Iterable[InputRule], text: str, agent: str, *, source: Source = None) -> None:
    """A free-text conversation turn: every rule's forbidden pattern applies (field formats do not)."""
    problems: list[Problem] = []
    for index, rule in enumerate(rules):
        if rule.reject is not None and _found(rule, index, "reject", text, "the message", source, problems):
            problems.append(Problem(rule.message or f"the message matches the forbidden {rule.reject!r}",
                                    field="message", hint=f"{agent} refuses such messages"))
    if problems:
        raise GuardrailError(problems)


def _found(rule: InputRule, index: int, key: str, text: str, subject: str, source: Source,
           problems: list[Problem]) -> bool | None:
    """Whether the rule's ``key`` expression occurs in ``text``; None, with a problem added, when the
    search ran out of time (the input is then refused whichever way the rule points)."""
    expression = getattr(rule, key)
    try:
        return search(expression, text, timeout=SEARCH_TIMEOUT_S)
    except PatternTimeout as timeout:
        path = ("guardrails", "input_validation", index)
        problems.append(Problem(
            f"{subject} was refused: checking it against {shown(expression)} took longer than "
            f"{timeout.seconds:g} s (the expression backtracks catastrophically on this text), so the rule could "
            "not be shown to hold",
            _rule_location(source, path, rule.field), format_path(path),
            hint="rewrite the expression so that each character can be matched one way only, e.g. (a+)+ as a+; "
                 "`rosetta validate` reports such expressions as RS-006"))
        return None


def _rule_location(source: Source, path: tuple[Any, ...], field: str | None = None) -> Location:
    """Where the rule is written: the definition's file and, when it still reads, the rule's line."""
    if source is None:
        return Location()
    from pathlib import Path

    from rosetta.definition.formats import read_definition
    from rosetta.errors import RosettaError

    try:
        located = read_definition(Path(source)).locations
    except (RosettaError, OSError):
        return Location(str(source))
    by_input = (*path[:2], field) if field else path  # rules written as a mapping of input name to rule
    found = located.get(path) or located.get(by_input) or located.get(path[:2])
    file, line, column = found or (str(source), None, None)
    return Location(file, line, column)


def apply_output_rules(rules: tuple[Any, ...] | list[Any], raw: str, *,
                       on_secret: str = "redact") -> tuple[str, list[str]]:
    """The answer text after enforced rules, and the rules left for post-checks (named rules rosetta
    does not enforce, and flagged expressions the answer matched). ``rules`` are
    :class:`~rosetta.definition.models.OutputRule` (``Guardrails.output_rules``)."""
    pending: list[str] = []
    for rule in rules:
        if rule.rule == NO_SECRETS:
            kinds = find_secrets(raw)
            if kinds and (on_secret == "fail" or rule.action == "block"):
                raise GuardrailError(Problem(f"the answer contains credentials ({', '.join(kinds)})",
                                             field="guardrails.output_filtering",
                                             hint="the answer was discarded; nothing was returned"))
            raw = redact(raw) if kinds else raw
        elif rule.pattern is not None:
            raw = _apply_pattern(rule, raw, pending)
        else:
            pending.append(rule.text)
    return raw, pending


def _apply_pattern(rule: OutputRule, raw: str, pending: list[str]) -> str:
    """``raw`` with ``rule.pattern`` redacted, or refused (block), or flagged; a search that runs out
    of time refuses the answer (the rule could not be shown to hold)."""
    assert rule.pattern is not None  # apply_output_rules sends only the rules that have one

    marker = f"[REDACTED:{rule.rule}]" if rule.rule else "[REDACTED]"
    try:
        if rule.action == "redact":  # the GIL kept, as in `search`, so waiting for it is not counted
            return str(compile_pattern(rule.pattern).sub(lambda _: marker, raw, timeout=SEARCH_TIMEOUT_S,
                                                         concurrent=False))
        found = search(rule.pattern, raw)
    except (TimeoutError, PatternTimeout):
        raise GuardrailError(Problem(f"the answer was discarded: checking it against {shown(rule.pattern)} took "
                                     f"longer than {SEARCH_TIMEOUT_S:g} s", field="guardrails.output_filtering",
                                     hint="rewrite the expression so that it cannot backtrack (RS-006)")) from None
    if found and rule.action == "block":
        raise GuardrailError(Problem(rule.message or f"the answer matches the forbidden {shown(rule.pattern)}",
                                     field="guardrails.output_filtering",
                                     hint="the answer was discarded; nothing was returned"))
    if found:
        pending.append(rule.text)
    return raw
