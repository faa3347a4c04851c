"""Writing under ``compiled/``: every write is atomic (a temp file, fsync, rename) and serialized
by one lock per tree, so concurrent compiles, promotions and index updates leave only whole files."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from rosetta.store.index import INDEX_NAME, IndexEntry, dump_index, read_index
from rosetta.store.pins import Rollout, dump_rollout
from rosetta.store.versions import retain, rollout_path

LOCK_NAME = ".rosetta.lock"
"""The lock file of a compiled tree; every writer takes it."""


@contextlib.contextmanager
def locked(out: Path) -> Iterator[None]:
    """Hold the tree's lock (created on first use)."""
    from filelock import FileLock

    out.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out / LOCK_NAME)):
        yield


def publish(path: Path, text: str, out: Path, *, replace: Callable[[], bool] = lambda: True) -> None:
    """Write an artifact atomically under the output tree's lock; ``replace()`` (asked under the
    lock) may decline when another process wrote an identical artifact meanwhile.

    The artifact it replaces, when its content differs, is kept as a version beside it
    (:func:`rosetta.store.versions.retain`): rollouts pin versions, and A/B tests need both."""
    from rosetta.fileio import write_temporary

    staged = write_temporary(path, text)  # the slow part (fsync) happens unlocked
    try:
        with locked(out):
            if replace():
                retain(path, text)
                os.replace(staged, path)
    finally:
        staged.unlink(missing_ok=True)


def save_index(out: Path, entries: dict[str, IndexEntry], compiler: str) -> None:
    """Merge ``entries`` into the tree's build index (keeping what concurrent compiles recorded)."""
    from rosetta.fileio import write_atomic

    with locked(out):
        current = read_index(out, compiler)
        write_atomic(out / INDEX_NAME, dump_index({**current, **entries}, compiler))


def write_pins(artifact: Path, rollout: Rollout) -> None:
    """Replace the rollout file beside ``artifact`` (call it holding :func:`locked`)."""
    from rosetta.fileio import write_atomic

    write_atomic(rollout_path(artifact), dump_rollout(rollout))
