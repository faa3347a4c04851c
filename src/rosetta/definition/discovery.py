"""Finding agent files: which files under a folder are agents (as validate, compile and
``rosetta.load`` all see a project), and which of them defines the agent of a given name. Light:
it reads frontmatter, never builds the typed definition (no pydantic), so the runtime can pick a
compiled prompt by agent name cheaply.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from rosetta.definition.formats import (
    MARKDOWN_SUFFIXES,
    PAIR_SUFFIXES,
    PROMPT_SUFFIX,
    SIDECAR_SUFFIXES,
    read_definition,
    stem_of,
)
from rosetta.errors import DefinitionError, Location, Problem

SKIPPED_DIRECTORIES = {"__pycache__", "node_modules", "compiled"}
"""Directory names never searched for agents (hidden directories are skipped too)."""


def discover_definitions(path: str | os.PathLike[str]) -> list[Path]:
    """Every agent file under ``path`` (a file is returned as is), in a stable order.

    Markdown files count only when they open with a ``---`` frontmatter fence, so READMEs and
    notes can live beside agents; sidecars and pair bodies are found through their agent.
    """
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise DefinitionError.at("no such file or directory", file=path, hint="check the path")
    found: list[Path] = []
    for directory, subdirectories, files in os.walk(path):
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith(".") and d not in SKIPPED_DIRECTORIES)
        for name in sorted(files):
            file = Path(directory, name)
            if name.endswith(PAIR_SUFFIXES):
                found.append(file)
            elif name.endswith(SIDECAR_SUFFIXES):
                continue
            elif name.endswith(PROMPT_SUFFIX) and any(
                file.with_name(stem_of(file) + suffix).is_file() for suffix in PAIR_SUFFIXES
            ):
                continue
            elif name.endswith(MARKDOWN_SUFFIXES) and _opens_with_fence(file):
                found.append(file)
    return found


def discover_many(paths: Iterable[str | os.PathLike[str]]) -> list[tuple[Path, DefinitionError | None]]:
    """Every agent file under each path; a path that does not exist yields its error instead."""
    found: list[tuple[Path, DefinitionError | None]] = []
    for given in paths:
        try:
            found.extend((file, None) for file in discover_definitions(given))
        except DefinitionError as error:
            found.append((Path(given), error))
    return found


def find_agent(name: str, signatures_dir: str | os.PathLike[str]) -> Path | None:
    """The file defining the agent ``name`` under ``signatures_dir``, found as validate and compile
    find agents: discovered files only (hidden and skipped folders left out), matched by the name
    each declares; a file's own name does not count. A file named for the agent that cannot be read
    is returned (its error says why when it is loaded). None when no file declares the name; a
    :class:`DefinitionError` naming each file when several do, as compile refuses them all."""
    declared = declared_names(signatures_dir)
    declaring = [path for path, declared_name in declared.items() if declared_name == name]
    if len(declaring) > 1:
        raise DefinitionError([Problem(
            f"agent name {name!r} is declared by {len(declaring)} files: {', '.join(str(p) for p in declaring)}",
            Location(str(file)), field="name",
            hint="give each definition a unique `name:` (compile refuses them all; artifacts live under "
                 "compiled/<name>/), or load one by its path") for file in declaring])
    if declaring:
        return declaring[0]
    return next((path for path, declared_name in declared.items() if declared_name is None and stem_of(path) == name),
                None)


def declared_names(signatures_dir: str | os.PathLike[str]) -> dict[Path, str | None]:
    """Each agent file under ``signatures_dir`` → the name it declares (None when it cannot be read
    or declares none), in discovery order."""
    names: dict[Path, str | None] = {}
    if not Path(signatures_dir).is_dir():
        return names
    for path in discover_definitions(signatures_dir):
        try:
            declared = read_definition(path).data.get("name")
        except DefinitionError:
            declared = None
        names[path] = declared if isinstance(declared, str) else None
    return names


def _opens_with_fence(file: Path) -> bool:
    from rosetta.fileio import read_source_bytes

    try:
        head = read_source_bytes(file, limit=64, head=True)  # a FIFO named *.md is never waited on
    except OSError:
        return True  # let the loader report why it cannot be read
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = head.decode("utf-16", errors="ignore")
    else:
        text = head.decode("utf-8-sig", errors="ignore")
    return text.split("\n", 1)[0].rstrip("\r \t") == "---"
