"""The lint rule registry: one function per rule id, registered with its metadata.

A check yields :class:`Hit` records (what is wrong and where); the registry turns them into
:class:`Finding` records with a file, line and severity. PV rules judge portability, so for an
agent that has not opted in (``portability.enabled: false``) their hits are reported as info.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

from rosetta.definition.document import AgentDefinition
from rosetta.definition.yaml_source import FieldPath


class Severity(StrEnum):
    """How much a finding matters: errors fail validation, warnings fail it only with --strict."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Hit:
    """What a check found: a message, where (a frontmatter field path or a body line), and how to fix it."""

    message: str
    field: FieldPath | None = None
    body_line: int | None = None  # 0-based line within the body
    remediation: str | None = None
    severity: Severity | None = None  # set only to override the rule's default and the portability downgrade


@dataclass(frozen=True)
class Finding:
    """One reported lint result."""

    id: str
    severity: Severity
    message: str
    file: str
    line: int | None
    column: int | None
    field: str | None
    remediation: str


Check = Callable[[AgentDefinition], Iterable[Hit]]


@dataclass(frozen=True)
class Rule:
    """A lint rule: its id, what passing means, how to fix a failure, and its check."""

    id: str
    title: str
    criterion: str
    remediation: str
    check: Check
    portability: bool = True  # downgraded to info when the agent has portability disabled
    severity: Severity = Severity.ERROR


RULES: dict[str, Rule] = {}
"""Every registered rule by id, in registration order (PV-001 … PV-010, then RS rules)."""


def rule(id: str, title: str, *, criterion: str, remediation: str, portability: bool = True,
         severity: Severity = Severity.ERROR) -> Callable[[Check], Check]:
    """Register a check function under a rule id."""

    def register(check: Check) -> Check:
        if id in RULES:
            raise ValueError(f"rule {id} registered twice")
        RULES[id] = Rule(id, title, criterion, remediation, check, portability, severity)
        return check

    return register
