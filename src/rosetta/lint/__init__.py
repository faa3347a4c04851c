"""Static portability lint: rules PV-001…PV-010 (and rosetta's RS rules) over loaded definitions."""

from rosetta.lint.engine import lint_definition
from rosetta.lint.registry import RULES, Finding, Hit, Rule, Severity, rule
from rosetta.lint.validation import FileReport, ValidationReport, build_report, to_json, to_sarif

__all__ = [
    "RULES", "Finding", "Hit", "Rule", "Severity", "lint_definition", "rule",
    "FileReport", "ValidationReport", "build_report", "to_json", "to_sarif",
]
