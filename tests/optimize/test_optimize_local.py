"""The race on the embedded model, end to end: a classification agent's rows are scored by the
correct label's probability (its logprobs), the artifact says so, and `rosetta evaluate` in a
fresh process reproduces the recorded test score exactly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import question_type_project

from rosetta.settings import load_settings
from rosetta.optimize.study import SearchSettings
from rosetta.optimize.target import OptimizeRequest, optimize
from rosetta.store.artifact import parse_artifact

pytestmark = pytest.mark.slow


@pytest.fixture
def project(tmp_path: Path, local_model: str) -> Path:
    """The bundled question-type agent with a small cut of its public data."""
    return question_type_project(tmp_path / "qt", train=24, dev=6, test=4)


def test_a_classification_race_scores_rows_by_label_odds_and_evaluate_reproduces_it(project: Path) -> None:
    request = OptimizeRequest(definition=project / "signatures" / "question-type.md", model="local/gemma-3-270m",
                              settings=SearchSettings(max_calls=26, proposer="local/gemma-3-270m"))
    report = optimize(request, settings=load_settings(project))
    outcome = report.outcome
    assert outcome.scoring == "label odds" and outcome.calls <= 26 and outcome.trials > 26 // 6
    assert outcome.phases["proposals"] == 0 and outcome.phases["bootstrap"] == 0  # a base model; a label-only answer
    assert any("base model" in note for note in outcome.notes)
    path = project / "compiled" / "question-type" / "local" / "gemma-3-270m.yaml"
    artifact = parse_artifact(path.read_text(encoding="utf-8"), path=str(path))
    assert artifact.provenance.optimizer["scoring"] == "label odds"
    assert artifact.provenance.budget["phases"] == outcome.phases
    scores = artifact.provenance.scores
    assert scores["dev_examples"] == 6 and "dev_ci95_ignoring_selection" in scores and "test_ci95" in scores
    result = subprocess.run([sys.executable, "-m", "rosetta.cli", "-C", str(project), "evaluate", "question-type",
                             "--model", "local/gemma-3-270m", "-f", "json"], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr
    evaluated = json.loads(result.stdout)
    assert evaluated["reproduced"] is True and evaluated["score"] == artifact.provenance.scores["test"]
