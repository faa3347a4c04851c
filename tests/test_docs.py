"""Issue 86: the docs site (mkdocs.yml, docs/) builds with warnings as errors — a broken link, a
page missing from the nav, an API object mkdocstrings cannot find all fail it — and its command-line
reference is what the commands print today."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                           cwd=REPO, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr[-4000:]
    pages = {path.relative_to(tmp_path / "site").as_posix() for path in (tmp_path / "site").rglob("index.html")}
    assert {"index.html", "getting-started/index.html", "concepts/index.html", "reference/cli/index.html",
            "reference/api/index.html", "reference/artifact/index.html"} <= pages
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert "RetryPolicy" in api and "ModelCallError" in api  # the API reference came from the docstrings
    assert not (tmp_path / "site" / "cli_reference.py").exists()


def test_the_command_line_reference_is_current() -> None:
    script = runpy.run_path(str(REPO / "docs" / "cli_reference.py"))
    page = script["PAGE"].read_text(encoding="utf-8")
    assert page == script["reference"](), "run `python docs/cli_reference.py` and commit docs/reference/cli.md"
    assert "## `rosetta export promptfoo`" in page and "## `rosetta experiment start`" in page


def test_the_settings_table_lists_every_setting_and_no_other() -> None:
    """The configuration page's table is the reference for ``[tool.rosetta]``: a key added to the
    settings without a row, or a row for a key that is gone, fails here."""
    import re

    from rosetta.settings import KEYS

    page = (REPO / "docs" / "guide" / "configuration.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([a-z_]+)` \|", page, re.M))
    assert rows == set(KEYS) - {"root"}  # the root is where pyproject.toml is, never a key
