"""What the runtime reads from ``compiled/``: an agent's artifacts by model, each verified once
before it is trusted, and the rollout pins beside an artifact.

An artifact is used only when it is a plain file (a symlink or FIFO is refused, never followed or
waited on), its seal opens the file and holds, it parses (duplicate keys included), it says it is
this agent's artifact for the model its path names, and the inputs hash it records is what its
inputs hash to now: the files it was built from, the adapter, the model's catalog entry, the
compiler version and the project's section roles. In strict mode it must also be what its
definition renders to now. Labeled datasets are checked by ``rosetta compile --check``, not here:
deployments rarely ship them, and the demos an optimized prompt uses are sealed inside it.

Indexing reads only each file's ``model:`` line; the full check happens on first use of an
artifact and is cached, so repeated selections do no file I/O.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rosetta.project import ProjectDirs
from rosetta.store.artifact import (
    COMPILER_VERSION,
    Artifact,
    ArtifactError,
    artifact_path,
    changed_inputs,
    model_fingerprint,
    parse_artifact,
    target_inputs,
)
from rosetta.store.index import files_digest
from rosetta.store.versions import is_rollout_file

_MODEL_LINE = re.compile(r"^model: (\S+)$", re.MULTILINE)


class Shelf:
    """One agent's compiled artifacts under a project's compiled tree."""

    def __init__(self, dirs: ProjectDirs, agent: str) -> None:
        self.dirs, self.agent = dirs, agent
        self.compiled_dir, self.root = dirs.compiled_dir, dirs.root
        self.artifacts = _index(self.compiled_dir, agent)  # model id → path (no parsing yet)
        self._verified: dict[Path, Artifact | str] = {}
        self._rendered: dict[Path, str | None] = {}

    def verified(self, path: Path) -> Artifact | str:
        """The artifact at ``path``, or why it cannot be used (checked once)."""
        if path not in self._verified:
            self._verified[path] = self._check(path)
        return self._verified[path]

    def path_for(self, model_id: str) -> Path:
        """Where the artifact of ``model_id`` is (or would be)."""
        return artifact_path(self.compiled_dir, self.agent, model_id)

    def pins(self, model_id: str) -> Any:
        """The verified rollout pins of ``model_id``'s artifact (:class:`~rosetta.store.routing.Pins`), or None."""
        from rosetta.store.routing import read_pins

        return read_pins(self.path_for(model_id), agent=self.agent, model=model_id)

    def _check(self, path: Path) -> Artifact | str:
        from rosetta.fileio import read_regular

        try:
            artifact = parse_artifact(read_regular(path), path=str(path))
        except (OSError, UnicodeDecodeError) as exc:
            return f"unreadable ({exc})"
        except ArtifactError as error:
            return error.problems[0].message
        if artifact.agent != self.agent or path != self.path_for(artifact.model):
            return (f"refused: it is the artifact of {artifact.agent} on {artifact.model}, "
                    f"not of {self.agent} at this path (copied or moved?)")
        stale = self.stale_inputs(artifact)
        return f"stale: {stale}" if stale else artifact

    def differs_from_its_sources(self, path: Path, definition: Path) -> str | None:
        """Why the verified artifact at ``path`` is not what ``definition`` renders to now (None: it
        is, byte for byte), checked once. Strict mode asks this before serving an artifact: a seal
        recomputed after an edit passes every other check. An optimized artifact's demos come from
        labeled data deployments rarely ship, so it is left to ``rosetta compile --check``."""
        if path not in self._rendered:
            self._rendered[path] = self._render_again(path, definition)
        return self._rendered[path]

    def _render_again(self, path: Path, definition: Path) -> str | None:
        from rosetta.definition.loader import load_definition
        from rosetta.errors import RosettaError
        from rosetta.providers.adapter import load_adapters
        from rosetta.providers.catalog import catalog_for
        from rosetta.signature import lower
        from rosetta.store.artifact import dump_artifact
        from rosetta.store.verify import first_difference, render_again

        artifact = self.verified(path)
        if isinstance(artifact, str) or artifact.provenance.dataset_sha256:
            return None
        try:
            signature = lower(load_definition(definition, root=self.root, section_roles=self.dirs.section_roles))
            adapter = load_adapters([d for d in self.dirs.adapter_dirs if d.is_dir()])[artifact.adapter]
            model = catalog_for(self.dirs.root, self.dirs.models).resolve(artifact.model, unlisted=True)
            wanted = render_again(artifact, artifact.provenance, signature, model, adapter, signature.demos)
        except (RosettaError, KeyError) as error:
            return f"it cannot be rendered again from {definition.name} ({error})"
        found = dump_artifact(artifact)
        if wanted != found:
            return (f"refused: it differs from what {definition.name} compiles to now, at "
                    f"`{first_difference(wanted, found)}` (edited after compiling?)")
        return None

    def stale_inputs(self, artifact: Artifact) -> str | None:
        """What changed among the artifact's inputs since it was compiled (None: nothing)."""
        from dataclasses import replace

        from rosetta.errors import RosettaError
        from rosetta.providers.catalog import catalog_for

        recorded = artifact.provenance
        if any(Path(f).is_absolute() or ".." in Path(f).parts or "\\" in f for f in recorded.source_files):
            return "its source list names files outside the project: " + ", ".join(recorded.source_files)
        source = files_digest(self.root, recorded.source_files)
        if source is None:
            return "a file it was built from is missing: " + ", ".join(recorded.source_files)
        try:
            # it was accepted when compiled
            model = catalog_for(self.dirs.root, self.dirs.models).resolve(artifact.model, unlisted=True)
        except RosettaError as error:
            return f"its model cannot be resolved now ({error.problems[0].message})"
        adapter_sha = _adapter_digests(self.dirs.adapter_dirs).get(artifact.adapter)
        if adapter_sha is None:
            return f"no adapter named {artifact.adapter} is known now"
        now = replace(recorded, compiler_version=COMPILER_VERSION, source_sha256=source,
                      adapter_sha256=adapter_sha, model_sha256=model_fingerprint(model),
                      inputs_sha256=target_inputs(source, model, adapter_sha, self.dirs.section_roles))
        return changed_inputs(recorded, now)


_digests: dict[tuple[Path, ...], dict[str, str]] = {}


def _adapter_digests(extra_dirs: tuple[Path, ...]) -> dict[str, str]:
    """adapter name → sha256 of its file now (bundled + the project's), read once per process."""
    if extra_dirs not in _digests:
        from rosetta.providers.adapter_files import adapter_digests

        _digests[extra_dirs] = adapter_digests(d for d in extra_dirs if d.is_dir())
    return _digests[extra_dirs]


def compiled_models(compiled_dir: Path) -> dict[str, dict[str, Path]]:
    """agent → (model id → artifact path) for every agent under ``compiled_dir``."""
    if compiled_dir.is_symlink() or not compiled_dir.is_dir():
        return {}
    agents = (d.name for d in sorted(compiled_dir.iterdir()) if d.is_dir() and not d.is_symlink())
    return {agent: found for agent in agents if (found := _index(compiled_dir, agent))}


def _index(compiled_dir: Path, agent: str) -> dict[str, Path]:
    """model id → artifact path, read from each file's ``model:`` line (no full parse). Only plain
    files under a real ``compiled/<agent>`` directory count: a symlinked tree could be anyone's."""
    from rosetta.fileio import read_regular

    directory = compiled_dir / agent
    found: dict[str, Path] = {}
    if directory.is_symlink() or not directory.is_dir():
        return found
    for path in sorted(directory.glob("*/*.yaml")):
        if is_rollout_file(path) or path.parent.is_symlink():  # rollout files sit beside the artifacts
            continue
        try:
            head = read_regular(path)[:1024]
        except (OSError, UnicodeDecodeError):
            continue
        match = _MODEL_LINE.search(head)
        if match:
            found[match.group(1)] = path
    return found
