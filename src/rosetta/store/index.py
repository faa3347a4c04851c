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


@dataclass(frozen=True)
class IndexEntry:
    """What a definition file compiled from and to."""

    agent: str
    files: tuple[str, ...]  # relative to the project root, main file first
    probes: tuple[str, ...]  # files that were absent but would join the definition if created
    source_sha256: str
    preferences: tuple[str, ...]


def files_digest(root: Path, files: tuple[str, ...]) -> str | None:
    """sha256 of the files' bytes (same recipe as rosetta.signature.source_digest); None if one is gone."""
    digest = hashlib.sha256()
    for relative in files:
        try:
            digest.update((root / relative).read_bytes())
        except OSError:
            return None
        digest.update(b"\0")
    return digest.hexdigest()


def read_index(out: Path, compiler: str) -> dict[str, IndexEntry]:
    """The index written by the last compile with this compiler version (empty when unusable)."""
    try:
        data = json.loads((out / INDEX_NAME).read_text(encoding="utf-8"))
        if data.get("version") != VERSION or data.get("compiler") != compiler:
            return {}
        return {key: IndexEntry(value["agent"], tuple(value["files"]), tuple(value["probes"]),
                                value["source_sha256"], tuple(value["preferences"]))
                for key, value in data["entries"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def dump_index(entries: dict[str, IndexEntry], compiler: str) -> str:
    """The index as stable JSON text."""
    return json.dumps({"version": VERSION, "compiler": compiler,
                       "entries": {key: asdict(entries[key]) for key in sorted(entries)}}, indent=1) + "\n"
