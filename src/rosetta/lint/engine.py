"""Running the rules: every registered check over one loaded definition, each hit turned into a
located :class:`~rosetta.lint.registry.Finding` with its severity (PV rules report as info for
agents that have not opted into portability)."""

from __future__ import annotations

from rosetta.definition.document import AgentDefinition
from rosetta.definition.yaml_source import format_path
from rosetta.lint import checks  # noqa: F401  (registers the rules)
from rosetta.lint.registry import RULES, Finding, Hit, Rule, Severity


def lint_definition(definition: AgentDefinition) -> list[Finding]:
    """Run every rule on one loaded definition; findings sorted by file and line."""
    findings = []
    for registered in RULES.values():
        for hit in registered.check(definition):
            findings.append(_finding(registered, hit, definition))
    findings.sort(key=lambda f: (f.file, f.line or 0, f.id))
    return findings


def _finding(registered: Rule, hit: Hit, definition: AgentDefinition) -> Finding:
    severity = hit.severity or registered.severity
    if hit.severity is None and registered.portability and not definition.portable:
        severity = Severity.INFO
    if hit.body_line is not None:
        file, line, column = definition.source.body_path, definition.source.body_line + hit.body_line, None
    elif hit.field is not None:
        file, line, column = definition.locate(*hit.field)
    else:
        file, line, column = definition.source.path, None, None
    return Finding(
        id=registered.id,
        severity=severity,
        message=hit.message,
        file=file,
        line=line,
        column=column,
        field=format_path(hit.field) if hit.field else None,
        remediation=hit.remediation or registered.remediation,
    )
