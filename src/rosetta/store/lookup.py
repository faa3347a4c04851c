"""What the runtime reads from ``compiled/``: an agent's artifacts by model, each verified once
(its seal intact, its source files unchanged), and the rollout pins beside an artifact.

Indexing reads only each file's ``model:`` line; a full parse and the source check happen on first
use of an artifact and are cached, so repeated selections do no file I/O.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from rosetta.store.artifact import Artifact, ArtifactError, artifact_path, parse_artifact
from rosetta.store.versions import is_rollout_file

_MODEL_LINE = re.compile(r"^model: (\S+)$", re.MULTILINE)


class Shelf:
    """One agent's compiled artifacts under a compiled tree."""

    def __init__(self, compiled_dir: Path, agent: str, root: Path) -> None:
        self.compiled_dir, self.agent, self.root = compiled_dir, agent, root
        self.artifacts = _index(compiled_dir / agent)  # model id → path (no parsing yet)
        self._verified: dict[Path, Artifact | str] = {}

    def verified(self, path: Path) -> Artifact | str:
        """The artifact at ``path``, or why it cannot be used (checked once)."""
        if path not in self._verified:
            self._verified[path] = _check(path, self.root)
        return self._verified[path]

    def path_for(self, model_id: str) -> Path:
        """Where the artifact of ``model_id`` is (or would be)."""
        return artifact_path(self.compiled_dir, self.agent, model_id)

    def pins(self, model_id: str) -> Any:
        """The verified rollout pins of ``model_id``'s artifact (:class:`~rosetta.store.routing.Pins`), or None."""
        from rosetta.store.routing import read_pins

        return read_pins(self.path_for(model_id), agent=self.agent, model=model_id)


def _index(directory: Path) -> dict[str, Path]:
    """model id → artifact path, read from each file's ``model:`` line (no full parse)."""
    found: dict[str, Path] = {}
    if not directory.is_dir():
        return found
    for path in sorted(directory.glob("*/*.yaml")):
        if is_rollout_file(path):  # beside the artifacts, but not one (retained versions sit a level deeper)
            continue
        try:
            with path.open(encoding="utf-8") as handle:
                head = handle.read(1024)
        except (OSError, UnicodeDecodeError):
            continue
        match = _MODEL_LINE.search(head)
        if match:
            found[match.group(1)] = path
    return found


def _check(path: Path, root: Path) -> Artifact | str:
    try:
        artifact = parse_artifact(path.read_text(encoding="utf-8"), path=str(path))
    except (OSError, UnicodeDecodeError) as exc:
        return f"unreadable ({exc})"
    except ArtifactError as error:
        return error.problems[0].message
    digest = hashlib.sha256()
    for relative in artifact.provenance.source_files:
        try:
            digest.update((root / relative).read_bytes())
        except OSError:
            return f"stale: source file {relative} is missing"
        digest.update(b"\0")
    if digest.hexdigest() != artifact.provenance.source_sha256:
        return "stale: the definition changed since it was compiled"
    return artifact
