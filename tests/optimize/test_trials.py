"""``rosetta trials``: the units of the last search, with knobs, scores and calls, from the study
the artifact names; errors say how to get a study."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripted_model import write_toy_project
from test_optimize import run, scripted  # noqa: F401  (scripted: the autouse fixture registering the provider)


@pytest.fixture
def searched(tmp_path: Path) -> Path:
    root = tmp_path / "toy"
    root.mkdir()
    write_toy_project(root)
    run(root, max_calls=120)
    return root


def test_trials_lists_every_unit_of_the_last_search(searched: Path, cli) -> None:
    table = cli("-C", searched, "trials", "toy-sorter", "--model", "scripted/toy")
    assert table.exit_code == 0, table.output
    text = " ".join(table.stdout.split())
    assert "toy-sorter on scripted/toy" in text and "candidate 0 (unoptimized, seeded):" in text
    assert "candidate 1 (first-k, seeded):" in text and "where the race chose" in text  # scores are dev's
    data = json.loads(cli("-C", searched, "trials", "toy-sorter", "-m", "scripted/toy", "-f", "json").stdout)
    rows = data["trials"]
    assert data["study"] and data["storage"].startswith("journal:") and len(rows) > 3
    assert {"candidate", "rung", "phase", "rows", "score", "calls", "knobs", "state", "kind", "origin"} <= set(rows[0])
    # the seeded prompts answer all of dev first (the prior is the better of them), then the race's rungs
    assert rows[0]["default"] and rows[0]["phase"] == "prior" and rows[0]["rows"] == 20 and rows[0]["calls"] > 0
    rungs = {row["rung"] for row in rows if row["state"] == "complete"}
    assert len(rungs) > 1  # the race went past its first rung


def test_trials_without_a_search_says_how_to_make_one(tmp_path: Path, cli) -> None:
    root = tmp_path / "toy"
    root.mkdir()
    write_toy_project(root)
    result = cli("-C", root, "trials", "toy-sorter", "--model", "scripted/toy")
    assert result.exit_code == 2 and "no search of toy-sorter on scripted/toy is recorded" in result.output
    assert "rosetta optimize toy-sorter --model scripted/toy" in " ".join(result.output.split())


@pytest.mark.parametrize("width", [80, 160])
def test_trials_fit_the_terminal_and_say_what_each_choice_is(searched: Path, cli, width, monkeypatch) -> None:
    """Issue 59: no line wider than the terminal, choices in words (not ``demo_set=-2``), the two
    scores told apart, and no optuna chatter."""
    monkeypatch.setenv("COLUMNS", str(width))
    result = cli("-C", searched, "trials", "toy-sorter", "--model", "scripted/toy")
    assert result.exit_code == 0, result.output
    print(result.stdout)
    long = [line for line in result.stdout.splitlines() if len(line.rstrip()) > width]
    assert not long, long
    text = " ".join(result.stdout.split())
    assert "demo_set=" not in text and "instruction=" not in text
    assert "candidate 0 (unoptimized, seeded): the definition's own demos" in text
    assert "Score: the metric on the rows the unit answered" in text
    assert "A new study created" not in result.output


def test_trials_show_each_candidates_input_per_call_at_the_models_price(searched: Path, cli) -> None:
    """Issue 85: with a price for the model (the scripted one has litellm prices), each unit shows its
    prompt's input per call in service: its cached prefix, where the host caches one, at the
    cache-read rate (the scripted host caches nothing, so all of it at the input rate)."""
    from rosetta.local.litellm_offline import import_litellm

    price = import_litellm().get_model_info("scripted/toy")["input_cost_per_token"]
    rows = json.loads(cli("-C", searched, "trials", "toy-sorter", "-m", "scripted/toy", "-f", "json").stdout)["trials"]
    assert price > 0 and all(row["input_cost"] == pytest.approx(row["prompt_tokens"] * price) for row in rows)
    table = cli("-C", searched, "trials", "toy-sorter", "--model", "scripted/toy")
    assert "In $/call" in table.stdout and f"${rows[0]['input_cost']:.5f}" in table.stdout
