"""Selection never sees test (issue 55): the race, the winner and whether it replaces the active
artifact are all decided on dev; test is scored once, after every choice, for the report, with its
own 95% interval. Planted test labels that would change a test-based choice change nothing but the
recorded test score.

The toy model (tests/scripted_model.py) answers ``alpha`` without help, so the unoptimized render
scores 0.2 on the toy's dev rows and 0.25 on test, and the proposed RULEBOOK instruction scores
1.0. Test labels all set to ``alpha`` turn that around on test only: the unoptimized render scores
1.0 there and the RULEBOOK prompt 0.25."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import scripted_model
from scripted_model import RULEBOOK, write_toy_project
from test_optimize import ARTIFACT, scripted  # noqa: F401  (scripted: the autouse fixture registering the provider)

from rosetta.settings import load_settings
from rosetta.optimize.evaluation import interval95
from rosetta.optimize.rescore import evaluate
from rosetta.optimize.study import SearchSettings
from rosetta.optimize.target import OptimizeRequest, optimize
from rosetta.store.artifact import parse_artifact, read_artifact

STRONG = {"trials": 12, "max_calls": 200, "proposer": "scripted/proposer", "nearest_demos": False}
WEAK = {"trials": 1, "pruner": "none", "proposer": None, "nearest_demos": False}  # the unoptimized render alone


def project(root: Path, *, alpha_test: bool) -> Path:
    """The toy project; with ``alpha_test`` every test label is ``alpha`` (train and dev unchanged)."""
    root.mkdir()
    write_toy_project(root)
    if alpha_test:
        test = root / "datasets" / "toy-sorter" / "test.jsonl"
        rows = [json.loads(line) for line in test.read_text().splitlines()]
        test.write_text("".join(json.dumps({**row, "output": {"label": "alpha"}}) + "\n" for row in rows))
    return root


def search(root: Path, knobs: dict[str, Any], **request: Any) -> Any:
    return optimize(OptimizeRequest(definition=root / "signatures" / "toy-sorter.md", model="scripted/toy",
                                    settings=SearchSettings(**knobs), **request), settings=load_settings(root))


def written(report: Any) -> Any:
    """The artifact the search wrote: the active one, or the version it was kept as."""
    return read_artifact(Path(report.artifact))


def unversioned(activation: str) -> str:
    return re.sub(r"version [0-9a-f]+", "version V", activation)


@pytest.mark.parametrize("first, second, status", [
    (WEAK, STRONG, "written"),  # better on dev, worse on the planted test: a test-based choice would keep the old
    (STRONG, WEAK, "kept as a version"),  # worse on dev, better on the planted test: one would replace it
])
def test_planted_test_labels_change_neither_the_winner_nor_the_activation(tmp_path: Path, first: dict, second: dict,
                                                                          status: str) -> None:
    runs = {}
    for alpha_test in (False, True):
        root = project(tmp_path / f"alpha-{alpha_test}", alpha_test=alpha_test)
        assert search(root, first).status == "written"
        runs[alpha_test] = (root, search(root, second))
    (honest_root, honest), (planted_root, planted) = runs[False], runs[True]
    assert honest.status == planted.status == status
    assert "on the 13 confirmation rows (dev rows that chose nothing)" in honest.activation
    assert unversioned(honest.activation) == unversioned(planted.activation)
    assert (honest.outcome.test_score == 1.0) != (planted.outcome.test_score == 1.0)  # test scores tell them apart
    one, other = written(honest), written(planted)
    assert one.prompt == other.prompt and one.provenance.knobs == other.provenance.knobs
    assert one.provenance.scores["dev"] == other.provenance.scores["dev"]
    assert one.provenance.scores["test"] != other.provenance.scores["test"]
    assert one.provenance.optimizer["race"] == other.provenance.optimizer["race"]
    assert one.provenance.optimizer["chosen_on"] == "dev" and one.provenance.optimizer["kind"] == \
        other.provenance.optimizer["kind"]
    assert read_artifact(honest_root / ARTIFACT).prompt == read_artifact(planted_root / ARTIFACT).prompt


class Asked:
    """A completion that notes, per call, whether the prompt holds the RULEBOOK and which split the
    question comes from (the toy's rows say: "Note 3 from dev: ...")."""

    def __init__(self) -> None:
        self.calls: list[tuple[bool, str]] = []

    def __call__(self, **request: Any) -> Any:
        texts = [str(m.get("content") or "") for m in request["messages"]]
        split = re.findall(r"Note \d+ from (\w+):", texts[-1])
        self.calls.append((any(RULEBOOK in t for t in texts), split[-1] if split else ""))
        return scripted_model.litellm.completion(**request)


def small_dataset(root: Path, rows: int = 5) -> Path:
    small = root / "small"
    small.mkdir()
    for split in ("train", "dev", "test"):
        lines = (root / "datasets" / "toy-sorter" / f"{split}.jsonl").read_text().splitlines()[:rows]
        (small / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    return small


def test_the_active_artifact_answers_the_confirmation_rows_before_a_new_one_may_replace_it(tmp_path: Path) -> None:
    root = project(tmp_path / "toy", alpha_test=False)
    assert search(root, STRONG).outcome.dev_score == 1.0  # the active artifact: the RULEBOOK prompt
    small = small_dataset(root)
    weak = {**WEAK, "max_calls": 20}
    plan = search(root, weak, dataset=str(small), dry_run=True)
    assert (plan.rescoring, plan.rescoring_why) == (3, "the confirmation rows, free where its prompt raced")
    asked = Asked()
    report = optimize(OptimizeRequest(definition=root / "signatures" / "toy-sorter.md", model="scripted/toy",
                                      settings=SearchSettings(**weak), dataset=str(small)),
                      settings=load_settings(root), complete=asked)
    # the active artifact answered this search's 3 confirmation rows from the cache (the small set's rows are
    # the full set's first ones, which its prompt answered when it raced), never test
    assert [split for rulebook, split in asked.calls if rulebook] == []
    assert report.status == "kept as a version"
    assert "not activated: on the 3 confirmation rows (dev rows that chose nothing) it scores 0.0 against the " \
           "active artifact's 1.0, one-sided paired test p = 1 (replaces at p ≤ 0.05; the active artifact's " \
           "answers took 3 calls, 0 paid)" in report.activation
    splits = [split for _, split in asked.calls]
    assert splits.count("test") == 5 and splits[-5:] == ["test"] * 5  # test answered once, after every choice


def test_a_search_stopped_early_never_replaces_an_optimized_artifact_untested(tmp_path: Path) -> None:
    from rosetta.errors import UsageError

    root = project(tmp_path / "toy", alpha_test=False)
    assert search(root, WEAK).status == "written"  # 0.2 on all 20 dev rows
    active = (root / ARTIFACT).read_bytes()
    race = search(root, {**STRONG, "max_calls": None}, dry_run=True).plan.race
    prior = 3 + race.anchors * 20  # the proposals, then the seeded prompts' pass over dev; a toy call costs $0.00002
    with pytest.raises(UsageError, match="--max-cost"):  # stopped inside the prior's pass: nothing measured to write
        search(root, {**STRONG, "max_calls": None, "max_cost": (3 + 10) * 0.00002})
    assert (root / ARTIFACT).read_bytes() == active
    cut = search(root, {**STRONG, "max_calls": None, "max_cost": (prior + 1.5) * 0.00002}, force=True)  # in rung 0
    assert cut.outcome.stopped.startswith("--max-cost") and "p" not in cut.outcome.race["confirmation"]  # untested
    assert cut.outcome.dev_examples == 20 and cut.outcome.kind in ("unoptimized", "first-k")  # the prior, on all dev
    assert cut.status == "kept as a version" if cut.outcome.kind == "first-k" else cut.status == "written"
    assert "one-sided paired test" in cut.activation or "the same prompt" in cut.activation
    if cut.status == "kept as a version":
        assert (root / ARTIFACT).read_bytes() == active


def test_the_test_score_has_its_honest_interval_and_the_dev_one_says_it_ignores_selection(tmp_path: Path,
                                                                                         cli: Any) -> None:
    root = project(tmp_path / "toy", alpha_test=False)
    result = cli("-C", root, "compile", root / "signatures", "--model", "scripted/toy", "--optimize", "--trials", "1",
                 "--pruner", "none", "--proposer", "none", "--fixed-demos")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "dev chose the winner on 20 rows, 95% interval [" in text and "it ignores that selection" in text
    assert "test, scored once after every choice on 16 rows, 95% interval [0.031, 0.469], is the honest" in text
    artifact = parse_artifact((root / ARTIFACT).read_text(), path="x")
    scores = artifact.provenance.scores
    assert artifact.provenance.optimizer["chosen_on"] == "dev" and "dev_ci95" not in scores
    per_row = [1.0 if row["output"]["label"] == "alpha" else 0.0  # the unoptimized render answers alpha
               for row in map(json.loads, (root / "datasets/toy-sorter/test.jsonl").read_text().splitlines())]
    assert scores["test"] == 0.25 and scores["test_ci95"] == list(interval95(per_row))
    assert scores["dev_ci95_ignoring_selection"] == list(interval95([1.0] * 4 + [0.0] * 16))
    for split in ("dev", "test"):  # every recorded score is reproduced exactly
        again = evaluate(root / "signatures" / "toy-sorter.md", "scripted/toy", settings=load_settings(root),
                         split=split)
        assert again.reproduced is True and again.score == scores[split]
