"""The build index: what each definition file compiled to last time, so that a recompile with
nothing changed never parses a definition.

``<out>/.rosetta-index.json`` maps each definition (relative to the project root) to its agent name,
the files it was merged from, their combined sha256, the sidecar paths whose appearance would change
it, and its model preferences. It is only a cache: source files are always re-hashed, every artifact
is still checked against its expected inputs hash, and a missing or corrupt index just means a
slower, full compile.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

INDEX_NAME = ".rosetta-index.json"
VERSION = 1
MAX_BYTES = 32 * 1024 * 1024
"""Far above any real index (a few hundred bytes per definition)."""


@dataclass(frozen=True)
class IndexEntry:
    """What a definition file compiled from and to."""

    agent: str
    files: tuple[str, ...]  # relative to the project root, main file first
    probes: tuple[str, ...]  # files that were absent but would join the definition if created
    source_sha256: str
    preferences: tuple[str, ...]


def files_digest(root: Path, files: tuple[str, ...]) -> str | None:
    """sha256 of the files' bytes (same recipe as rosetta.signature.source_digest); None if one is gone,
    is not a plain file, or lies outside the project (the list comes from a file anyone can edit)."""
    from rosetta.fileio import read_source_bytes

    digest = hashlib.sha256()
    for relative in files:
        if not isinstance(relative, str) or Path(relative).is_absolute() or ".." in Path(relative).parts:
            return None
        try:
            digest.update(read_source_bytes(root / relative))
        except OSError:
            return None
        digest.update(b"\0")
    return digest.hexdigest()


def read_index(out: Path, compiler: str) -> dict[str, IndexEntry]:
    """The index written by the last compile with this compiler version (empty when unusable). Its
    place holding something other than a plain file (a FIFO, a symlink, a device) is an
    :class:`~rosetta.store.artifact.ArtifactError` naming it: never read, waited on or written through."""
    from rosetta.fileio import NotRegularFile, read_trusted

    try:
        data = json.loads(read_trusted(out / INDEX_NAME, out, limit=MAX_BYTES))
    except FileNotFoundError:
        return {}
    except NotRegularFile as refused:
        from rosetta.errors import Location, Problem
        from rosetta.store.artifact import ArtifactError

        raise ArtifactError(Problem(f"the build index cannot be used: {refused}", Location(str(out / INDEX_NAME)),
                                    hint="delete it: it is only a cache, and the next compile writes it again")) from None
    except (OSError, ValueError):
        return {}
    try:
        if data.get("version") != VERSION or data.get("compiler") != compiler:
            return {}
        return {key: IndexEntry(value["agent"], tuple(value["files"]), tuple(value["probes"]),
                                value["source_sha256"], tuple(value["preferences"]))
                for key, value in data["entries"].items()}
    except (KeyError, TypeError, AttributeError, ValueError):
        return {}


def dump_index(entries: dict[str, IndexEntry], compiler: str) -> str:
    """The index as stable JSON text."""
    return json.dumps({"version": VERSION, "compiler": compiler,
                       "entries": {key: asdict(entries[key]) for key in sorted(entries)}}, indent=1) + "\n"
