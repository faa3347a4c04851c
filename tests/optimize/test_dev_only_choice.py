"""Selection never sees test (issue 55): the race, the winner and whether it replaces the active
artifact are all decided on dev; test is scored once, after every choice, for the report, with its
own 95% interval. Planted test labels that would change a test-based choice change nothing but the
recorded test score.

The toy model (tests/scripted_model.py) answers ``alpha`` without help, so the unoptimized render
scores 0.25 on the toy's dev and test rows, and the proposed RULEBOOK instruction scores 1.0. Test
labels all set to ``alpha`` turn that around on test only: the unoptimized render scores 1.0 there
and the RULEBOOK prompt 0.25."""

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
from rosetta.optimize.study import SearchSettings
from rosetta.optimize.target import OptimizeRequest, evaluate, optimize
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
    assert "on dev" in honest.activation and unversioned(honest.activation) == unversioned(planted.activation)
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


def test_an_active_artifact_scored_on_other_data_is_scored_on_this_searchs_dev_rows(tmp_path: Path) -> None:
    root = project(tmp_path / "toy", alpha_test=False)
    assert search(root, STRONG).outcome.dev_score == 1.0  # the active artifact: the RULEBOOK prompt
    small = small_dataset(root)
    weak = {**WEAK, "max_calls": 20}
    plan = search(root, weak, dataset=str(small), dry_run=True)
    assert (plan.rescoring, plan.rescoring_why) == (5, "other data")  # the dry run counts the 5 dev answers
    asked = Asked()
    report = optimize(OptimizeRequest(definition=root / "signatures" / "toy-sorter.md", model="scripted/toy",
                                      settings=SearchSettings(**weak), dataset=str(small)),
                      settings=load_settings(root), complete=asked)
    active_asked = [split for rulebook, split in asked.calls if rulebook]
    assert active_asked == ["dev"] * 5  # the active artifact answered this search's dev rows, never test
    assert report.status == "kept as a version"
    assert "below the active artifact's 1.0 on the same 5 dev rows (the active artifact was scored on other " \
           "data; on these rows it scores 1.0, 5 calls)" in report.activation
    splits = [split for _, split in asked.calls]
    assert splits.count("test") == 5  # test answered once, by the winner only
    assert splits.index("test") > max(i for i, split in enumerate(splits) if split != "test")  # after every choice
    # another metric makes the recorded dev score incomparable too: the dry run says it will score it again
    again = search(root, {**WEAK, "max_calls": 60}, metric="fields", dry_run=True)
    assert (again.rescoring, again.rescoring_why) == (16, "another metric (exact)")


def test_a_race_stopped_short_of_all_dev_never_replaces_an_artifact_measured_on_all_of_it(tmp_path: Path) -> None:
    root = project(tmp_path / "toy", alpha_test=False)
    assert search(root, WEAK).status == "written"  # 0.25 on all 16 dev rows
    active = (root / ARTIFACT).read_bytes()
    race = search(root, {**STRONG, "max_calls": None}, dry_run=True).plan.race
    first_rung = 3 + race.rows[0] * race.keep[0]  # the proposals, then rung 0; each toy call costs $0.00002
    cut = search(root, {**STRONG, "max_calls": None, "max_cost": (first_rung + 1.5) * 0.00002})
    assert cut.outcome.dev_examples == race.rows[0] < 16 and cut.status == "kept as a version"
    assert f"but on only {cut.outcome.dev_examples} of the 16 dev rows the active artifact's 0.25 was measured " \
           "on (the race stopped early: --max-cost" in cut.activation
    assert (root / ARTIFACT).read_bytes() == active


def test_the_test_score_has_its_honest_interval_and_the_dev_one_says_it_ignores_selection(tmp_path: Path,
                                                                                         cli: Any) -> None:
    root = project(tmp_path / "toy", alpha_test=False)
    result = cli("-C", root, "compile", root / "signatures", "--model", "scripted/toy", "--optimize", "--trials", "1",
                 "--pruner", "none", "--proposer", "none", "--fixed-demos")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "dev chose the winner on 16 rows, 95% interval [" in text and "it ignores that selection" in text
    assert "test, scored once after every choice on 16 rows, 95% interval [0.031, 0.469], is the honest" in text
    artifact = parse_artifact((root / ARTIFACT).read_text(), path="x")
    scores = artifact.provenance.scores
    assert artifact.provenance.optimizer["chosen_on"] == "dev" and "dev_ci95" not in scores
    per_row = [1.0 if row["output"]["label"] == "alpha" else 0.0  # the unoptimized render answers alpha
               for row in map(json.loads, (root / "datasets/toy-sorter/test.jsonl").read_text().splitlines())]
    assert scores["test"] == 0.25 and scores["test_ci95"] == list(interval95(per_row))
    assert scores["dev_ci95_ignoring_selection"] == list(interval95([1.0] * 4 + [0.0] * 12))
    for split in ("dev", "test"):  # every recorded score is reproduced exactly
        again = evaluate(root / "signatures" / "toy-sorter.md", "scripted/toy", settings=load_settings(root),
                         split=split)
        assert again.reproduced is True and again.score == scores[split]
