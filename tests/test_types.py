"""The runtime and the public API type-check under ``mypy --strict`` (the files and settings are
``[tool.mypy]`` in pyproject.toml), so what an application imports says what it takes and returns."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def test_the_runtime_and_the_public_api_pass_mypy_strict(tmp_path) -> None:
    checked = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")], cwd=REPO,
                             capture_output=True, text=True, timeout=600)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Success: no issues found" in checked.stdout
