"""Issue 86: the docs site (mkdocs.yml, docs/) builds with warnings as errors — a broken link, a
page missing from the nav, an API object mkdocstrings cannot find all fail it — and its command-line
reference is what the commands print today. The notebook gallery shows every notebook of notebooks/
with the outputs stored in it (mkdocs-jupyter, never executing them)."""

from __future__ import annotations

import html
import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

from conftest import REPO
from documented import NOTEBOOK_PAGES


def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    """One build (the slowest step here, a few seconds) checked for every page it must hold."""
    site = tmp_path / "site"
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                           cwd=REPO, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr[-4000:]
    pages = {path.relative_to(site).as_posix() for path in site.rglob("index.html")}
    assert {"index.html", "getting-started/index.html", "concepts/index.html", "reference/cli/index.html",
            "reference/api/index.html", "reference/artifact/index.html", "gallery/index.html"} <= pages
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert "RetryPolicy" in api and "ModelCallError" in api  # the API reference came from the docstrings
    assert not (site / "cli_reference.py").exists()
    # the gallery: each notebook rendered with the outputs stored in it; notebooks/'s other files stay out
    assert not (site / "notebooks" / "run.py").exists() and not (site / "notebooks" / "index.html").exists()
    gallery = (site / "gallery" / "index.html").read_text(encoding="utf-8")
    for notebook in NOTEBOOK_PAGES:
        assert f'href="../notebooks/{notebook.stem}/"' in gallery
        assert_shows_stored_outputs(site / "notebooks" / notebook.stem / "index.html",
                                    REPO / "notebooks" / notebook.name)
    assert any(stored_outputs(REPO / "notebooks" / notebook.name)[0] for notebook in NOTEBOOK_PAGES)  # a chart checked


def test_every_notebook_is_in_the_gallery() -> None:
    stored = sorted(path.name for path in (REPO / "notebooks").glob("*.ipynb"))
    assert sorted(page.name for page in NOTEBOOK_PAGES) == stored  # each one in the nav, under Notebooks
    gallery = (REPO / "docs" / "gallery.md").read_text(encoding="utf-8")
    assert all(f"(notebooks/{page.name})" in gallery for page in NOTEBOOK_PAGES)  # each one introduced and linked


def stored_outputs(notebook: Path) -> tuple[int, list[str], bool]:
    """(PNG images, lines of text, whether an HTML table) among the notebook's stored outputs."""
    images, lines, table = 0, [], False
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            images += "image/png" in data
            table = table or "<table" in "".join(data.get("text/html", ""))
            if output["output_type"] == "stream":
                text = "".join(output["text"])
            elif "text/plain" in data and not {"text/html", "image/png"} & data.keys():
                text = "".join(data["text/plain"])  # shown as text only where no richer form is stored
            else:
                continue
            # lines long enough to be telling; ANSI-coloured ones (log lines) are rendered as spans
            lines += [line.strip() for line in text.splitlines() if len(line.strip()) >= 12 and "\x1b" not in line]
    return images, lines, table


def assert_shows_stored_outputs(page: Path, notebook: Path) -> None:
    assert page.is_file(), f"no page for notebooks/{notebook.name}"
    shown = page.read_text(encoding="utf-8")
    images, lines, table = stored_outputs(notebook)
    assert len(re.findall(r'<img[^>]+src="data:image/png;base64,', shown)) == images, notebook.name  # charts, inline
    assert lines, f"{notebook.name} stores no text output"
    missing = [line for line in lines if html.escape(line, quote=False) not in shown and html.escape(line) not in shown]
    assert not missing, (notebook.name, missing[:5])
    assert ("<table" in shown) >= table, notebook.name


def test_the_command_line_reference_is_current() -> None:
    script = runpy.run_path(str(REPO / "docs" / "cli_reference.py"))
    page = script["PAGE"].read_text(encoding="utf-8")
    assert page == script["reference"](), "run `python docs/cli_reference.py` and commit docs/reference/cli.md"
    assert "## `rosetta export promptfoo`" in page and "## `rosetta experiment start`" in page


def test_the_settings_table_lists_every_setting_and_no_other() -> None:
    """The settings page's table is the reference for ``[tool.rosetta]``: a key added to the
    settings without a row, or a row for a key that is gone, fails here."""
    import re

    from rosetta.settings import KEYS

    page = (REPO / "docs" / "reference" / "settings.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([a-z_]+)` \|", page, re.M))
    assert rows == set(KEYS) - {"root"}  # the root is where pyproject.toml is, never a key


def test_the_errors_page_lists_every_kind_outcome_and_public_error() -> None:
    """docs/reference/errors.md is the reference for what a failure means: a kind, an outcome or an
    exported error class added without a row fails here."""

    import rosetta

    page = (REPO / "docs" / "reference" / "errors.md").read_text(encoding="utf-8")
    kinds_table, outcomes_table = page.split("## Why a run failed")[1].split("## How one call ended")
    assert set(re.findall(r"^\| `([a-z_]+)` \|", kinds_table, re.M)) == {kind.value for kind in rosetta.ErrorKind}
    assert set(re.findall(r"^\| `([a-z_]+)` \|", outcomes_table, re.M)) == {o.value for o in rosetta.Outcome}
    errors = {name for name in rosetta.__all__ if name.endswith("Error")}
    assert errors <= set(re.findall(r"`([A-Za-z]+Error)`", page))


def test_the_readmes_links_lead_somewhere() -> None:
    """The README is read on the repository page, outside the site's strict build: each relative link
    names a file of the checkout (a page moved without its link fails here)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    targets = [target.split("#")[0] for target in re.findall(r"\]\(([^)\s]+)\)", readme)
               if "://" not in target and not target.startswith("#")]
    assert targets and not [target for target in targets if not (REPO / target).exists()]
