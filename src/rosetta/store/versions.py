"""Versions of an artifact: its content_sha256 is its id, and earlier ones are kept beside it.

``compiled/<agent>/<provider>/<model>.yaml`` is the current artifact (what ``rosetta compile`` wrote
last); ``<model>.versions/<content_sha256>.yaml`` holds each earlier one, byte-identical so that its
seal still verifies. Ids are written in full and accepted anywhere as a unique prefix of at least
7 hex digits (listings show 12). Nothing here parses YAML unless a version is loaded or listed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rosetta.errors import Location, Problem, RolloutError
from rosetta.store.artifact import Artifact, ArtifactError, parse_artifact, read_header

SHORT = 12
"""Hex digits of a version id shown in listings."""
VERSIONS_SUFFIX = ".versions"
ROLLOUT_SUFFIX = ".rollout.yaml"
_ID = re.compile(r"^[0-9a-f]{7,64}$")
_FULL_ID = re.compile(r"^[0-9a-f]{64}$")


def short_id(version_id: str) -> str:
    """The form shown to people: the first 12 hex digits."""
    return version_id[:SHORT]


def _stem(artifact: Path) -> str:
    return artifact.name[:-len(".yaml")] if artifact.name.endswith(".yaml") else artifact.name


def versions_dir(artifact: Path) -> Path:
    """``<model>.versions/`` beside the artifact."""
    return artifact.with_name(_stem(artifact) + VERSIONS_SUFFIX)


def rollout_path(artifact: Path) -> Path:
    """``<model>.rollout.yaml`` beside the artifact."""
    return artifact.with_name(_stem(artifact) + ROLLOUT_SUFFIX)


def is_rollout_file(path: Path) -> bool:
    """True for rollout files, which share the artifacts' folder but are not artifacts."""
    return path.name.endswith(ROLLOUT_SUFFIX)


def tree_of(artifact: Path) -> Path:
    """The compiled tree holding ``compiled/<agent>/<provider>/<model>.yaml``: the root below which
    every file of the artifact's (versions, rollout file) must be reached without a symlink."""
    return artifact.parents[2]


def read_stored(path: Path, artifact: Path) -> str:
    """The text of ``path``, a file beside ``artifact`` (or the artifact itself), read as a trusted
    file of its tree (:func:`rosetta.fileio.read_trusted`)."""
    from rosetta.fileio import read_trusted

    return read_trusted(path, tree_of(artifact))


def placed_artifact(text: str, path: Path, *, agent: str, model: str | None = None) -> Artifact:
    """The artifact ``text`` read from ``path``, checked to be where it claims to belong: this
    agent's, the artifact file of the model it names or a version of it filed under its own id.
    Raises :class:`ArtifactError` (sealed? parses? whose?) otherwise: a copy made or moved by hand
    is refused, whatever it says about itself."""
    from rosetta.store.artifact import artifact_path

    loaded = parse_artifact(text, path=str(path))
    kept = path.parent.name.endswith(VERSIONS_SUFFIX)
    home = artifact_path(path.parents[3] if kept else path.parents[2], loaded.agent, loaded.model)
    if kept:
        home = versions_dir(home) / f"{loaded.content_sha256}.yaml"
    if loaded.agent != agent or (model is not None and loaded.model != model) or path != home:
        what = f"version {short_id(loaded.content_sha256)} of " if kept else ""
        raise ArtifactError(Problem(f"refused: it is {what}the artifact of {loaded.agent} on {loaded.model}, not of "
                                    f"{agent}{' on ' + model if model else ''} at this path (copied or moved?)",
                                    Location(str(path)), hint=f"delete {path}" + (
                                        f"; its place would be {home}" if path != home else "")))
    return loaded


def retain(artifact: Path, replacement: str) -> Path | None:
    """Keep ``artifact`` as a version before ``replacement`` (text) overwrites it.

    Only an intact artifact whose content differs is kept (a tampered file is no version anyone can
    serve). The copy keeps the original's bytes and modification time, so a listing dates each
    version by when it was compiled. Call it under the output tree's lock, as the compiler does.
    """
    from rosetta.fileio import NotRegularFile, publish_trusted, remove_trusted, stage_trusted, trusted_path

    try:
        data = read_stored(artifact, artifact)
        written = artifact.stat()
    except (OSError, UnicodeDecodeError):  # gone, or a symlink or FIFO: nothing anyone could serve
        return None
    header = read_header(data)
    if not header.intact or header.content_sha256 == read_header(replacement).content_sha256:
        return None
    target = versions_dir(artifact) / f"{header.content_sha256}.yaml"
    try:
        if trusted_path(target, tree_of(artifact)).is_file():
            return target
        staged = stage_trusted(target, data, tree_of(artifact), times=(written.st_atime_ns, written.st_mtime_ns))
        try:
            publish_trusted(staged, target, tree_of(artifact))
        finally:
            remove_trusted(staged, tree_of(artifact))
    except NotRegularFile as refused:
        raise ArtifactError(Problem(f"refusing to keep the replaced artifact as a version: {refused}",
                                    Location(str(target)), hint="replace the symlink with a real folder, or delete it")) from None
    return target


def known_ids(artifact: Path) -> dict[str, Path]:
    """Every version id of ``artifact`` → the file holding it: the current one first, then the kept
    ones (files named by a full id in a real ``<model>.versions/`` folder; what they hold is
    checked when one is loaded)."""
    from rosetta.fileio import trusted_path

    found: dict[str, Path] = {}
    try:
        header = read_header(read_stored(artifact, artifact))
        if header.content_sha256:
            found[header.content_sha256] = artifact
    except (OSError, UnicodeDecodeError):
        pass
    try:
        names = sorted(os.listdir(trusted_path(versions_dir(artifact), tree_of(artifact), directory=True)))
    except OSError:
        names = []
    for name in names:
        stem = name[:-len(".yaml")] if name.endswith(".yaml") else ""
        if _FULL_ID.match(stem):
            found.setdefault(stem, versions_dir(artifact) / name)
    return found


def resolve_id(artifact: Path, version_id: str, *, where: Location | None = None,
               field_name: str | None = None) -> tuple[str, Path]:
    """The full id and file of ``version_id`` (a full id or a unique prefix); raises
    :class:`RolloutError` naming the known versions otherwise."""
    text = str(version_id).strip().lower()
    where = where or Location(str(artifact))
    listing = f"`rosetta versions {artifact.parent.parent.name} --model {artifact.parent.name}/{_stem(artifact)}`"
    if not _ID.match(text):
        raise RolloutError(Problem(f"{version_id!r} is not a version id", where, field_name,
                                   expected="7 to 64 hex digits of a content_sha256", hint=f"{listing} lists them"))
    matches = {full: path for full, path in known_ids(artifact).items() if full.startswith(text)}
    if len(matches) == 1:
        return next(iter(matches.items()))
    if not matches:
        raise RolloutError(Problem(f"no version {text} of {artifact.parent.parent.name} on this model", where,
                                   field_name, hint=f"{listing} lists them"))
    raise RolloutError(Problem(f"version id {text} is ambiguous ({', '.join(short_id(m) for m in sorted(matches))})",
                               where, field_name, hint="give more hex digits"))


def load_version(artifact: Path, version_id: str, *, agent: str, model: str, where: Location | None = None,
                 field_name: str | None = None) -> tuple[Artifact, Path]:
    """Version ``version_id`` of ``artifact``, verified as the artifact file itself is: a plain file
    reached without a symlink, sealed, of this agent and model, filed under its own id. Raises
    :class:`RolloutError` saying what is wrong.

    The definition may have changed since it was compiled: serving an earlier version is the point
    of pinning one, so it is not checked for staleness here; the strict runtime and ``rosetta
    compile --check`` render it again (:func:`rosetta.store.verify.reproduce`), which only a version
    of the current sources passes.
    """
    full, path = resolve_id(artifact, version_id, where=where, field_name=field_name)
    where = where or Location(str(path))
    try:
        loaded = placed_artifact(read_stored(path, artifact), path, agent=agent, model=model)
    except (OSError, UnicodeDecodeError) as exc:
        raise RolloutError(Problem(f"version {short_id(full)} is unreadable ({exc})", where, field_name)) from None
    except ArtifactError as error:
        raise RolloutError(Problem(f"version {short_id(full)} cannot be used: {error.problems[0].message}", where,
                                   field_name, hint=error.problems[0].hint or f"its file is {path}")) from None
    if loaded.content_sha256 != full:
        raise RolloutError(Problem(f"version {short_id(full)} is not in its file (which holds "
                                   f"{short_id(loaded.content_sha256)})", where, field_name,
                                   hint=f"remove the stray file {path}"))
    return loaded, path


@dataclass(frozen=True)
class Version:
    """One version of an artifact, as ``rosetta versions`` lists it."""

    id: str  # the full content_sha256
    path: Path
    current: bool  # the artifact file itself, i.e. what `rosetta compile` wrote last
    written: datetime  # when it was compiled: see :func:`written_times`
    problem: str | None = None  # why it cannot be served, or None
    agent_version: str | None = None  # the definition's `version:` when it was compiled
    scores: dict[str, Any] = field(default_factory=dict)  # provenance.scores of an optimized artifact
    optimizer: str | None = None  # provenance.optimizer.name, None for a plain render
    dataset: str | None = None  # provenance.dataset_sha256: the labeled data the scores were measured on
    measured_here: bool | None = None  # a search on this machine measured the scores (None: not asked)

    @property
    def short(self) -> str:
        return short_id(self.id)


def written_times(artifact: Path, ids: dict[str, Path]) -> dict[str, datetime]:
    """When each version (id → file) was compiled. Artifacts record no time (the same inputs give
    the same bytes), and a clone sets every file's modification time to its own; so where git has
    the history, a version is dated by the first commit that wrote its id into the artifact or its
    versions folder, and otherwise (no git, a file not committed or edited since) by its file's
    modification time."""
    import subprocess

    times: dict[str, datetime] = {}
    folder = versions_dir(artifact)
    try:
        paths = [str(artifact), *([str(folder)] if folder.is_dir() else [])]
        files = [artifact, *(sorted(folder.iterdir()) if folder.is_dir() else [])]
        dirty = "edited" if any(not _committed_as_is(file) for file in files) else ""
        log = _git(artifact.parent, "log", "--format=@%ct", "-p", "-U0", "--no-color", "--no-ext-diff",
                   "--no-textconv", "--", *paths)
        when = None
        for line in log.splitlines():  # newest first: the last date seen for an id is its first commit's
            if line.startswith("@") and line[1:].isdigit():
                when = datetime.fromtimestamp(int(line[1:]), UTC)
            elif line.startswith("+content_sha256: ") and when is not None:
                times[line.removeprefix("+content_sha256: ").strip()] = when
    except (OSError, subprocess.SubprocessError):
        dirty = "no git"
    found = {}
    for full, path in ids.items():
        try:
            modified = datetime.fromtimestamp(path.lstat().st_mtime, UTC)
        except OSError:
            continue
        edited = dirty and (path == artifact or full not in times)
        found[full] = modified if edited or full not in times else times[full]
    return found


GIT_SAFETY = ("-c", "core.fsmonitor=false", "-c", f"core.hooksPath={os.devnull}", "-c", "diff.external=",
              "-c", "core.pager=cat", "-c", "protocol.allow=never")
"""What a cloned repository's ``.git/config`` could make git run, switched off for every call
(``core.fsmonitor`` runs a command on status, external diffs and textconv on ``log -p``)."""


def _git(cwd: Path, *arguments: str) -> str:
    """Standard output of a read-only git command in ``cwd``, run so that nothing the repository's
    own configuration names is executed: no fsmonitor, hooks, external diff, textconv or pager, and
    never ``git status`` (its clean filters are programs the repository names)."""
    import subprocess

    environment = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}
    environment.pop("GIT_EXTERNAL_DIFF", None)
    return subprocess.run(["git", *GIT_SAFETY, *arguments], capture_output=True, text=True, timeout=10, cwd=cwd,
                          check=True, env=environment).stdout


def _committed_as_is(file: Path) -> bool:
    """Whether ``file`` is in HEAD with these very bytes: its git blob id, computed here (not by
    ``git hash-object``, which would run the repository's filters), against HEAD's."""
    import hashlib

    from rosetta.fileio import read_regular_bytes

    try:
        data = read_regular_bytes(file)
    except OSError:  # a link, FIFO or device where a version should be: not as committed
        return False
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
    try:
        return _git(file.parent, "rev-parse", "--verify", "-q", f"HEAD:./{file.name}").strip() == blob
    except Exception:  # noqa: BLE001  not committed, no repository, no git: not known to be as committed
        return False


def list_versions(artifact: Path, *, root: Path | None = None) -> list[Version]:
    """Every version of ``artifact``, newest first (the current one first among equals). With the
    project's ``root``, each says whether this machine measured its scores
    (:mod:`rosetta.store.measured`): a version shipped with a clone may record any score."""
    from rosetta.store.measured import measured_ids

    versions = []
    ids = known_ids(artifact)
    measured = measured_ids(root) if root is not None else None
    times = written_times(artifact, ids)
    for full, path in ids.items():
        written = times.get(full)
        if written is None:
            continue
        try:
            loaded = placed_artifact(read_stored(path, artifact), path, agent=artifact.parent.parent.name)
        except (OSError, UnicodeDecodeError, ArtifactError) as exc:
            problem = exc.problems[0].message if isinstance(exc, ArtifactError) else str(exc)
            versions.append(Version(full, path, path == artifact, written, problem))
            continue
        versions.append(Version(full, path, path == artifact, written, None, loaded.version,
                                dict(loaded.provenance.scores), loaded.provenance.optimizer.get("name"),
                                loaded.provenance.dataset_sha256, None if measured is None else full in measured))
    return sorted(versions, key=lambda v: (v.written, v.current), reverse=True)
