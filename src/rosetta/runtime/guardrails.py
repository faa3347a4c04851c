"""Guardrails around a call: input rules before any token is spent, output rules after.

Input rules are the definition's ``guardrails.input_validation`` regular expressions (the ones
rosetta can enforce: see ``InputRule.unenforced``). Output rule
``no_secrets_in_output`` is enforced (credentials are redacted from the answer, or the call fails
with ``on_secret="fail"``); the other named rules are recorded on the Result as post-checks for the
caller or a reviewer to act on.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rosetta.errors import Problem, UsageError
from rosetta.runtime.secrets import find_secrets, redact, redact_problems

NO_SECRETS = "no_secrets_in_output"
"""The output rule rosetta enforces on every answer, streamed text included."""


class GuardrailError(UsageError):
    """An input or output broke one of the agent's guardrails (its problems carry no credential)."""

    def __init__(self, problems: Problem | list[Problem] | str) -> None:
        super().__init__(redact_problems(problems))


def check_inputs(rules: Any, declared: tuple[str, ...], inputs: Mapping[str, Any], agent: str) -> None:
    """Raise :class:`GuardrailError` listing every input rule that fails (no model is called).

    ``declared`` are the agent's input names; rules rosetta cannot enforce (preconditions, rules
    naming no declared input) are skipped here and reported by ``rosetta validate`` (RS-002)."""
    problems = []
    for rule in rules:
        if rule.unenforced(declared):
            continue
        target = rule.target(declared)
        names = [target] if target else [k for k, v in inputs.items() if isinstance(v, str)]
        for name in names:
            value = inputs.get(name)
            if not isinstance(value, str):
                continue
            if rule.pattern is not None and not re.search(rule.pattern, value):
                problems.append(Problem(rule.message or f"input {name!r} does not match {rule.pattern!r}",
                                        field=f"inputs.{name}", hint=f"{agent} requires {rule.pattern!r}"))
            if rule.reject is not None and re.search(rule.reject, value):
                problems.append(Problem(rule.message or f"input {name!r} matches the forbidden {rule.reject!r}",
                                        field=f"inputs.{name}"))
    if problems:
        raise GuardrailError(problems)


def check_message(rules: Any, text: str, agent: str) -> None:
    """A free-text conversation turn: every rule's forbidden pattern applies (field formats do not)."""
    problems = [Problem(rule.message or f"the message matches the forbidden {rule.reject!r}", field="message",
                        hint=f"{agent} refuses such messages")
                for rule in rules if rule.reject is not None and re.search(rule.reject, text)]
    if problems:
        raise GuardrailError(problems)


def apply_output_rules(rules: tuple[str, ...] | list[str], raw: str, *, on_secret: str = "redact") -> tuple[str, list[str]]:
    """The answer text after enforced rules, and the names of the rules left for post-checks."""
    pending = []
    for rule in rules:
        if rule == NO_SECRETS:
            kinds = find_secrets(raw)
            if kinds and on_secret == "fail":
                raise GuardrailError(Problem(f"the answer contains credentials ({', '.join(kinds)})",
                                             field="guardrails.output_filtering",
                                             hint="the answer was discarded; nothing was returned"))
            raw = redact(raw) if kinds else raw
        else:
            pending.append(rule)
    return raw, pending
