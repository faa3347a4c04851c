"""Files rosetta trusts, read and written one way: everything under ``compiled/`` and ``.rosetta/``
goes through :func:`read_trusted` and :func:`write_trusted` (or :func:`trusted_path` for a file
another library opens, such as SQLite's). A trusted file is a plain file reached from its tree's
root through real directories only: a symlink at any level could serve or receive anyone's file,
a FIFO would block the reader forever, a device could be read without end. Writes are atomic:
readers see the old file or the new one, never half of either."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

MAX_READ = 64 * 1024 * 1024
"""Bytes :func:`read_regular` reads at most: a generated file past this is not one rosetta wrote."""


class NotRegularFile(OSError):
    """A symlink, FIFO, device or directory where a plain file was expected, a path that leaves its
    trusted tree, or a file over its size cap."""


def trusted_path(path: str | os.PathLike[str], root: str | os.PathLike[str], *, directory: bool = False) -> Path:
    """``path`` made absolute, after checking that it lies under ``root`` and that neither ``root``
    nor any existing directory or file between them is a symlink, and that ``path`` itself, if it
    exists, is a plain file (a directory with ``directory=True``). Raises :class:`NotRegularFile`
    naming the offending path otherwise. (Only ``root``'s own ancestors may be symlinks: they are
    the machine's, not the project's.)"""
    root = Path(os.path.abspath(root))
    path = Path(os.path.abspath(path))
    if not path.is_relative_to(root):
        raise NotRegularFile(f"{path} is outside {root}")
    current = root
    for part in ("", *path.relative_to(root).parts):
        current = current / part if part else current
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return path  # nothing further exists: nothing further can be a link
        if stat.S_ISLNK(mode):
            raise NotRegularFile(f"{current} is a symlink; rosetta does not follow links under {root}")
        if current != path and not stat.S_ISDIR(mode):
            raise NotRegularFile(f"{current} is {_describe(mode)}, not a directory")
    if not (stat.S_ISDIR(mode) if directory else stat.S_ISREG(mode)):
        raise NotRegularFile(f"{path} is {_describe(mode)}, not a {'directory' if directory else 'regular file'}")
    refuse_hardlinked(path, os.lstat(path))
    return path


def refuse_hardlinked(path: str | os.PathLike[str], found: os.stat_result) -> None:
    """Raise :class:`NotRegularFile` for a plain file with another name elsewhere (a hard link):
    writing, appending or locking it would change that other file too. rosetta makes none."""
    if stat.S_ISREG(found.st_mode) and found.st_nlink > 1:
        raise NotRegularFile(f"{path} is hard-linked to {found.st_nlink - 1} other name(s); rosetta never writes "
                             "through a link")


def read_trusted(path: str | os.PathLike[str], root: str | os.PathLike[str], *, limit: int = MAX_READ) -> str:
    """The UTF-8 text of the trusted file ``path`` under ``root`` (see :func:`trusted_path`), at most
    ``limit`` bytes; raises :class:`NotRegularFile` (an ``OSError``) or ``UnicodeDecodeError``."""
    return read_regular(trusted_path(path, root), limit=limit)


def read_regular(path: str | os.PathLike[str], *, limit: int = MAX_READ) -> str:
    """The UTF-8 text of ``path``, which must be a plain file of at most ``limit`` bytes: a symlink,
    FIFO, socket or device is refused at once (a FIFO would block the reader forever, a symlink
    could serve another file, ``/dev/zero`` would never end)."""
    return read_regular_bytes(path, limit=limit).decode("utf-8")


def read_regular_bytes(path: str | os.PathLike[str], *, limit: int = MAX_READ) -> bytes:
    """:func:`read_regular`'s bytes, undecoded."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    kind = os.lstat(path).st_mode
    if not stat.S_ISREG(kind):
        raise NotRegularFile(f"{path} is {_describe(kind)}, not a regular file")
    handle = os.open(path, flags)
    with os.fdopen(handle, "rb") as stream:
        opened = os.fstat(handle)
        if not stat.S_ISREG(opened.st_mode):  # swapped between lstat and open
            raise NotRegularFile(f"{path} is not a regular file")
        if opened.st_size > limit:
            raise NotRegularFile(f"{path} is larger than {_size(limit)}, more than rosetta ever writes there")
        data = stream.read(limit + 1)
        if len(data) > limit:  # grew while being read
            raise NotRegularFile(f"{path} is larger than {_size(limit)}, more than rosetta ever writes there")
    return data


def read_source_bytes(path: str | os.PathLike[str], *, limit: int = MAX_READ, head: bool = False) -> bytes:
    """The bytes of a source file the user wrote (a definition, a file it references). Symlinks are
    followed, as the user's own tools follow them, but what they reach must be a plain file of at
    most ``limit`` bytes: a FIFO is never waited on, a device never read. With ``head``, the first
    ``limit`` bytes of a longer file (how discovery peeks at a file)."""
    handle = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(handle, "rb") as stream:
        opened = os.fstat(handle)
        if not stat.S_ISREG(opened.st_mode):
            raise NotRegularFile(f"{path} is {_describe(opened.st_mode)}, not a regular file")
        data = stream.read(limit if head else limit + 1)
    if len(data) > limit:
        raise NotRegularFile(f"{path} is larger than {_size(limit)}")
    return data


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit // 1024} KiB"


def _describe(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return name
    return "not a plain file"


def write_trusted(path: str | os.PathLike[str], text: str | bytes, root: str | os.PathLike[str]) -> Path:
    """Write ``text`` atomically to ``path`` under ``root``, refusing (:class:`NotRegularFile`) a
    path that leaves ``root`` or passes through a symlink, so a planted link cannot redirect it.
    The check is made again just before the rename, after the (slow) synced write."""
    trusted_path(path, root)
    temporary = write_temporary(path, text)
    try:
        trusted_path(path, root)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return Path(path)


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
    """Write ``text`` to ``path`` via a temp file + rename in the same directory (for files the
    user names; files rosetta trusts go through :func:`write_trusted`)."""
    path = Path(path)
    temporary = write_temporary(path, text)
    try:
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path
