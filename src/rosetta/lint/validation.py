"""Validation results and their three renderings: text for people, JSON for scripts, SARIF 2.1.0
for GitHub code scanning and other static-analysis dashboards."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rosetta.__about__ import __version__
from rosetta.definition.discovery import discover_many
from rosetta.definition.loader import LoadResult, load_definition, project_roots
from rosetta.definition.document import AgentDefinition
from rosetta.definition.yaml_source import format_path
from rosetta.errors import DefinitionError, RosettaError
from rosetta.lint.engine import lint_definition
from rosetta.lint.metaschema import metaschema_errors
from rosetta.lint.registry import RULES, Finding, Severity

LOAD_RULE_ID = "RS-000"
LOAD_RULE = {
    "id": LOAD_RULE_ID,
    "title": "Definition can be loaded",
    "criterion": "The file parses and matches the agent definition schema; the project's settings ([tool.rosetta], "
    "its models and adapters, ROSETTA_* variables) load.",
    "remediation": "Fix the problem the message names at the given line.",
}
"""Reported for files that could not be loaded at all, the project's settings included (exit code 2)."""

TARGET_RULE_ID, NAME_RULE_ID = "RS-007", "RS-008"
BUILD_RULES = [
    {
        "id": TARGET_RULE_ID,
        "title": "Compile accepts every target model",
        "criterion": "Every model `rosetta compile` builds the agent for (its portability.model_preferences, else "
        "the project's default models) resolves with the project's catalog, unlisted_models and adapters, and is "
        "not retired.",
        "remediation": "Write a model the message suggests, declare it in [tool.rosetta.models], or accept it in "
        "unlisted_models.",
    },
    {
        "id": NAME_RULE_ID,
        "title": "Agent names are unique",
        "criterion": "No two definitions share a name: their artifacts would overwrite each other under "
        "compiled/<name>/, so `rosetta compile` writes neither.",
        "remediation": "Give each definition a unique `name:`.",
    },
]
"""What `rosetta compile` refuses beyond one definition's lint: checked by ``validate_paths`` with
the compiler's own functions, passed in by the caller (lint sits beside compile, not above it)."""

Refusals = Callable[[AgentDefinition], list[tuple[str, RosettaError]]]
"""An agent → (target, the error refusing it) for each target compile would refuse it."""
Clashes = Callable[[Iterable[tuple[Path, str | None]]], dict[str, list[Path]]]
"""(file, agent name) pairs → name → files, for each name more than one file uses."""

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


@dataclass
class FileReport:
    """Validation of one file: either it loaded and has findings, or it failed with an error."""

    path: str
    agent: str | None = None
    format: str | None = None
    error: RosettaError | None = None  # a DefinitionError, or the ConfigError of the project's settings
    findings: list[Finding] = field(default_factory=list)
    name_at: tuple[str, int | None, int | None] | None = None  # where the agent's name is written

    @property
    def loaded(self) -> bool:
        return self.error is None


@dataclass
class ValidationReport:
    """Every file's result plus the totals that decide the exit code."""

    files: list[FileReport]

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.files for finding in f.findings if finding.severity is severity)

    @property
    def load_failures(self) -> int:
        return sum(1 for f in self.files if not f.loaded)

    def summary(self) -> dict[str, int]:
        """Totals; ``errors`` counts error findings plus files that failed to load."""
        return {
            "files": len(self.files),
            "loaded": len(self.files) - self.load_failures,
            "errors": self.count(Severity.ERROR) + self.load_failures,
            "warnings": self.count(Severity.WARNING),
            "info": self.count(Severity.INFO),
        }

    def exit_code(self, *, strict: bool = False) -> int:
        """2 when a file failed to load, 1 on errors (or warnings with ``strict``), else 0."""
        if self.load_failures:
            return 2
        if self.count(Severity.ERROR) or (strict and self.count(Severity.WARNING)):
            return 1
        return 0


def build_report(results: Iterable[LoadResult]) -> ValidationReport:
    """Lint every loaded definition; keep load errors as they are."""
    return ValidationReport([_file_report(result) for result in results])


def settings_report(error: RosettaError) -> FileReport:
    """The project's settings that could not be loaded, as a report entry (under the file the first
    problem names: pyproject.toml, an adapter file, or a ``$ROSETTA_*`` variable)."""
    return FileReport(next((p.location.file for p in error.problems if p.location.file), "[tool.rosetta]"),
                      format="settings", error=error)


def _file_report(result: LoadResult, refusals: Refusals | None = None) -> FileReport:
    if result.definition is None:
        return FileReport(str(result.path), error=result.error)
    definition = result.definition
    findings = lint_definition(definition)
    if refusals is not None:
        findings += _target_findings(definition, refusals, findings)
        findings.sort(key=lambda f: (f.file, f.line or 0, f.id))
    return FileReport(
        str(result.path),
        agent=definition.name,
        format=definition.source.format.value,
        findings=findings,
        name_at=definition.locate("name"),
    )


def _target_findings(definition: AgentDefinition, refusals: Refusals, findings: list[Finding]) -> list[Finding]:
    """RS-007 for each target model compile would refuse, at the preference naming it; not again
    where another error already stands (RS-005 says a retired model's replacement, PV-006 a malformed id)."""
    preferences = list(definition.spec.portability.model_preferences)
    taken = {(f.file, f.line, f.field) for f in findings if f.severity is Severity.ERROR}
    refused = []
    for name, error in refusals(definition):
        problem = error.problems[0]
        if not name:  # the agent cannot be lowered (its examples file, say): at the problem's own place
            where_file = problem.location.file or definition.source.path
            refused.append(Finding(TARGET_RULE_ID, Severity.ERROR, f"`rosetta compile` refuses this agent: "
                                   f"{problem.message}", str(where_file), problem.location.line,
                                   problem.location.column, problem.field, problem.hint or str(BUILD_RULES[0]["remediation"])))
            continue
        if name in preferences:
            path: tuple = ("portability", "model_preferences", preferences.index(name))
            message = f"`rosetta compile` refuses model {name!r}: {problem.message}"
        else:
            path = ("portability",)
            message = (f"`rosetta compile` builds this agent (it lists no model_preferences) for the project's "
                       f"default model {name!r}, and refuses it: {problem.message}")
        file, line, column = definition.locate(*path)
        where = format_path(path) if name in preferences else "portability.model_preferences"
        if (file, line, where) not in taken:
            refused.append(Finding(TARGET_RULE_ID, Severity.ERROR, message, file, line, column, where,
                                   problem.hint or str(BUILD_RULES[0]["remediation"])))
    return refused


def _flag_clashes(files: list[FileReport], clashes: Clashes) -> None:
    """RS-008 on every loaded file whose agent name another file also uses, at its ``name``."""
    for name, paths in clashes((Path(f.path), f.agent) for f in files if f.loaded).items():
        for report in (f for f in files if f.agent == name and Path(f.path) in paths):
            others = ", ".join(str(p) for p in paths if p != Path(report.path))
            file, line, column = report.name_at or (report.path, None, None)
            report.findings.append(Finding(
                NAME_RULE_ID, Severity.ERROR, f"agent name {name!r} is also used by {others}: `rosetta compile` "
                "writes nothing for either (artifacts live under compiled/<name>/)", file, line, column, "name",
                str(BUILD_RULES[1]["remediation"])))
            report.findings.sort(key=lambda f: (f.file, f.line or 0, f.id))


PARALLEL_THRESHOLD = 64
"""Below this many files a process pool costs more than it saves."""


def validate_paths(
    paths: Iterable[str | os.PathLike[str]], *, jobs: int | None = None, refusals: Refusals | None = None,
    clashes: Clashes | None = None, **load_options: Any
) -> ValidationReport:
    """Discover, load and lint every agent under ``paths``, on ``jobs`` processes for large trees.

    ``jobs`` defaults to the number of CPUs; results keep discovery order whatever ``jobs`` is.
    ``refusals`` and ``clashes``, the compiler's own checks (``rosetta validate`` passes them), add
    what `rosetta compile` would refuse: target models (RS-007) and shared agent names (RS-008);
    ``refusals`` runs in the worker processes, so it must pickle.
    """
    found = discover_many(paths)
    roots = project_roots(file for file, error in found if error is None)
    tasks = [(file, error, roots.get(file.parent)) for file, error in found]
    jobs = max(1, jobs or os.cpu_count() or 1)
    if jobs == 1 or len(tasks) < PARALLEL_THRESHOLD:
        files = [_validate_one(task, load_options, refusals) for task in tasks]
    else:
        list(metaschema_errors({}))  # build the metaschema validator once, before workers fork
        context = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
        chunk = max(1, len(tasks) // (jobs * 16))  # small chunks balance uneven files across workers
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            files = list(pool.map(_validate_one, tasks, itertools.repeat(load_options), itertools.repeat(refusals),
                                  chunksize=chunk))
    if clashes is not None:
        _flag_clashes(files, clashes)
    return ValidationReport(files)


def _validate_one(task: tuple[Path, DefinitionError | None, Path | None], options: dict[str, Any],
                  refusals: Refusals | None = None) -> FileReport:
    file, error, root = task
    if error is not None:
        return FileReport(str(file), error=error)
    try:
        return _file_report(LoadResult(file, definition=load_definition(file, root=root, **options)), refusals)
    except DefinitionError as failure:
        return FileReport(str(file), error=failure)


# -- JSON --------------------------------------------------------------------------------------


def to_json(report: ValidationReport) -> dict[str, Any]:
    """The machine-readable report (documented in the README)."""
    return {
        "files": [
            {
                "path": f.path,
                "agent": f.agent,
                "format": f.format,
                "loaded": f.loaded,
                "error": str(f.error) if f.error else None,
                "problems": [
                    {
                        "message": p.message,
                        "file": p.location.file,
                        "line": p.location.line,
                        "column": p.location.column,
                        "field": p.field,
                        "expected": p.expected,
                        "hint": p.hint,
                    }
                    for p in (f.error.problems if f.error else [])
                ],
                "findings": [
                    {
                        "id": x.id,
                        "severity": x.severity.value,
                        "message": x.message,
                        "line": x.line,
                        "column": x.column,
                        "file": x.file,
                        "field": x.field,
                        "remediation": x.remediation,
                    }
                    for x in f.findings
                ],
            }
            for f in report.files
        ],
        "summary": report.summary(),
    }


# -- SARIF -------------------------------------------------------------------------------------


def _artifact(path: str, base: Path) -> dict[str, str]:
    absolute = Path(path).resolve()
    try:
        return {"uri": absolute.relative_to(base).as_posix(), "uriBaseId": "%SRCROOT%"}
    except ValueError:
        return {"uri": absolute.as_uri()}


def _location(path: str, line: int | None, column: int | None, base: Path) -> dict[str, Any]:
    region: dict[str, int] = {"startLine": line or 1}
    if column:
        region["startColumn"] = column
    return {"physicalLocation": {"artifactLocation": _artifact(path, base), "region": region}}


def to_sarif(report: ValidationReport, *, base: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """A SARIF 2.1.0 log; paths are relative to ``base`` (default: the working directory)."""
    root = Path(base or Path.cwd()).resolve()
    descriptors = [LOAD_RULE, *BUILD_RULES] + [
        {"id": r.id, "title": r.title, "criterion": r.criterion, "remediation": r.remediation}
        for r in RULES.values()
    ]
    index = {d["id"]: i for i, d in enumerate(descriptors)}
    severities = {r.id: r.severity for r in RULES.values()}
    rules = [
        {
            "id": d["id"],
            "name": "".join(w.capitalize() for w in d["title"].replace("-", " ").split() if w.isalnum()),
            "shortDescription": {"text": d["title"]},
            "fullDescription": {"text": d["criterion"]},
            "help": {"text": d["remediation"]},
            "defaultConfiguration": {"level": _SARIF_LEVEL[severities.get(d["id"], Severity.ERROR)]},
            "properties": {"tags": ["portability"] if d["id"].startswith("PV-") else ["rosetta"]},
        }
        for d in descriptors
    ]
    results = []
    for file in report.files:
        for problem in file.error.problems if file.error else []:
            results.append(
                {
                    "ruleId": LOAD_RULE_ID,
                    "ruleIndex": index[LOAD_RULE_ID],
                    "level": "error",
                    "message": {"text": problem.format()},
                    "locations": [
                        _location(problem.location.file or file.path, problem.location.line,
                                  problem.location.column, root)
                    ],
                }
            )
        for finding in file.findings:
            results.append(
                {
                    "ruleId": finding.id,
                    "ruleIndex": index[finding.id],
                    "level": _SARIF_LEVEL[finding.severity],
                    "message": {"text": f"{finding.message}. {finding.remediation}"},
                    "locations": [_location(finding.file, finding.line, finding.column, root)],
                }
            )
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "rosetta", "version": __version__, "semanticVersion": __version__,
                                    "rules": rules}},
                "originalUriBaseIds": {"%SRCROOT%": {"uri": root.as_uri() + "/"}},
                "invocations": [{"executionSuccessful": report.load_failures == 0}],
                "results": results,
            }
        ],
    }


def dumps(document: dict[str, Any]) -> str:
    """Stable, readable JSON."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
