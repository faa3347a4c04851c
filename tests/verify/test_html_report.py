"""The verify HTML report, opened in a real headless Chromium (Debian's package, driven by
Playwright): it loads with no console errors, shows the agent × model × criterion matrix, the
score plots and the per-example drill-down, and its "only failures" filter works."""

from __future__ import annotations

from pathlib import Path

import pytest
import scripted_model
from conftest import chromium
from test_verify import make_project, run_verify

from rosetta.verify.html import render_html


@pytest.fixture(autouse=True)
def scripted() -> None:
    scripted_model.register()


def test_the_report_loads_cleanly_in_chromium_and_shows_the_matrix(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    root = make_project(tmp_path / "project", rows=["a note about apples", "hats on the shelf"])
    report = run_verify(root, "scripted/toy", "scripted/gullible")
    assert report.failed  # the gullible model fails PV-013: the report has a failing row and a passing one
    page_file = tmp_path / "report.html"
    page_file.write_text(render_html(report), encoding="utf-8")
    assert "<script src" not in page_file.read_text() and "<link" not in page_file.read_text()  # self-contained

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            problems: list[str] = []
            page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.on("requestfailed", lambda request: problems.append(f"request failed: {request.url}"))
            page.goto(page_file.as_uri())
            page.wait_for_load_state("load")

            assert page.title() == "rosetta verify — FAILED"
            matrix = page.locator("#matrix")
            assert matrix.is_visible()
            headers = matrix.locator("thead th").all_inner_texts()
            assert headers[:2] == ["agent", "model"] and headers[2:10] == [f"PV-0{n}" for n in range(11, 19)]
            rows = matrix.locator("tbody tr")
            assert rows.count() == 2
            assert rows.nth(0).inner_text().startswith("toy-sorter\tscripted/toy")
            assert "fail" in rows.nth(1).locator("td").nth(4).inner_text()  # PV-013 of the gullible model
            assert page.locator("svg.chart rect").count() == 4  # quality and compliance bars per model
            assert page.locator("#failures li").first.inner_text().endswith("PV-013 Forbidden actions and "
                                                                            "guardrails hold")

            page.check("#only-failures")
            assert not rows.nth(0).is_visible() and rows.nth(1).is_visible()

            page.locator("section.agent details > summary").first.click()
            run = page.locator("details.run").first
            run.locator("summary").click()
            assert "a note about apples" in run.inner_text()
            assert problems == []
        finally:
            browser.close()
