"""Project roots and file references that must stay inside them.

Definitions name other files (``few_shot.examples_ref``, ``output.template``). A name is looked up
next to the definition, then from each folder above it up to the project root, then from the
repository root (collections resolve templates from there); a file found nowhere is reported, not
fatal. Those names come from
whoever wrote the definition, so symlinks are followed and a name that lands outside the tree is
refused.
"""

from __future__ import annotations

from pathlib import Path, PureWindowsPath

from rosetta.definition.patterns import shown
from rosetta.errors import DefinitionError, Location

PROJECT_MARKERS = ("pyproject.toml", ".git")
MAX_REFERENCE_CHARS = 1024
"""Longest file reference accepted (Linux allows 4,096 for a whole path, 255 per name)."""


def find_project_root(start: Path) -> Path:
    """The nearest directory at or above ``start`` holding a project marker, else ``start``'s dir."""
    start = start.resolve()
    directory = start if start.is_dir() else start.parent
    for candidate in (directory, *directory.parents):
        if any((candidate / marker).exists() for marker in PROJECT_MARKERS):
            return candidate
    return directory


def find_repository_root(project_root: Path) -> Path:
    """The nearest directory at or above ``project_root`` holding ``.git``, else ``project_root``.
    A repository at or above the home directory (dotfiles kept in git) is no collection: the
    project root is used instead, so that a definition never reaches ``~/.ssh`` through it."""
    project_root = project_root.resolve()
    found = next((d for d in (project_root, *project_root.parents) if (d / ".git").exists()), project_root)
    try:
        home = Path.home().resolve()
    except (KeyError, RuntimeError):  # no home directory
        return found
    return project_root if home == found or home.is_relative_to(found) else found


def lookup_bases(base_dir: Path, root: Path) -> tuple[Path, ...]:
    """Where a reference is looked for, in order: the definition's directory and each one above it up
    to the project root (collections resolve templates from a skill's or team's folder), then the
    repository root; each once."""
    base_dir, root = base_dir.resolve(), root.resolve()
    between = [d for d in base_dir.parents if d.is_relative_to(root)] if base_dir.is_relative_to(root) else [root]
    return tuple(dict.fromkeys((base_dir, *between, root, find_repository_root(root))))


def resolve_reference(reference: str, *, base_dir: Path, root: Path, field: str,
                      location: Location) -> tuple[Path | None, tuple[Path, ...]]:
    """The file ``reference`` names (None when it is in none of the :func:`lookup_bases`) and every
    path tried; raises when the name is unusable or lands outside the project (outside the
    repository, for the lookup from the repository root)."""

    def fail(message: str, hint: str) -> DefinitionError:
        return DefinitionError.at(
            message, file=location.file, line=location.line, column=location.column, field=field, hint=hint
        )

    if not reference.strip():
        raise fail("path is empty", "give a path relative to the definition file")
    quoted = shown(reference, 120)
    if len(reference) > MAX_REFERENCE_CHARS or "\x00" in reference:
        raise fail(f"{quoted} is not a usable path ({len(reference):,} characters"
                   + (", with a NUL character)" if "\x00" in reference else ")"),
                   f"give a file name relative to the definition, under {MAX_REFERENCE_CHARS} characters")
    if Path(reference).is_absolute() or PureWindowsPath(reference).is_absolute() or reference.startswith("~"):
        raise fail(
            f"absolute path {quoted} is not allowed",
            "write the path relative to the definition file, inside the project",
        )
    bases = lookup_bases(base_dir, root)
    repository, root = bases[-1], root.resolve()
    tried = []
    try:
        for index, base in enumerate(bases):
            target = (base / reference).resolve()
            bound = repository if base == repository else root  # only the repository's own lookup leaves the project
            outside = not target.is_relative_to(bound)
            if outside and (index == 0 or target.exists()):
                raise fail(
                    f"path {quoted} resolves to {target}, outside the project root {bound}",
                    "keep referenced files inside the project (symlinks are followed)",
                )
            if outside:
                continue
            tried.append(target)
            if target.is_file():
                return target, tuple(tried)
    except OSError as exc:  # a name too long for the file system, a loop of symlinks, ...
        raise fail(f"cannot use path {quoted}: {exc.strerror or exc}", "fix the path") from None
    return None, tuple(tried)
