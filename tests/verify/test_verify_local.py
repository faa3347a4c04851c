"""`rosetta verify` end to end on the embedded local model as both subject and judge: a bundled
agent, its real test examples, adversarial probes, the rubric-reviewer judge, and the reports.
The numbers are whatever a 270M base model earns; only the contract is checked here.

The judge runs in a copy of the project whose rubric-reviewer may write 150 tokens: a 270M model
never writes a valid review, and the bundled one's 1,500, three tries, took two minutes of CI (300
took 80 s)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from conftest import REPO


def project_with_a_terse_judge(root: Path) -> Path:
    """question-type with its data and compiled artifacts, and the rubric-reviewer cut to 150 tokens."""
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    (root / "signatures").mkdir()
    shutil.copy(REPO / "signatures" / "question-type.md", root / "signatures")
    judge = (REPO / "signatures" / "rubric-reviewer.md").read_text(encoding="utf-8")
    (root / "signatures" / "rubric-reviewer.md").write_text(re.sub(r"max_output_tokens: \d+", "max_output_tokens: 150",
                                                                    judge), encoding="utf-8")
    shutil.copytree(REPO / "datasets" / "question-type", root / "datasets" / "question-type")
    shutil.copytree(REPO / "compiled" / "question-type", root / "compiled" / "question-type")
    return root


def test_verify_runs_offline_on_the_local_model_as_subject_and_judge(local_model: str, cli, tmp_path: Path) -> None:
    report_json, report_html = tmp_path / "verify.json", tmp_path / "verify.html"
    root = project_with_a_terse_judge(tmp_path)
    result = cli("-C", root, "verify", root / "signatures/question-type.md", "--model", local_model, "--limit", "1",
                 "--json", report_json, "--report", report_html)
    assert result.exit_code in (0, 1), result.output  # 1 = a criterion failed: an honest result, not an error
    assert "Traceback" not in result.output and "question-type" in result.output
    report = json.loads(report_json.read_text())
    model = report["agents"][0]["models"][0]
    assert report["judge"] == local_model and model["model"] == local_model and model["error"] is None
    assert model["prompt_source"].endswith("compiled/question-type/local/gemma-3-270m.yaml")
    kinds = [run["kind"] for run in model["runs"]]
    assert kinds == ["example", "adversarial", "without-portability"]
    assert {c["id"]: c["status"] for c in model["criteria"]}["PV-012"] == "n/a"  # no tools declared
    assert model["runs"][0]["review"]["model"] == local_model  # the judge really ran
    assert (result.exit_code == 1) == any(c["status"] == "fail" for c in model["criteria"])
    assert "<table id=\"matrix\">" in report_html.read_text()
