"""Load agent definitions: find them, read any format, type them, and explain every failure.

``load_definition(path)`` returns one :class:`AgentDefinition` or raises :class:`DefinitionError`
whose problems name file, line, field, what was expected and a hint. ``load_directory`` and
``load_many`` never stop at the first bad file; they return one :class:`LoadResult` per file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rosetta.definition.discovery import discover_many
from rosetta.definition.formats import RawDefinition, read_definition
from rosetta.definition.document import (
    TEMPLATE_SUFFIXES,
    AgentDefinition,
    DefinitionSource,
    MissingReference,
)
from rosetta.definition.models import AgentSpec
from rosetta.definition.paths import find_project_root, resolve_reference
from rosetta.definition.sections import split_sections
from rosetta.definition.spec_errors import locate_field, validate_spec
from rosetta.definition.vocabulary import RCCFRole
from rosetta.definition.yaml_source import format_path
from rosetta.errors import ConfigError, DefinitionError, Location, Problem

@dataclass(frozen=True)
class LoadResult:
    """The outcome of loading one file: a definition or the error that stopped it."""

    path: Path
    definition: AgentDefinition | None = None
    error: DefinitionError | None = None


def load_definition(
    path: str | os.PathLike[str],
    *,
    root: str | os.PathLike[str] | None = None,
    section_roles: Mapping[str, RCCFRole | str] | None = None,
) -> AgentDefinition:
    """Load one agent definition in any supported format.

    ``root`` bounds the files a definition may reference (default: the nearest directory above
    it with a ``pyproject.toml`` or ``.git``). ``section_roles`` adds heading → RCCF role
    overrides; a definition's own ``portability.section_roles`` wins over them.
    """
    path = Path(path)
    if path.is_dir():
        raise DefinitionError.at(
            "is a directory", file=path, hint="use load_directory() to load every agent in a directory"
        )
    raw = read_definition(path)
    if not raw.body.strip():
        fence = raw.body_path == raw.path  # the body follows the frontmatter's closing '---'
        raise DefinitionError.at(
            "the agent has no body: the prompt text is empty", file=raw.body_path,
            line=raw.body_line - 1 if fence else 1, column=1,
            hint="write the agent's instructions " + ("after the closing '---'" if fence else "in this file"),
        )
    spec, off_list, unread = validate_spec(raw)
    project_root = Path(root) if root is not None else find_project_root(path)
    referenced, missing = _find_references(spec, raw, project_root)
    overrides = {**_roles(section_roles or {}), **spec.portability.section_roles}
    body_format = spec.portability.body_format or raw.detected_body_format
    return AgentDefinition(
        spec=spec,
        body=raw.body,
        sections=split_sections(raw.body, body_format, first_line=raw.body_line, overrides=overrides),
        source=DefinitionSource(
            format=raw.format,
            path=str(raw.path),
            files=tuple(dict.fromkeys([*(str(f) for f in raw.files), *(str(f) for f in referenced.values())])),
            body_path=str(raw.body_path),
            body_line=raw.body_line,
            detected_body_format=raw.detected_body_format,
            raw=raw.data,
            locations=raw.locations,
            off_list=off_list,
            unread=unread,
            references={field: str(file) for field, file in referenced.items()},
            missing_references=tuple(missing),
        ),
    )


def project_roots(files: Iterable[Path]) -> dict[Path, Path]:
    """The project root of each file's directory, looked up once per directory."""
    roots: dict[Path, Path] = {}
    for file in files:
        if file.parent not in roots:
            roots[file.parent] = find_project_root(file.parent)
    return roots


def load_many(paths: Iterable[str | os.PathLike[str]], **options: Any) -> list[LoadResult]:
    """Load every agent found under each path, collecting errors instead of stopping."""
    found = discover_many(paths)
    roots = {} if "root" in options else project_roots(file for file, error in found if error is None)
    results = []
    for file, error in found:
        if error is None:
            try:
                root = options.get("root", roots.get(file.parent))
                definition = load_definition(file, **{**options, "root": root})
                results.append(LoadResult(file, definition=definition))
                continue
            except DefinitionError as failure:
                error = failure
        results.append(LoadResult(file, error=error))
    return results


def load_directory(path: str | os.PathLike[str], **options: Any) -> list[AgentDefinition]:
    """Load every agent under ``path``; raise one error listing every file that failed."""
    results = load_many([path], **options)
    problems = [p for r in results if r.error for p in r.error.problems]
    if problems:
        raise DefinitionError(problems)
    return [r.definition for r in results if r.definition]


# -- references ------------------------------------------------------------------------------


def _find_references(spec: AgentSpec, raw: RawDefinition, root: Path) -> tuple[dict[str, Path], list[MissingReference]]:
    """The files the definition references (field → file), and those found nowhere; a name that is
    unusable or leads outside the tree is refused."""
    references = {
        ("portability", "few_shot", "examples_ref"): spec.portability.few_shot.examples_ref,
        ("output", "template"): spec.output.template,
    }
    problems, found, missing = [], {}, []
    for path, reference in references.items():
        if reference is None:
            continue
        file, line, column = locate_field(raw, path)
        try:
            target, tried = resolve_reference(reference, base_dir=Path(file).parent, root=root,
                                              field=format_path(path), location=Location(file, line, column))
        except DefinitionError as error:
            problems.extend(error.problems)
            continue
        if target is None:
            missing.append(MissingReference(path, reference, tuple(str(t) for t in tried)))
        elif path == ("output", "template") and not target.name.lower().endswith(TEMPLATE_SUFFIXES):
            missing.append(MissingReference(path, reference, (str(target),), why=(
                f"{target.name} is not a text document ({', '.join(TEMPLATE_SUFFIXES[:4])}, …): its text is not "
                "put into prompts")))
        else:
            found[format_path(path)] = target
    if problems:
        raise DefinitionError(problems)
    return found, missing


def _roles(section_roles: Mapping[str, RCCFRole | str]) -> dict[str, RCCFRole]:
    """The project's heading → RCCF role overrides as roles (the runtime reads them as text)."""
    roles = {}
    for heading, role in section_roles.items():
        try:
            roles[heading] = RCCFRole(role)
        except ValueError:
            raise ConfigError(Problem(f"section_roles: {heading!r} maps to {role!r}, which is no RCCF role",
                                      Location("[tool.rosetta.section_roles]"), f"section_roles.{heading}",
                                      expected=", ".join(r.value for r in RCCFRole))) from None
    return roles
