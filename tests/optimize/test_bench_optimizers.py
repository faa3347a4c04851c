"""``bench/optimizers.py`` keeps working as the code it measures changes: a smoke run (two rows per
split) of a DSPy row on the embedded model reaches the table, with its answers parsed and scored."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def test_a_dspy_row_of_the_optimizer_bench_runs_on_the_embedded_model(tmp_path: Path, local_model: str) -> None:
    results = tmp_path / "rows.jsonl"
    done = subprocess.run([sys.executable, str(REPO / "bench" / "optimizers.py"), "--agent", "question-type",
                           "--limit", "2", "--rows", "dspy-labeled", "--results", str(results)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "SMOKE RUN on 2 rows" in done.stdout
    row = json.loads(results.read_text(encoding="utf-8").splitlines()[-1])
    assert row["key"] == "dspy-labeled" and row["method"] == "DSPy LabeledFewShot"
    assert row["parsed"] > 0 and 0.0 <= row["test"] <= 1.0, row  # answers were parsed and scored
    assert row["note"] == "4 demos"
