"""``rosetta trials --plot``: optuna's plotly charts in one self-contained HTML file, opened in
headless Chromium (Debian's, through Playwright), offline."""

from __future__ import annotations

from pathlib import Path

from conftest import chromium
from scripted_model import write_toy_project
from test_optimize import run, scripted  # noqa: F401  (scripted: the autouse fixture registering the provider)


def test_the_trials_plot_opens_in_chromium_with_its_charts(tmp_path: Path, cli) -> None:
    from playwright.sync_api import sync_playwright

    root = tmp_path / "toy"
    root.mkdir()
    write_toy_project(root)
    run(root, max_calls=120)
    page_file = tmp_path / "trials.html"
    result = cli("-C", root, "trials", "toy-sorter", "--model", "scripted/toy", "--plot", page_file)
    assert result.exit_code == 0, result.output
    assert "<script src=" not in page_file.read_text()  # plotly.js is inlined: no network needed

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            problems: list[str] = []
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.on("requestfailed", lambda request: problems.append(f"request failed: {request.url}"))
            page.goto(page_file.as_uri())
            page.wait_for_selector(".js-plotly-plot .main-svg")
            titles = page.locator("h2").all_inner_texts()
            assert titles == ["Optimization history", "Knob importances", "Score against prompt tokens",
                              "Score against calls"]
            assert page.locator(".js-plotly-plot").count() == 4
            assert page.locator(".js-plotly-plot .scatterlayer .trace").count() >= 2  # points were drawn
            assert not problems, problems
        finally:
            browser.close()
