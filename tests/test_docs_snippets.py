"""Issue 86: every code block of the docs site runs, page by page, as a reader would run it
(tests/documented.py's ``run_blocks``): in a fresh project holding the bundled agents and their
labeled data. A cloud provider is a fake server on 127.0.0.1 standing in for its API (the key is a
placeholder), so a page that promises a call shows one succeed. A line the test cannot run (setting up the machine) is listed here with the reason;
any other line fails."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import REPO
from documented import OTHER_PAGES, run_blocks
from fault_server import FaultServer
from test_docs_howto import PAGES_WITH_A_PROVIDER

PAGES = [page for page in OTHER_PAGES if page not in PAGES_WITH_A_PROVIDER]
"""The README's and the guide's blocks run in tests/test_readme.py and tests/test_guide_python.py; the
how-to pages for cloud hosts and tools, against a recorder of each vendor's API, in
tests/test_docs_howto.py."""
SET_UP_ELSEWHERE = {
    "./dev main": ".ci/run runs it on a clean clone",
    "pip install .": "the test environment is that install",
}
ANSWER = json.dumps({"severity": "high", "rationale": "SQL injection in the login form lets anyone log in."})


def blocks(page: Path) -> list[tuple[str, str]]:
    """(language, code) of each fenced bash or python block, in page order."""
    return re.findall(r"```(bash|python)\n(.*?)```", page.read_text(encoding="utf-8"), re.S)


def test_the_pages_have_blocks_to_run() -> None:
    assert any(blocks(page) for page in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO / "docs").as_posix())
def test_every_code_block_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    shutil.copytree(REPO / "signatures", project / "signatures")
    shutil.copytree(REPO / "datasets", project / "datasets", ignore=shutil.ignore_patterns("README.md"))
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    for variable in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    with FaultServer([("ok", ANSWER)]) as provider:
        monkeypatch.setenv("ANTHROPIC_API_BASE", provider.url.removesuffix("/v1"))
        shown, _ = run_blocks(page.read_text(encoding="utf-8"), page.name, project, monkeypatch,
                              set_up_elsewhere=SET_UP_ELSEWHERE)
    if ".run(" in "".join(code for language, code in blocks(page) if language == "python"):
        assert provider.requests, f"{page.name}: a page that calls a model reached no provider"
        assert any("high" in text for text in shown), shown  # the fake provider's answer, printed as the page says
