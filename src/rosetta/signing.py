"""The per-project secret that signs what rosetta writes and later acts on, kept outside the project:
evaluation-cache entries, study journals and outcome-log lines.

An entry is trusted only when its HMAC verifies under this secret: one planted in a cloned
repository, copied from another project or written by a rosetta that did not sign does not. The
secret lives in the user's cache folder (``ROSETTA_CACHE_DIR`` or ``~/.cache/rosetta``, which no
project setting names), never in the project tree, so a repository cannot ship one: one file per
project, named by the sha256 of the project root's absolute path, created once (exclusively, mode
0600) and read back through :mod:`rosetta.fileio`.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import time
from pathlib import Path

from rosetta.fileio import read_trusted

SECRET_BYTES = 32
_HEX = re.compile(r"[0-9a-f]{64}")


class NoSecret(Exception):
    """The project's secret cannot be had safely; the message says why and how to fix it."""


def sign(secret: bytes, key: str, value: str) -> str:
    """HMAC-SHA256 over an entry's key and value (the key is hex: the separator cannot occur in it)."""
    return hmac.new(secret, f"{key}\0{value}".encode(), hashlib.sha256).hexdigest()


def verifies(secret: bytes, key: str, value: str, digest: object) -> bool:
    return isinstance(digest, str) and hmac.compare_digest(digest, sign(secret, key, value))


def secret_path(root: str | os.PathLike[str], cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """``<cache_dir>/project-keys/<sha256 of root>.key``; ``cache_dir`` defaults to the user's cache
    folder (``ROSETTA_CACHE_DIR``, else ``~/.cache/rosetta``), which no project setting names.
    Raises :class:`NoSecret` when that folder resolves (symlinks and ``/proc/self/cwd`` followed)
    inside the project, where a repository could ship it."""
    root = Path(os.path.abspath(root))
    if cache_dir is None:
        from rosetta.settings import user_cache_dir

        cache_dir = user_cache_dir()
    folder = Path(os.path.abspath(cache_dir)) / "project-keys"
    real, project = folder.resolve(), root.resolve()
    if real == project or real.is_relative_to(project):
        raise NoSecret(f"the key folder {folder} resolves to {real}, inside the project {project}, where a repository "
                       "could ship its own key; set ROSETTA_CACHE_DIR to a folder outside it")
    return folder / (hashlib.sha256(str(root).encode()).hexdigest() + ".key")


def project_secret(root: str | os.PathLike[str], cache_dir: str | os.PathLike[str] | None = None) -> bytes:
    """The secret of the project at ``root``, created on first use; raises :class:`NoSecret`."""
    path = secret_path(root, cache_dir)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _create(path)
    except FileExistsError:
        pass  # made before, perhaps by a parallel worker this very moment: read it below
    except OSError as exc:
        raise NoSecret(f"cannot create the project key {path}: {exc.strerror or exc}; make its folder writable "
                       "or set ROSETTA_CACHE_DIR to one that is") from None
    for _ in range(50):  # a worker that created it an instant ago may not have written its 64 bytes yet
        try:
            text = read_trusted(path, path.parent, limit=1024).strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise NoSecret(f"cannot read the project key {path}: {exc}; delete it and rosetta makes a new one "
                           "(cached answers are then asked again)") from None
        if _HEX.fullmatch(text):
            _check_owner(path)
            return bytes.fromhex(text)
        time.sleep(0.02)
    raise NoSecret(f"{path} is not a key rosetta wrote (64 hex digits); delete it and rosetta makes a new one "
                   "(cached answers are then asked again)")


def _check_owner(path: Path) -> None:
    """Refuse a key another user owns, or that others may read or write: whoever can read it can
    sign cache entries this project then trusts (rosetta makes its keys 0600)."""
    found = os.lstat(path)
    if hasattr(os, "getuid") and found.st_uid != os.getuid():
        raise NoSecret(f"{path} belongs to another user (uid {found.st_uid}); delete it and rosetta makes a new one "
                       "(cached answers are then asked again)")
    if found.st_mode & 0o077:
        raise NoSecret(f"{path} may be read or written by others (mode {found.st_mode & 0o777:04o}); rosetta keeps "
                       "keys at 0600: delete it and rosetta makes a new one, or chmod 600 it")


def _create(path: Path) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    handle = os.open(path, flags, 0o600)
    try:
        with os.fdopen(handle, "w", encoding="ascii") as stream:
            stream.write(os.urandom(SECRET_BYTES).hex() + "\n")
            stream.flush()
            os.fsync(stream.fileno())
    except BaseException:
        path.unlink(missing_ok=True)  # a half-written key would stop every later search from caching
        raise
