"""``bench/optimizers.py`` keeps working as the code it measures changes: a smoke run (one row per
split) of the DSPy rows and rosetta's on the embedded model reaches the table, with their answers
parsed and scored, and DSPy's search's choice scored again through rosetta's runtime; the
KNNFewShot row retrieves what rosetta's nearest demos do."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def test_the_dspy_and_rosetta_rows_of_the_optimizer_bench_run_on_the_embedded_model(tmp_path: Path,
                                                                                     local_model: str) -> None:
    # rosetta's row too, in the same process: its search keeps a throwaway study outside any project
    results = tmp_path / "rows.jsonl"
    done = subprocess.run([sys.executable, str(REPO / "bench" / "optimizers.py"), "--agent", "question-type",
                           "--limit", "1", "--rows", "dspy-labeled,dspy-knn,dspy-bootstrap,rosetta", "--seeds", "1",
                           "--results", str(results)], capture_output=True, text=True, timeout=1500, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "SMOKE RUN on 1 rows" in done.stdout
    rows = {row["key"]: row for row in map(json.loads, results.read_text(encoding="utf-8").splitlines())}
    assert set(rows) == {"dspy-labeled", "dspy-knn", "dspy-bootstrap@1", "dspy-bootstrap-runtime@1", "rosetta@1"}
    for row in rows.values():
        assert row["parsed"] > 0 and 0.0 <= row["test"] <= 1.0, row  # answers were parsed and scored
    labeled = rows["dspy-labeled"]
    assert labeled["method"] == "DSPy LabeledFewShot" and labeled["note"] == "2 demos"  # train's two rows
    assert rows["dspy-knn"]["note"] == "8 nearest demos per request" and rows["dspy-knn"]["calls"] == 0
    chosen = rows["dspy-bootstrap@1"]
    assert chosen["program"]["demos"] is not None and chosen["seed"] == 1
    runtime = rows["dspy-bootstrap-runtime@1"]  # DSPy's choice, rendered by rosetta: its calls are the choice's
    assert runtime["method"].endswith("rosetta's runtime") and runtime["calls"] == chosen["calls"]
    assert runtime["note"].startswith(f"{len(chosen['program']['demos'])} demos")
    assert rows["rosetta@1"]["calls"] > 0 and "candidates raced" in rows["rosetta@1"]["note"]


def test_the_knn_row_retrieves_what_rosetta_s_nearest_demos_do() -> None:
    """DSPy's KNN over the bench's vectorizer picks rosetta's k nearest train rows (ties aside, which
    each breaks its own way)."""
    sys.path.insert(0, str(REPO / "bench"))
    import optimizers
    from dspy.predict.knn import KNN

    from rosetta.settings import load_settings
    from rosetta.optimize.context import load_context
    from rosetta.optimize.dspy_backend import dspy_examples
    from rosetta.render.nearest import input_text, rank

    context = load_context(REPO / "signatures" / "news-topic.md", optimizers.MODEL, settings=load_settings(REPO))
    signature, data = context.signature, context.data
    k = signature.demo_range[1]
    fields = tuple(field.name for field in signature.inputs)
    knn = KNN(k, dspy_examples(signature, data.train), optimizers.lexical_vectorizer(fields))
    pool = [input_text(row.inputs) for row in data.train]
    for row in data.dev:
        ours = [data.train[i].id for i in rank(input_text(row.inputs), pool, k)]
        assert [demo.rosetta_id for demo in knn(**row.inputs)] == ours


def test_the_paired_report_compares_rosettas_artifact_with_its_prior_row_by_row() -> None:
    """Per agent: the mean per-row difference from the prior (the k-nearest-demos row) over seeds and
    rows, a hierarchical bootstrap interval, and the seeds a paired test finds worse than the prior."""
    sys.path.insert(0, str(REPO / "bench"))
    import optimizers

    prior = [1.0, 0.0] * 20
    same, worse = {"seed": 0, "per_row": list(prior)}, {"seed": 1, "per_row": [0.0] * 40}
    lines = [{"name": "nearest-k", "rows": [{"per_row": prior}]}, {"name": "rosetta", "rows": [same]}]
    tied = optimizers.paired(lines, draws=500)
    assert tied is not None and (tied["mean"], tied["low"], tied["high"], tied["worse"]) == (0.0, 0.0, 0.0, [])
    lines[1]["rows"] = [same, worse]  # seed 1 lost the 20 rows the prior got right
    result = optimizers.paired(lines, draws=500)
    assert result["mean"] == -0.25 and result["per_seed"] == {0: 0.0, 1: -0.5} and result["worse"] == [1]
    assert result["low"] < -0.25 < result["high"] <= 0.0  # the seeds disagree: the interval is wide
    assert optimizers.paired([{"name": "nearest-k", "rows": [{"test": 0.5}]}, lines[1]]) is None  # kept before 79


def test_the_nearest_label_vote_row_calls_no_model(tmp_path: Path) -> None:
    results = tmp_path / "rows.jsonl"
    done = subprocess.run([sys.executable, str(REPO / "bench" / "optimizers.py"), "--agent", "news-topic",
                           "--limit", "6", "--rows", "nearest-vote", "--results", str(results)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    row = json.loads(results.read_text(encoding="utf-8"))
    assert row["key"] == "nearest-vote" and row["calls"] == 0 and len(row["per_row"]) == 6
    assert row["test"] == sum(row["per_row"]) / 6 and row["note"] == "labels voted"


def test_the_oracle_report_adds_the_search_s_kept_pool(tmp_path: Path, capsys: object) -> None:
    """Beside the oracle of the prompts scored here, the pool's (``bench/search_pool.py``): its best
    candidate chosen on one half of test and scored on the other; a pool of another test size (a
    smoke run's) is left out."""
    sys.path.insert(0, str(REPO / "bench"))
    import optimizers

    prior = [1.0, 0.0] * 4
    lines = [{"name": "nearest-k", "rows": [{"per_row": prior, "method": "k nearest"}]},
             {"name": "rosetta", "rows": [{"name": "rosetta", "per_row": prior, "test": 0.5, "method": "rosetta"}]}]
    kept = [{"candidate": 0, "anchor": True, "test": prior, "fingerprint": "f", "measured_at": "today"},
            {"candidate": 1, "anchor": False, "test": [1.0] * 8, "fingerprint": "f", "measured_at": "today"}]
    (tmp_path / "pool-news-topic.jsonl").write_text("\n".join(map(json.dumps, kept)), encoding="utf-8")
    (tmp_path / "pool-sms-spam.jsonl").write_text(json.dumps({**kept[1], "test": [1.0] * 3}), encoding="utf-8")
    optimizers.print_oracle({"news-topic": lines, "sms-spam": lines}, pools=tmp_path)
    printed = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "the search's pool: oracle 1.000 vs rosetta 0.500: gap +0.500 (2 candidates kept" in printed
    assert printed.count("the search's pool:") == 1
