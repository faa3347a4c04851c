"""Labeled examples (HF datasets, checked against the signature, bad rows named by file and line)
and the metrics that score answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO
from rosetta.optimize.metrics import exact_match, field_match, numeric_match, resolve_metric
from rosetta.datasets import DatasetError, load_labeled
from rosetta.definition.loader import load_definition
from rosetta.definition.models import Evaluation
from rosetta.errors import UsageError
from rosetta.signature import lower

ROW = {"id": "r1", "inputs": {"report": "x" * 50}, "output": {"severity": "high", "rationale": "because"}}


@pytest.fixture(scope="module")
def triage():
    return lower(load_definition(REPO / "signatures/vuln-triage.md", root=REPO))


def write_splits(folder: Path, rows: dict[str, list]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, lines in rows.items():
        (folder / f"{split}.jsonl").write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n"
                                                       for line in lines), encoding="utf-8")
    return folder


def rows(prefix: str, count: int) -> list[dict]:
    return [{**ROW, "id": f"{prefix}{n}"} for n in range(count)]


def test_bundled_datasets_load_and_fit_their_agents() -> None:
    for agent in ("vuln-triage", "advisory-extractor", "log-summarizer-open", "leak-detector"):
        signature = lower(load_definition(REPO / f"signatures/{agent}.md", root=REPO))
        data = load_labeled(signature, REPO / "datasets" / agent)
        assert (len(data.train), len(data.dev), len(data.test)) >= (60, 40, 100), agent
        metric = resolve_metric(None, load_definition(REPO / f"signatures/{agent}.md", root=REPO).spec.evaluation,
                                signature)
        assert all(metric.score(e.output, e.output) == 1.0 for e in data.test)  # a label matches itself


def test_rows_keep_their_exact_content_and_order(triage, tmp_path: Path) -> None:
    folder = write_splits(tmp_path / "d", {"train": rows("t", 2), "dev": rows("d", 1), "test": rows("x", 1)})
    data = load_labeled(triage, folder)
    assert [e.id for e in data.train] == ["t0", "t1"] and data.train[1].line == 2
    assert data.dev[0].output == ROW["output"] and data.dev[0].inputs == ROW["inputs"]
    again = load_labeled(triage, folder)
    assert again.sha256 == data.sha256
    (folder / "dev.jsonl").write_text(json.dumps({**ROW, "id": "d0", "output": {"severity": "low",
                                                                                "rationale": "r"}}) + "\n")
    assert load_labeled(triage, folder).sha256 != data.sha256


def test_every_bad_row_is_named_by_file_and_line(triage, tmp_path: Path) -> None:
    bad = [
        json.dumps(ROW),
        "",
        '{"id": "broken", ',
        json.dumps({**ROW, "id": "r2", "output": {"severity": "catastrophic", "rationale": "r"}}),
        json.dumps({**ROW, "id": "r3", "inputs": {}}),
        json.dumps({**ROW, "id": "r4", "inputs": {"report": "x" * 50, "extra": 1}}),
        json.dumps(ROW),
        json.dumps({"inputs": {"report": "y" * 50}}),
    ]
    folder = write_splits(tmp_path / "d", {"train": bad, "dev": rows("d", 1), "test": rows("x", 1)})
    with pytest.raises(DatasetError) as caught:
        load_labeled(triage, folder)
    messages = [p.format() for p in caught.value.problems]
    train = str(folder / "train.jsonl")
    assert any(m.startswith(f"{train}:3: invalid JSON") for m in messages)
    assert any(m.startswith(f"{train}:4: output:") and "'catastrophic' is not one of" in m for m in messages)
    assert any(m.startswith(f"{train}:5: inputs: missing required inputs ['report']") for m in messages)
    assert any(m.startswith(f"{train}:6: inputs: undeclared inputs ['extra']") for m in messages)
    assert any(m.startswith(f"{train}:7: id: duplicate id 'r1' (first used at {train}:1)") for m in messages)
    assert any(m.startswith(f"{train}:8:") and "'inputs' (an object) and 'output'" in m for m in messages)
    assert len(messages) == 6


def test_missing_folder_or_split_says_what_to_write(triage, tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no dataset folder"):
        load_labeled(triage, tmp_path / "nowhere")
    folder = write_splits(tmp_path / "d", {"train": rows("t", 1)})
    with pytest.raises(DatasetError, match="no dev / test examples found") as caught:
        load_labeled(triage, folder)
    assert "dev.jsonl, test.jsonl" in caught.value.problems[0].hint


def test_csv_splits_and_validation_alias(triage, tmp_path: Path) -> None:
    folder = tmp_path / "d"
    folder.mkdir()
    output = json.dumps(ROW["output"]).replace('"', '""')
    for split in ("train", "validation", "test"):
        (folder / f"{split}.csv").write_text(f'id,report,output\n{split}1,"{"z" * 50}","{output}"\n')
    data = load_labeled(triage, folder)
    assert data.dev[0].id == "validation1" and data.dev[0].output == ROW["output"] and data.dev[0].line == 2


def test_exact_and_numeric_metrics() -> None:
    assert exact_match({"a": "Hello  World", "b": None}, {"a": "hello world"}) == 1.0
    assert exact_match({"a": 1}, {"a": 1.0}) == 1.0 and exact_match("x", "y") == 0.0
    assert numeric_match(10.5, 10, 0.1) == 1.0 and numeric_match(12, 10, 0.1) == 0.0
    assert numeric_match(1, 0, 0.0) == 0.0 and numeric_match(0.5, 0, 0.5) == 1.0


def test_field_match_gives_partial_credit() -> None:
    expected = {"id": "CVE-1", "affected": [{"package": "a", "fixed": "1.0"}, {"package": "b", "fixed": None}],
                "cwe_ids": []}
    assert field_match(expected, expected) == 1.0
    # one of two items half right; an absent list equals an empty one
    predicted = {"id": "CVE-1", "affected": [{"package": "a", "fixed": "2.0"}]}
    assert field_match(predicted, expected) == pytest.approx((1 + 0.25) / 2)
    assert field_match({"id": "CVE-1", "cvss": {"score": 9}}, {"id": "CVE-1"}) == 0.5  # an invented field costs
    assert field_match({"severity": "high", "rationale": "x"}, {"severity": "high", "rationale": "y"},
                       weights={"severity": 1.0}) == 1.0
    assert field_match({"n": 11}, {"n": 10}, tolerance=0.1) == 1.0 and field_match("text", {"a": 1}) == 0.0


def test_metric_resolution_and_errors(triage) -> None:
    assert resolve_metric(None, Evaluation(), triage).name == "fields"
    metric = resolve_metric("fields", Evaluation(fields={"severity": 1.0}), triage)
    assert metric.score({"severity": "low"}, {"severity": "low"}) == 1.0
    assert metric.score({"severity": "low"}, {"severity": "low"}, valid=False) == 0.0  # invalid answers score 0
    assert resolve_metric("schema_valid", Evaluation(), triage).score(None, {}, valid=True) == 1.0
    with pytest.raises(UsageError, match="the output schema lacks"):
        resolve_metric("fields", Evaluation(fields={"severty": 1.0}), triage)
    with pytest.raises(UsageError, match="unknown metric 'accuracy'"):
        resolve_metric("accuracy", Evaluation(), triage)
    with pytest.raises(UsageError, match="needs rubric criteria"):
        resolve_metric("judge", Evaluation(), triage)
    with pytest.raises(UsageError, match="cannot import metric"):
        resolve_metric("no_such_module:f", Evaluation(), triage)


def test_custom_metric_by_module_and_function(triage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_metrics.py").write_text(
        "def severity_distance(p, e):\n"
        "    order = ['informational', 'low', 'medium', 'high', 'critical']\n"
        "    return 1 - abs(order.index(p['severity']) - order.index(e['severity'])) / 4\n"
        "def broken(p, e):\n    return 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    metric = resolve_metric("my_metrics:severity_distance", Evaluation(), triage)
    assert metric.score({"severity": "high"}, {"severity": "critical"}) == 0.75
    with pytest.raises(UsageError, match="returned 7"):
        resolve_metric("my_metrics:broken", Evaluation(), triage).score({}, {})


def test_hub_datasets_load_through_hf_datasets(triage, tmp_path: Path) -> None:
    # `hub:NAME` hands NAME to datasets.load_dataset; a local folder stands in for the hub here (offline)
    folder = write_splits(tmp_path / "repo", {"train": rows("t", 2), "validation": rows("v", 1),
                                              "test": rows("x", 3)})
    data = load_labeled(triage, f"hub:{folder}", cache_dir=tmp_path / "cache")
    assert [len(data.train), len(data.dev), len(data.test)] == [2, 1, 3]
    assert data.dev[0].id == "v0" and data.test[2].file.endswith("[test]") and data.test[2].line == 3
    with pytest.raises(DatasetError, match="cannot load hub dataset"):
        load_labeled(triage, f"hub:{tmp_path / 'missing'}", cache_dir=tmp_path / "cache")


def test_a_module_function_metric_is_imported_from_the_project_without_touching_sys_path(triage, tmp_path):
    import sys

    (tmp_path / "house_metrics_for_test.py").write_text("def lenient(predicted, expected):\n    return 0.5\n")
    before = list(sys.path)
    try:
        metric = resolve_metric("house_metrics_for_test:lenient", Evaluation(), triage, root=tmp_path)
        assert metric.score({"a": 1}, {"a": 2}, valid=True) == 0.5 and sys.path == before
    finally:
        sys.modules.pop("house_metrics_for_test", None)
