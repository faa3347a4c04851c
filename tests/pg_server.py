"""A throwaway PostgreSQL server on 127.0.0.1 for tests (Debian's postgresql package; `.ci/run`
installs it). Runs as the `postgres` user when the tests run as root, since PostgreSQL refuses
to run as root."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def find_binary(name: str) -> str:
    """``name`` from PATH, else from the newest /usr/lib/postgresql/<version>/bin."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if not candidates:
        raise RuntimeError(f"PostgreSQL's {name} is not installed: `.ci/run` installs Debian's postgresql package "
                           "(apt-get install postgresql)")
    return candidates[-1]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PostgresServer:
    """``with PostgresServer() as server: server.url`` — a fresh cluster, trust auth, loopback only."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="rosetta-pg-"))
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._as: list[str] = []
        if os.geteuid() == 0:
            self._as = ["runuser", "-u", "postgres", "--"]
            os.chmod(self.directory, 0o755)
            shutil.chown(self.directory, "postgres", "postgres")

    def _run(self, *command: str) -> None:
        subprocess.run([*self._as, *command], check=True, capture_output=True, text=True, timeout=120)

    def __enter__(self) -> PostgresServer:
        data = self.directory / "data"
        self._run(find_binary("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self._run(find_binary("pg_ctl"), "-D", str(data), "-l", str(self.directory / "server.log"), "-w", "-t", "60",
                  "-o", f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._run(find_binary("pg_ctl"), "-D", str(self.directory / "data"), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)
