"""The documentation as a reader meets it: the README, then the docs site's pages in the order of
mkdocs.yml's nav. tests/test_readme.py runs the ``rosetta`` commands of the README and the guide
(:data:`GUIDE`); tests/test_docs_snippets.py runs every block of the other pages."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
import yaml
from conftest import REPO

DOCS = REPO / "docs"


def nav_pages() -> list[Path]:
    """The site's pages in nav order."""
    found: list[Path] = []

    def walk(entries: list) -> None:
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            if isinstance(value, list):
                walk(value)
            else:
                found.append(DOCS / value)

    walk(yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])
    return found


GUIDE = [REPO / "README.md", *(page for page in nav_pages()
                              if page.parent.name == "guide" or page.name == "development.md")]
"""The README and the guide: their commands run in order in one project (tests/test_readme.py)."""
OTHER_PAGES = [page for page in nav_pages()
               if page not in GUIDE and page.parent.name != "reference" and page.suffix == ".md"]
"""The front pages (home, getting started, concepts, the notebook gallery): every block runs
(tests/test_docs_snippets.py). The notebooks the gallery shows (docs/notebooks, a link to notebooks/)
are not markdown: CI executes them itself (tests/notebooks)."""
NOTEBOOK_PAGES = [page for page in nav_pages() if page.suffix == ".ipynb"]
"""The notebooks rendered on the site with their stored outputs (mkdocs-jupyter; tests/test_docs.py)."""


def guide_text() -> str:
    """The README and the guide pages, one after another."""
    return "\n\n".join(page.read_text(encoding="utf-8") for page in GUIDE)


def run_blocks(text: str, where: str, project: Path, monkeypatch: pytest.MonkeyPatch, *,
               export: Callable[[str, str], None] | None = None,
               set_up_elsewhere: Mapping[str, str] = {}) -> tuple[list[str], dict[str, object]]:
    """Run the fenced blocks of ``text`` in ``project`` as a reader would, in order: ``toml`` blocks
    added to its pyproject.toml, ``bash`` lines (``rosetta`` commands through the CLI, each ending
    with exit code 0; ``export NAME=VALUE`` through ``export``, by default set in the environment
    with ``...`` read as a placeholder key), ``python`` blocks in one namespace. A bash line in
    ``set_up_elsewhere`` (with why) is skipped; any other line fails. Returns what each python block
    printed, and the namespace."""
    from typer.testing import CliRunner

    from rosetta.cli import app

    def set_variable(name: str, value: str) -> None:
        monkeypatch.setenv(name, "sk-test-not-a-real-key" if value == "..." else value)

    monkeypatch.chdir(project)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    shown: list[str] = []
    for language, code in re.findall(r"```(toml|bash|python)\n(.*?)```", text, re.S):
        if language == "toml":
            with (project / "pyproject.toml").open("a", encoding="utf-8") as pyproject:
                pyproject.write("\n" + code)
        elif language == "python":
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(code, f"{where} block", "exec"), namespace)  # noqa: S102 (the page's own code)
            shown.append(printed.getvalue())
        else:
            for line in code.replace("\\\n", " ").splitlines():
                line = re.sub(r"\s+#.*$", "", line.strip())
                if not line or line in set_up_elsewhere:
                    continue
                if line.startswith("export "):
                    (export or set_variable)(*line.removeprefix("export ").partition("=")[::2])
                    continue
                assert line.startswith("rosetta "), f"{where}: no rule to run {line!r}"
                done = CliRunner().invoke(app, line.split()[1:], catch_exceptions=True)
                assert done.exit_code == 0 and done.exception is None, f"{where}: {line}\n{done.output}"
    return shown, namespace
