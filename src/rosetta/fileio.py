"""Atomic file writes: readers see the old file or the new one, never half of either."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_temporary(path: str | os.PathLike[str], text: str | bytes) -> Path:
    """Write ``text`` (UTF-8, LF endings; bytes as they are) to a synced temp file beside ``path``.

    Renaming it over ``path`` (``os.replace``) publishes it atomically; callers that decide later
    whether to publish (e.g. under a lock) unlink it otherwise.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, path.stat().st_mode & 0o777 if path.exists() else 0o644)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return Path(temporary)


def write_atomic(path: str | os.PathLike[str], text: str | bytes) -> Path:
    """Write ``text`` to ``path`` via a temp file + rename in the same directory."""
    path = Path(path)
    temporary = write_temporary(path, text)
    try:
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path
