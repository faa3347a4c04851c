"""Files rosetta trusts, read and written one way: everything under ``compiled/`` and ``.rosetta/``
goes through :func:`read_trusted` and :func:`write_trusted` (or :func:`trusted_path` for a file
another library opens, such as SQLite's). A trusted file is a plain file reached from its tree's
root through real directories only: a symlink at any level could serve or receive anyone's file,
a FIFO would block the reader forever, a device could be read without end. Writes are atomic:
readers see the old file or the new one, never half of either."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
import tempfile
from collections.abc import Iterator
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
            found = os.lstat(current)
        except FileNotFoundError:
            return path  # nothing further exists: nothing further can be a link
        mode = found.st_mode
        if stat.S_ISLNK(mode):
            raise NotRegularFile(f"{current} is a symlink; rosetta does not follow links under {root}")
        if current != path and not stat.S_ISDIR(mode):
            raise NotRegularFile(f"{current} is {_describe(mode)}, not a directory")
    if not (stat.S_ISDIR(mode) if directory else stat.S_ISREG(mode)):
        raise NotRegularFile(f"{path} is {_describe(mode)}, not a {'directory' if directory else 'regular file'}")
    refuse_hardlinked(path, found)
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
    for test, name in ((stat.S_ISREG, "a file"), (stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return name
    return "not a plain file"


def write_trusted(path: str | os.PathLike[str], text: str | bytes, root: str | os.PathLike[str]) -> Path:
    """Write ``text`` atomically to ``path`` under ``root``, refusing (:class:`NotRegularFile`) a
    path that leaves ``root`` or passes through a symlink, so a planted link cannot redirect it.
    The directory is held open from the temp file to the rename (:class:`TrustedDirectory`): a
    folder swapped for a symlink meanwhile cannot move either of them elsewhere."""
    path = Path(os.path.abspath(path))
    with TrustedDirectory.open(path.parent, root, create=True) as directory:
        temporary = directory.write_temporary(path.name, text)
        try:
            directory.replace(temporary, path.name)
        except BaseException:
            directory.unlink(temporary)
            raise
    return path


def stage_trusted(path: str | os.PathLike[str], text: str | bytes, root: str | os.PathLike[str],
                  *, times: tuple[int, int] | None = None) -> Path:
    """Write ``text`` to a synced temp file beside ``path`` under ``root`` (checked as
    :func:`write_trusted` checks), to be moved into place later by :func:`publish_trusted` (or
    dropped by :func:`remove_trusted`); ``times`` sets its access and modification times (ns)."""
    path = Path(os.path.abspath(path))
    with TrustedDirectory.open(path.parent, root, create=True) as directory:
        return path.parent / directory.write_temporary(path.name, text, times=times)


def publish_trusted(temporary: Path, path: str | os.PathLike[str], root: str | os.PathLike[str]) -> None:
    """Rename the staged ``temporary`` over ``path`` (its sibling) under ``root``, reaching their
    folder again without following a symlink; :class:`NotRegularFile` when the folder was replaced
    (the temp file is then not where it was written, and nothing is published)."""
    path = Path(os.path.abspath(path))
    with TrustedDirectory.open(path.parent, root) as directory:
        try:
            directory.replace(temporary.name, path.name)
        except FileNotFoundError:
            raise NotRegularFile(f"{temporary} is gone: {path.parent} was moved or replaced while rosetta "
                                 "wrote to it") from None


def remove_trusted(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> None:
    """Delete the plain file ``path`` under ``root`` if it is still there (never through a link)."""
    path = Path(os.path.abspath(path))
    try:
        with TrustedDirectory.open(path.parent, root) as directory:
            directory.unlink(path.name)
    except OSError:
        pass


@contextlib.contextmanager
def locked_trusted(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive lock on the lock file ``path`` under ``root`` (created on first use, never
    through a link, never a FIFO or a hard-linked file), waiting for other holders."""
    path = Path(os.path.abspath(path))
    with TrustedDirectory.open(path.parent, root, create=True) as directory:
        if directory.descriptor is None or not hasattr(os, "O_NOFOLLOW"):  # no descriptors: filelock's path lock
            from filelock import FileLock

            trusted_path(path, root)
            with FileLock(os.fspath(path)):
                yield
            return
        import fcntl

        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            handle = os.open(path.name, flags, 0o644, dir_fd=directory.descriptor)
        except OSError:
            found = directory.existing(path.name)
            if found is not None and not stat.S_ISREG(found.st_mode):
                raise NotRegularFile(f"{path} is {_describe(found.st_mode)}, not a plain lock file") from None
            raise
        try:
            found = os.fstat(handle)
            if not stat.S_ISREG(found.st_mode):
                raise NotRegularFile(f"{path} is {_describe(found.st_mode)}, not a plain lock file")
            refuse_hardlinked(path, found)
            fcntl.flock(handle, fcntl.LOCK_EX)  # released when the descriptor is closed
            yield
        finally:
            os.close(handle)


class TrustedDirectory:
    """A folder under a trusted root, held open while rosetta writes in it.

    It is reached from the root one component at a time, never following a symlink (``O_NOFOLLOW``
    on an open directory descriptor), and every name is then created, renamed and removed relative to
    that descriptor: a folder swapped for a symlink after the check cannot send a write, a rename or
    a removal anywhere else. (Where the platform has no ``dir_fd`` calls, the same checks are made
    on paths.)"""

    _FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
    _BY_DESCRIPTOR = {os.open, os.mkdir, os.rename, os.unlink, os.stat} <= os.supports_dir_fd

    def __init__(self, path: Path, descriptor: int | None) -> None:
        self.path = path
        self.descriptor = descriptor

    @classmethod
    def open(cls, path: str | os.PathLike[str], root: str | os.PathLike[str], *,
             create: bool = False) -> TrustedDirectory:
        """The folder ``path`` under ``root``, made (with its parents) when ``create``; raises
        :class:`NotRegularFile` for a path outside ``root`` or through a symlink or non-folder."""
        root, path = Path(os.path.abspath(root)), Path(os.path.abspath(path))
        if not path.is_relative_to(root):
            raise NotRegularFile(f"{path} is outside {root}")
        if not cls._BY_DESCRIPTOR:
            if create:
                trusted_path(path, root, directory=True) if path.exists() else path.mkdir(parents=True, exist_ok=True)
            return cls(trusted_path(path, root, directory=True), None)
        if create:
            os.makedirs(root, exist_ok=True)
        descriptor = cls._open(os.fspath(root), None, root)
        current = root
        try:
            for part in path.relative_to(root).parts:
                current = current / part
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, dir_fd=descriptor)
                child = cls._open(part, descriptor, current)
                os.close(descriptor)
                descriptor = child
        except BaseException:
            os.close(descriptor)
            raise
        return cls(path, descriptor)

    @classmethod
    def _open(cls, name: str, parent: int | None, path: Path) -> int:
        try:
            return os.open(name, cls._FLAGS, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                found = os.lstat(name, dir_fd=parent).st_mode if parent is not None else os.lstat(path).st_mode
                raise NotRegularFile(f"{path} is {_describe(found)}, not a directory; rosetta does not follow "
                                     "links where it writes") from None
            raise

    def __enter__(self) -> TrustedDirectory:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.descriptor is not None:
            os.close(self.descriptor)
            self.descriptor = None

    def _name(self, name: str) -> str:
        return name if self.descriptor is not None else os.fspath(self.path / name)

    def existing(self, name: str) -> os.stat_result | None:
        """What ``name`` is (not following a link), or None when absent."""
        try:
            return os.stat(self._name(name), dir_fd=self.descriptor, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def write_temporary(self, name: str, text: str | bytes, *, times: tuple[int, int] | None = None) -> str:
        """Write ``text`` (UTF-8; bytes as they are) to a new synced temp file ``.<name>.<random>.tmp``
        here and return its name; it keeps the mode of ``name`` when that exists (0644 otherwise)."""
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        existing = self.existing(name)
        mode = existing.st_mode & 0o777 if existing is not None and stat.S_ISREG(existing.st_mode) else 0o644
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
        for _ in range(100):
            temporary = f".{name}.{''.join(secrets.choice(_TEMP_LETTERS) for _ in range(8))}.tmp"
            try:
                handle = os.open(self._name(temporary), flags, 0o600, dir_fd=self.descriptor)
                break
            except FileExistsError:
                continue
        else:
            raise FileExistsError(f"no free temp file name beside {self.path / name}")
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
                stream.flush()
                if hasattr(os, "fchmod"):
                    os.fchmod(stream.fileno(), mode)
                if times is not None:
                    os.utime(stream.fileno(), ns=times)
                os.fsync(stream.fileno())
        except BaseException:
            self.unlink(temporary)
            raise
        return temporary

    def replace(self, temporary: str, name: str) -> None:
        """Rename ``temporary`` over ``name`` here, refusing a ``name`` that is not a plain file with
        one link (a rename never writes through a link, but a folder or a hard-linked file in the way
        is not rosetta's to replace)."""
        found = self.existing(name)
        if found is not None:
            if not stat.S_ISREG(found.st_mode):
                raise NotRegularFile(f"{self.path / name} is {_describe(found.st_mode)}, not a regular file")
            refuse_hardlinked(self.path / name, found)
        os.replace(self._name(temporary), self._name(name), src_dir_fd=self.descriptor, dst_dir_fd=self.descriptor)

    def append(self, name: str, data: bytes) -> None:
        """Append ``data`` to the plain file ``name`` here (created when absent) in one ``write``
        (``O_APPEND``: concurrent appenders never interleave lines that short); a link, FIFO, device
        or hard-linked file is refused, never written through."""
        flags = (os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                 | getattr(os, "O_BINARY", 0))
        try:
            handle = os.open(self._name(name), flags, 0o644, dir_fd=self.descriptor)
        except OSError as exc:
            found = self.existing(name)
            if found is not None and not stat.S_ISREG(found.st_mode):
                raise NotRegularFile(f"{self.path / name} is {_describe(found.st_mode)}, not a plain file") from None
            raise exc from None
        try:
            opened = os.fstat(handle)
            if not stat.S_ISREG(opened.st_mode):  # a FIFO or device: never write into one
                raise NotRegularFile(f"{self.path / name} is {_describe(opened.st_mode)}, not a plain file")
            refuse_hardlinked(self.path / name, opened)  # the data would land in the other name's file too
            written = os.write(handle, data)
            while written < len(data):  # only after a signal or a full disk; the rest still goes at the end
                written += os.write(handle, data[written:])
        finally:
            os.close(handle)

    def unlink(self, name: str) -> None:
        """Remove ``name`` here if it is there."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._name(name), dir_fd=self.descriptor)


_TEMP_LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789_"
"""The letters of a temp file's random part (as :mod:`tempfile` draws them; see
:data:`rosetta.store.publish.TEMPORARY`)."""


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


_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    """``text`` with each lone surrogate (the only characters UTF-8 cannot write) replaced by its
    ``\\uXXXX`` escape: exact JSON for a JSON text, which reads back to the same string."""
    return _SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
