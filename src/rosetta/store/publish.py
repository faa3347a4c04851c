"""Writing under ``compiled/``: every write is atomic (a temp file, fsync, rename) and serialized
by one lock per tree, so concurrent compiles, promotions and index updates leave only whole files.
Nothing is written outside the tree or through a symlink in it, and temp files that a killed
writer left behind are cleaned up by the next compile."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rosetta.store.cross import CrossRecord, cross_path, dump_cross
from rosetta.store.index import INDEX_NAME, IndexEntry, dump_index, read_index
from rosetta.store.pins import Rollout, dump_rollout
from rosetta.store.versions import retain, rollout_path

LOCK_NAME = ".rosetta.lock"
"""The lock file of a compiled tree; every writer takes it."""


@contextlib.contextmanager
def locked(out: Path) -> Iterator[None]:
    """Hold the tree's lock (created on first use); a lock path that is not a plain file (a FIFO, a
    symlink to elsewhere) is refused, naming it, rather than opened."""
    from rosetta.fileio import NotRegularFile, locked_trusted

    try:
        with locked_trusted(out / LOCK_NAME, out):
            yield
    except NotRegularFile as refused:
        raise _refusal(out / LOCK_NAME, out, refused) from None


@dataclass(frozen=True)
class Staged:
    """An artifact written to a synced temp file beside its place, waiting for :func:`commit`."""

    path: Path
    temporary: Path
    text: str
    out: Path


def stage(path: Path, text: str, out: Path) -> Staged:
    """Write ``text`` to a temp file beside ``path`` (the slow part, fsync, needs no lock); refuse a
    path that leaves ``out`` or passes through a symlink, so a planted link cannot redirect a write."""
    from rosetta.fileio import NotRegularFile, stage_trusted

    inside(path, out)
    try:
        return Staged(path, stage_trusted(path, text, out), text, out)
    except NotRegularFile as refused:
        raise _refusal(path, out, refused) from None


def commit(staged: Staged, out: Path, *, replace: Callable[[], bool] = lambda: True) -> None:
    """Move a staged artifact into place under the tree's lock; ``replace()`` (asked under the lock)
    may decline when another process wrote an identical artifact meanwhile.

    The artifact it replaces, when its content differs, is kept as a version beside it
    (:func:`rosetta.store.versions.retain`): rollouts pin versions, and A/B tests need both."""
    with locked(out):
        place(staged, out, replace=replace)


def place(staged: Staged, out: Path, *, replace: Callable[[], bool] = lambda: True) -> None:
    """:func:`commit` for a caller that holds :func:`locked` already (one lock for many artifacts)."""
    from rosetta.fileio import NotRegularFile, publish_trusted

    try:
        if replace():
            inside(staged.path, out)
            retain(staged.path, staged.text)
            publish_trusted(staged.temporary, staged.path, out)
    except NotRegularFile as refused:
        raise _refusal(staged.path, out, refused) from None
    finally:
        discard(staged)


def publish(path: Path, text: str, out: Path, *, replace: Callable[[], bool] = lambda: True) -> None:
    """:func:`stage` then :func:`commit`: one artifact written atomically."""
    commit(stage(path, text, out), out, replace=replace)


def publish_version(path: Path, text: str, out: Path) -> Path:
    """Keep ``text`` as a version of the artifact at ``path`` without making it the active one
    (``rosetta versions`` lists it; a rollout can pin or test it). Returns the version's file."""
    from rosetta.store.artifact import read_header
    from rosetta.store.versions import versions_dir

    target = inside(versions_dir(path) / f"{read_header(text).content_sha256}.yaml", out)
    with locked(out):
        if not target.is_file():
            _write(target, text, out)
    return target


def discard(staged: Staged) -> None:
    """Drop a staged artifact that must not be published (a no-op once it is)."""
    from rosetta.fileio import remove_trusted

    remove_trusted(staged.temporary, staged.out)


def inside(path: Path, out: Path) -> Path:
    """``path`` (absolute) if it lies under ``out`` with no symlink on the way and is a plain file or
    absent; :class:`ArtifactError` naming what is in the way otherwise."""
    from rosetta.fileio import NotRegularFile, trusted_path

    try:
        return trusted_path(path, out)
    except NotRegularFile as refused:
        raise _refusal(path, out, refused) from None


def _write(path: Path, text: str, out: Path) -> None:
    from rosetta.fileio import NotRegularFile, write_trusted

    try:
        write_trusted(path, text, out)
    except NotRegularFile as refused:
        raise _refusal(path, out, refused) from None


def _refusal(path: Path, out: Path, refused: OSError) -> Exception:
    from rosetta.errors import Location, Problem
    from rosetta.store.artifact import ArtifactError

    return ArtifactError(Problem(f"refusing to write {path}: {refused}", Location(str(path)),
                                 hint=f"replace it with a real directory or file under {out}, or delete it"))


STALE_AFTER_S = 3600.0
"""Age after which a leftover temp file is a killed writer's, not one still being written."""


TEMPORARY = re.compile(r"\.[^/]+\.(?:yaml|json)\.[a-z0-9_]{8}\.tmp")
"""The names of the temp files rosetta writes under ``compiled/`` (:func:`rosetta.fileio.write_temporary`
beside a YAML artifact, version, pin or cross record, or the JSON index): nothing else is removed."""


def clean_stale_temporaries(out: Path, *, now: float | None = None) -> list[Path]:
    """Delete the temp files that killed compiles left under ``out`` (only names :data:`TEMPORARY`
    matches, plain files, an hour old): a file of any other name is the user's, whatever it is called.
    The walk holds each folder open (:func:`os.fwalk`) and removes names relative to it, so a folder
    swapped for a symlink mid-walk cannot point a removal elsewhere."""
    import stat
    import time

    now = time.time() if now is None else now
    removed: list[Path] = []
    if not out.is_dir() or out.is_symlink():
        return removed
    walk = os.fwalk(out) if hasattr(os, "fwalk") else ((d, s, f, None) for d, s, f in os.walk(out))
    for directory, _, files, descriptor in walk:  # neither follows symlinks
        for name in files:
            if not TEMPORARY.fullmatch(name):
                continue
            where = name if descriptor is not None else os.path.join(directory, name)
            try:
                found = os.stat(where, dir_fd=descriptor, follow_symlinks=False)
                if stat.S_ISREG(found.st_mode) and found.st_nlink == 1 and now - found.st_mtime > STALE_AFTER_S:
                    os.unlink(where, dir_fd=descriptor)
                    removed.append(Path(directory) / name)
            except OSError:
                continue
    return removed


def save_index(out: Path, entries: dict[str, IndexEntry], compiler: str) -> None:
    """Merge ``entries`` into the tree's build index (keeping what concurrent compiles recorded)."""
    with locked(out):
        current = read_index(out, compiler)
        _write(out / INDEX_NAME, dump_index({**current, **entries}, compiler), out)


def write_cross(out: Path, record: CrossRecord) -> Path:
    """Replace the agent's cross-model record (:mod:`rosetta.store.cross`) under the tree's lock."""
    path = cross_path(out, record.agent)
    with locked(out):
        _write(path, dump_cross(record), out)
    return path


def write_pins(artifact: Path, rollout: Rollout) -> None:
    """Replace the rollout file beside ``artifact`` (call it holding :func:`locked`)."""
    from rosetta.store.versions import tree_of

    _write(rollout_path(artifact), dump_rollout(rollout), tree_of(artifact))
