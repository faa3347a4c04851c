"""What the runtime reads from ``compiled/``: an agent's artifacts by model, each verified once
before it is trusted, and the rollout pins beside an artifact.

An artifact is used only when it is a plain file reached without a symlink (a FIFO or device is
refused, never waited on or read), its seal opens the file and holds, it parses (duplicate keys
included), it says it is this agent's artifact for the model its path names, and the inputs hash
it records is what its inputs hash to now: the files it was built from, the adapter, the model's
catalog entry, the compiler version and the project's section roles. In strict mode it must also
be what its definition (and, for one optimized on labeled data, that data) renders to now, and so
must every version a rollout file pins: :meth:`Shelf.reproduced`, the check ``rosetta compile
--check`` makes too. What an artifact says about itself never exempts it from a check.

Indexing reads only each file's ``model:`` line; the full check happens on first use of an
artifact and is cached, so repeated selections do no file I/O.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any

from rosetta.settings import Settings
from rosetta.store.artifact import (
    COMPILER_VERSION,
    Artifact,
    ArtifactError,
    artifact_path,
    changed_inputs,
    model_fingerprint,
    target_inputs,
)
from rosetta.store.index import files_digest
from rosetta.store.versions import VERSIONS_SUFFIX, is_rollout_file, placed_artifact, short_id

_MODEL_LINE = re.compile(r"^model: (\S+)$", re.MULTILINE)


class Shelf:
    """One agent's compiled artifacts under a project's compiled tree."""

    def __init__(self, dirs: Settings, agent: str) -> None:
        self.dirs, self.agent = dirs, agent
        self.compiled_dir, self.root = dirs.compiled_dir, dirs.root
        self.artifacts = _index(self.compiled_dir, agent)  # model id → path (no parsing yet)
        self._verified: dict[Path, Artifact | str] = {}
        self._reproduced: dict[Path, str | None] = {}

    def verified(self, path: Path) -> Artifact | str:
        """The artifact at ``path`` (the artifact file of a model, or a version of it), or why it
        cannot be used (checked once). A version is not checked for staleness: serving an earlier
        one is what pinning it is for."""
        if path not in self._verified:
            self._verified[path] = self._check(path)
        return self._verified[path]

    @functools.cached_property
    def cross(self) -> Any:
        """The agent's recorded cross-model matrix (:class:`~rosetta.store.cross.CrossRecord`), why it
        cannot be used (text), or None when there is none; read once."""
        from rosetta.store.cross import read_cross

        return read_cross(self.compiled_dir, self.agent)

    def path_for(self, model_id: str) -> Path:
        """Where the artifact of ``model_id`` is (or would be)."""
        return artifact_path(self.compiled_dir, self.agent, model_id)

    def pins(self, model_id: str) -> Any:
        """The verified rollout pins of ``model_id``'s artifact (:class:`~rosetta.store.routing.Pins`), or None."""
        from rosetta.store.routing import read_pins

        return read_pins(self.path_for(model_id), agent=self.agent, model=model_id)

    def _check(self, path: Path) -> Artifact | str:
        from rosetta.fileio import read_trusted

        try:
            artifact = placed_artifact(read_trusted(path, self.compiled_dir), path, agent=self.agent)
        except (OSError, UnicodeDecodeError) as exc:
            return f"unreadable ({exc})"
        except ArtifactError as error:
            return error.problems[0].message
        if path != self.path_for(artifact.model):
            return artifact  # a version: pinned on purpose, whatever it was compiled from
        stale = self.stale_inputs(artifact)
        return f"stale: {stale}" if stale else artifact

    def reproduced(self, path: Path, definition: Path | None) -> str | None:
        """Why the verified artifact or version at ``path`` is not what ``definition`` (and the
        labeled data it names) renders to now; None when it is, byte for byte. Checked once. Strict
        mode asks this before serving anything: a seal recomputed after an edit passes every other
        check, and whatever cannot be rendered again is refused, saying why."""
        if path not in self._reproduced:
            self._reproduced[path] = self._reproduce(path, definition)
        return self._reproduced[path]

    def _reproduce(self, path: Path, definition: Path | None) -> str | None:
        from rosetta.datasets import default_location
        from rosetta.definition.loader import load_definition
        from rosetta.errors import RosettaError
        from rosetta.providers.adapter import load_adapters
        from rosetta.providers.catalog import catalog_for
        from rosetta.signature import lower
        from rosetta.store.artifact import dump_artifact
        from rosetta.store.verify import UP_TO_DATE, expected_provenance, reproduce

        artifact = self.verified(path)
        if isinstance(artifact, str):
            return artifact
        label = "it" if path == self.path_for(artifact.model) else f"version {short_id(artifact.content_sha256)}"
        if definition is None:
            return (f"refused: {label} cannot be verified, no definition of {self.agent} was found to render it again "
                    f"(under {self.dirs.signatures_dir})")
        try:
            loaded = load_definition(definition, root=self.root, section_roles=self.dirs.section_roles)
            signature = lower(loaded)
            adapter = load_adapters([d for d in self.dirs.adapter_dirs if d.is_dir()])[artifact.adapter]
            model = catalog_for(self.dirs.root, self.dirs.models).resolve(artifact.model, unlisted=True)
            dataset = default_location(self.dirs.datasets_dir, signature.name, loaded.spec.evaluation.dataset,
                                       self.root)
        except (RosettaError, KeyError) as error:
            return f"refused: {label} cannot be rendered again from {definition.name} ({error})"
        expected = expected_provenance(loaded, model, adapter, self.root, self.dirs.section_roles)
        status, why = reproduce(artifact, dump_artifact(artifact), expected, signature, model, adapter,
                                dataset=dataset, cache_dir=self.dirs.cache_dir)
        if status == UP_TO_DATE:
            return None
        return f"refused: {label} is not what {definition.name} compiles to now: {why}"

    def stale_inputs(self, artifact: Artifact) -> str | None:
        """What changed among the artifact's inputs since it was compiled (None: nothing)."""
        from dataclasses import replace

        from rosetta.errors import RosettaError
        from rosetta.providers.catalog import catalog_for

        recorded = artifact.provenance
        source = files_digest(self.root, recorded.source_files)
        if source is None:
            return "a file it was built from is missing or outside the project: " + ", ".join(recorded.source_files)
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
    from rosetta.fileio import NotRegularFile, trusted_path

    try:
        agents = sorted(trusted_path(compiled_dir, compiled_dir, directory=True).iterdir())
    except (NotRegularFile, OSError):
        return {}
    return {d.name: found for d in agents if (found := _index(compiled_dir, d.name))}


def _index(compiled_dir: Path, agent: str) -> dict[str, Path]:
    """model id → artifact path, read from each file's ``model:`` line (no full parse)."""
    return scan(compiled_dir, agent)[0]


def scan(compiled_dir: Path, agent: str) -> tuple[dict[str, Path], dict[Path, str]]:
    """(model id → artifact path, stray file → the model it names, "" for none) under ``compiled/<agent>/``.

    Only plain files reached without a symlink count (a symlinked tree could be anyone's), and a
    file counts as a model's artifact only at that model's own path: a copy saved under another
    name, case or extension, hidden or deeper, is a stray, which can neither stand in for nor hide
    the real one; so is a file that is no artifact at all."""
    from rosetta.fileio import NotRegularFile, read_trusted, trusted_path

    found: dict[str, Path] = {}
    strays: dict[Path, str] = {}
    compiled_dir = Path(os.path.abspath(compiled_dir))
    try:
        directory = trusted_path(compiled_dir / agent, compiled_dir, directory=True)
    except (NotRegularFile, OSError):
        return found, strays
    for path in _files(directory):
        try:
            head = read_trusted(path, compiled_dir)[:1024]
        except (OSError, UnicodeDecodeError):
            strays[path] = ""
            continue
        match = _MODEL_LINE.search(head)
        if match is not None and path == artifact_path(compiled_dir, agent, match.group(1)):
            found[match.group(1)] = path
        else:
            strays[path] = match.group(1) if match is not None else ""
    return found, strays


def _files(directory: Path) -> list[Path]:
    """Every file under an agent's folder, at any depth and of any name (hidden, another case, another
    extension), but rosetta's own beside the artifacts: versions folders, rollout files, the
    cross-model record and temp files of a write in progress. Links are listed, never followed."""
    from rosetta.store.cross import FILE as CROSS
    from rosetta.store.publish import TEMPORARY

    listed = []
    for folder, subfolders, files in os.walk(directory):
        subfolders[:] = sorted(d for d in subfolders if not d.endswith(VERSIONS_SUFFIX))
        for name in sorted(files):
            path = Path(folder, name)
            if not (is_rollout_file(path) or TEMPORARY.fullmatch(name) or (name == CROSS and folder == str(directory))):
                listed.append(path)
    return listed
