"""The documentation as a reader meets it: the README, then the docs site's pages in the order of
mkdocs.yml's nav. tests/test_readme.py runs the ``rosetta`` commands of the README and the guide
(:data:`GUIDE`); tests/test_docs_snippets.py runs every block of the other pages."""

from __future__ import annotations

from pathlib import Path

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
