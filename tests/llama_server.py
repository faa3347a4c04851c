"""llama-cpp-python's own OpenAI-compatible server (``python -m llama_cpp.server``) on 127.0.0.1,
serving an embedded GGUF through its chat template: the real self-hosted endpoint the declared-model
and export tests talk to."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

CONTEXT = 16384


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """The server, started and waited for (at most 180 s); ``url`` is its OpenAI base URL."""

    def __init__(self, gguf: Path, log: Path, *, alias: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--chat_format", "gemma",
             "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(CONTEXT), "--model_alias", alias,
             "--logits_all", "false"],  # the default keeps n_ctx × vocabulary logits: 16 GiB at this window
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert self.process.poll() is None, log.read_text(errors="replace")[-3000:]
            try:
                if httpx.get(f"{self.url}/models", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.5)
        self.stop()
        raise AssertionError("the llama.cpp server did not start in 180 s:\n" + log.read_text(errors="replace")[-3000:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
