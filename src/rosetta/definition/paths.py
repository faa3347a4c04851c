"""Project roots and file references that must stay inside them.

Definitions name other files (``few_shot.examples_ref``, ``output.template``). Those names come
from whoever wrote the definition, so they are resolved relative to the definition, symlinks
followed, and refused when they land outside the project tree.
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


def resolve_reference(reference: str, *, base_dir: Path, root: Path, field: str, location: Location) -> Path:
    """Resolve ``reference`` against ``base_dir``; raise unless it is an existing file under ``root``."""

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
    try:
        target = (base_dir / reference).resolve()
        root = root.resolve()
        if not target.is_relative_to(root):
            raise fail(
                f"path {quoted} resolves to {target}, outside the project root {root}",
                "keep referenced files inside the project (symlinks are followed)",
            )
        if not target.is_file():
            raise fail(f"file {quoted} not found (looked for {target})", "create the file or fix the path")
    except OSError as exc:  # a name too long for the file system, a loop of symlinks, ...
        raise fail(f"cannot use path {quoted}: {exc.strerror or exc}", "fix the path") from None
    return target
