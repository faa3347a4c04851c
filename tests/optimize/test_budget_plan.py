"""What a call budget allows is decided once (:func:`rosetta.optimize.budget.call_plan`),
before any call: ``--dry-run`` refuses exactly what the search refuses, in the same words, and
states the numbers the search then plans and keeps. ``--max-calls`` bounds the search; the test
pass is outside it (the winner's test score must cover every row), and its calls are said ahead
and stay within what was said, retries included."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import scripted_model
from conftest import REPO
from scripted_model import write_toy_project

from rosetta.cli.optimize_targets import SearchFlags
from rosetta.settings import load_settings
from rosetta.errors import UsageError
from rosetta.optimize.evaluation import Budget, BudgetExhausted
from rosetta.optimize.study import SearchSettings
from rosetta.optimize.target import OptimizeRequest, optimize
from rosetta.store.artifact import parse_artifact

LOCAL = "local/gemma-3-270m"
LABELED = sorted(path.name for path in (REPO / "datasets").iterdir() if (path / "dev.jsonl").is_file())
TEST_PHASES = ("scoring the winner on test", "scoring the unoptimized render on test")


def words(text: str) -> str:
    return " ".join(text.split())


def bundled_project(root: Path, agent: str) -> Path:
    (root / "signatures").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\nversion = '0'\n\n[tool.rosetta]\n")
    bundled = REPO / "signatures" / f"{agent}.md"  # else one of the bench's agents on public data
    shutil.copy(bundled if bundled.is_file() else REPO / "bench" / "agents" / f"{agent}.md", root / "signatures")
    shutil.copytree(REPO / "datasets" / agent, root / "datasets" / agent)
    return root


class Recorder:
    """A completion that answers every request with one labeled answer (valid, so the plan's answer
    counts are what is spent), counting its calls in the search's phase at the time."""

    def __init__(self, answer: str) -> None:
        self.answer, self.phase, self.calls = answer, "", {"search": 0, "test": 0}

    def __call__(self, **request: Any) -> Any:
        from rosetta.local.litellm_offline import import_litellm

        self.calls["test" if self.phase.startswith(TEST_PHASES) else "search"] += 1
        return import_litellm().ModelResponse(model=request.get("model"), choices=[
            {"message": {"role": "assistant", "content": self.answer}, "finish_reason": "stop"}])

    def status(self, status: Any) -> None:
        self.phase = status.phase


@pytest.mark.parametrize("budget", [30, 52, 150])
@pytest.mark.parametrize("agent", LABELED)
def test_the_dry_run_refuses_what_the_search_refuses_and_plans_what_it_runs(agent: str, budget: int, tmp_path: Path,
                                                                          cli: Any) -> None:
    root = bundled_project(tmp_path / "p", agent)
    definition = root / "signatures" / f"{agent}.md"
    dry = cli("-C", root, "compile", definition, "--model", LOCAL, "--optimize", "--max-calls", budget, "--dry-run")
    train = (root / "datasets" / agent / "train.jsonl").read_text(encoding="utf-8").splitlines()
    model = Recorder(json.dumps(json.loads(train[0])["output"]))
    flags = SearchFlags(max_calls=budget)  # what the command line makes of `--max-calls N`, nothing else given
    request = OptimizeRequest(definition=definition, model=LOCAL, settings=flags.settings(LOCAL))
    try:
        report = optimize(request, settings=load_settings(root), complete=model, on_status=model.status)
    except UsageError as refused:
        assert dry.exit_code == 2, dry.output  # the dry run refused too ...
        assert words(refused.problems[0].format()) in words(dry.output)  # ... saying the same
        assert model.calls == {"search": 0, "test": 0}  # and the search refused before its first call
        return
    assert dry.exit_code == 0, dry.output
    planned = optimize(OptimizeRequest(definition=definition, model=LOCAL, settings=flags.settings(LOCAL),
                                       dry_run=True), settings=load_settings(root)).plan
    assert planned == report.plan  # one plan, made the same way for both
    text, outcome = words(dry.output), report.outcome
    assert f"the search: at most {planned.search_calls()} calls (--max-calls {budget})" in text
    assert f"{planned.test} test answers, at most {planned.test_calls()} calls" in text
    assert f"at most {planned.search_calls() + planned.test_calls()} calls" in text
    # refitted with one never-cut prompt: the bundled agents' train holds more rows than a request gets, so the
    # prior is the nearest-demos prompt
    race = planned.race if outcome.trials == planned.race.candidates else planned.fitted(outcome.trials, 1)
    assert (outcome.race["rows"], outcome.race["keep"], outcome.race["confirm"]) == \
        (list(race.rows), list(race.keep), race.confirm)
    assert outcome.phases["bootstrap"] == planned.bootstrap and outcome.phases["proposals"] == planned.proposals
    assert model.calls["search"] == outcome.calls <= budget  # the budget held what it bounds
    # and it was spent: no rung could have taken one more challenger, and every planned answer was asked
    left = planned.room - race.calls()
    assert all(keep == (outcome.trials - race.anchors if rung == 0 else race.keep[rung - 1]) or left < rows - before
               for rung, (keep, rows, before) in enumerate(zip(race.keep, race.rows, (0, *race.rows))))
    rungs = {f"rung {k}": keep * (rows - before)
             for k, (keep, rows, before) in enumerate(zip(race.keep, race.rows, (0, *race.rows)))}
    assert outcome.stopped is None, outcome.race
    assert outcome.phases == {"proposals": planned.proposals, "bootstrap": planned.bootstrap,
                              "prior": race.anchors * race.dev, **rungs,
                              "confirmation": race.confirm if race.keep[-1] else 0}, outcome.race
    assert model.calls["test"] == outcome.test_calls <= planned.test_calls()  # and the test pass what was said


def test_test_calls_stay_within_what_the_dry_run_said_when_answers_take_retries(tmp_path: Path, cli: Any) -> None:
    # scripted/stutter's first answer about a note of even length does not parse: those rows take a retry,
    # on test too, so the test pass makes more calls than it has answers (the old dry run said "16 test")
    scripted_model.register()
    root = tmp_path / "toy"
    root.mkdir()
    write_toy_project(root)
    args = ("-C", root, "compile", root / "signatures", "--model", "scripted/stutter", "--optimize", "--max-calls",
            "80", "--proposer", "none", "--baseline")
    dry = words(cli(*args, "--dry-run").output)
    assert "the search: at most 80 calls (--max-calls 80)" in dry
    # the winner and the unoptimized render on 16 test rows, and up to 20 dev rows of the unoptimized render
    assert "32 test answers and up to 20 dev answers of the unoptimized render, at most 156 calls" in dry
    before = scripted_model.calls
    result = cli(*args)
    assert result.exit_code == 0, result.output
    paid = scripted_model.calls - before
    path = root / "compiled/toy-sorter/scripted/stutter.yaml"
    budget = parse_artifact(path.read_text(encoding="utf-8"), path=str(path)).provenance.budget
    assert budget["calls"] <= 80 and paid == budget["calls"] + budget["test_calls"]
    assert 32 < budget["test_calls"] <= 156  # retries made the test pass dearer than its answers, within the bound
    assert f"{budget['calls']} calls within --max-calls 80 and {budget['test_calls']} test calls outside it" \
        in words(result.output)


def test_a_dspy_optimizer_refuses_a_budget_it_would_not_keep(tmp_path: Path, cli: Any) -> None:
    scripted_model.register()
    root = tmp_path / "toy"
    root.mkdir()
    write_toy_project(root)
    definition = root / "signatures" / "toy-sorter.md"
    before = scripted_model.calls
    dry = cli("-C", root, "optimize", "toy-sorter", "--model", "scripted/toy", "--optimizer", "dspy-bootstrap",
              "--max-calls", "50", "--dry-run")
    with pytest.raises(UsageError) as refused:
        optimize(OptimizeRequest(definition=definition, model="scripted/toy", optimizer="dspy-bootstrap",
                                 settings=SearchSettings(max_calls=50)), settings=load_settings(root))
    assert dry.exit_code == 2 and words(refused.value.problems[0].format()) in words(dry.output)
    assert "DSPy makes its own calls, which rosetta neither counts nor stops" in words(dry.output)
    assert scripted_model.calls == before
    plain = words(cli("-C", root, "optimize", "toy-sorter", "--model", "scripted/toy", "--optimizer",
                      "dspy-bootstrap", "--dry-run").output)
    assert "DSPy's own calls (not counted ahead), then at most 108 calls" in plain  # 20 dev + 16 test, 3 calls each


def test_answers_asked_at_once_never_start_on_the_same_calls_left() -> None:
    # with --jobs, an answer in flight has not been charged yet: what it may still spend is held, so a second
    # answer starts only when its worst case fits beside the first one's
    budget = Budget(max_calls=5)
    with budget.spending(3):
        with pytest.raises(BudgetExhausted, match="--max-calls 5"), budget.spending(3):
            pass
        with budget.spending(2):
            pass
    with budget.spending(3):  # the first answer's hold is released once it is charged
        pass


def test_the_dry_run_counts_scoring_the_active_artifact_on_the_confirmation_rows(tmp_path: Path, cli: Any) -> None:
    # an optimized active artifact answers this search's confirmation rows before a new one may replace it
    # (free where its prompt raced): those calls come with the test pass, outside the budget, and the dry
    # run says so
    import re

    scripted_model.register()
    root = tmp_path / "toy"
    root.mkdir()
    write_toy_project(root)
    definition = root / "signatures" / "toy-sorter.md"
    first = cli("-C", root, "compile", definition, "--model", "scripted/toy", "--optimize", "--max-calls", "60",
                "--proposer", "none")
    assert first.exit_code == 0, first.output
    small = root / "small"
    small.mkdir()
    for split in ("train", "dev", "test"):
        rows = (root / "datasets" / "toy-sorter" / f"{split}.jsonl").read_text().splitlines()[:5]
        (small / f"{split}.jsonl").write_text("\n".join(rows) + "\n")
    args = ("-C", root, "compile", definition, "--model", "scripted/toy", "--optimize", "--dataset", small,
            "--max-calls", "20", "--proposer", "none")
    dry = words(cli(*args, "--dry-run").output)
    assert "before it may be replaced, the active artifact answers 3 dev rows (the confirmation rows, free where " \
        "its prompt raced), at most 9 calls" in dry
    assert "at most 44 calls" in dry  # 20 for the search, 15 for the test pass, 9 for the active artifact
    assert "before it may be replaced" not in words(cli(*args, "--dry-run", "--activate").output)
    result = words(cli(*args).output)
    spent = re.search(r"the active artifact's answers took (\d+) calls", result)
    assert spent is not None and int(spent.group(1)) <= 9, result
