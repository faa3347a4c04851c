"""Atomic file writes: readers see the old file or the new one, never half of either; and reads
that refuse what is not a plain file instead of following or blocking on it."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

MAX_READ = 64 * 1024 * 1024
"""Bytes :func:`read_regular` reads at most: a generated file past this is not one rosetta wrote."""


class NotRegularFile(OSError):
    """A symlink, FIFO, device or directory where a plain file was expected."""


def read_regular(path: str | os.PathLike[str]) -> str:
    """The UTF-8 text of ``path``, which must be a plain file: a symlink, FIFO, socket or device is
    refused at once (a FIFO would block the reader forever, a symlink could serve another file)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    kind = os.lstat(path).st_mode
    if not stat.S_ISREG(kind):
        raise NotRegularFile(f"{path} is {_describe(kind)}, not a regular file")
    handle = os.open(path, flags)
    with os.fdopen(handle, "rb") as stream:
        opened = os.fstat(handle)
        if not stat.S_ISREG(opened.st_mode):  # swapped between lstat and open
            raise NotRegularFile(f"{path} is not a regular file")
        if opened.st_size > MAX_READ:
            raise NotRegularFile(f"{path} is larger than {MAX_READ // (1024 * 1024)} MiB")
        data = stream.read()
    return data.decode("utf-8")


def _describe(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return name
    return "not a plain file"


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
