"""``bench/search_pool.py`` (issue 79): the search's pool is the race's own, built without a call;
its oracle chooses on one half of test and scores on the other; and ``bench/race_rungs.py --pool``
replays the kept full-dev matrices, each candidate's test score as its truth."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))

import race_rungs  # noqa: E402
import search_pool  # noqa: E402


def candidate(index: int, dev: list[float], test: list[float], *, anchor: bool = False, kind: str = "sampled",
              stamp: str = "now") -> dict:
    return {"candidate": index, "kind": kind, "anchor": anchor, "dev_plain": dev, "dev_race": [d * 0.9 for d in dev],
            "dev_labels": ["a", "b"] * (len(dev) // 2), "screening": 2, "test": test, "fingerprint": stamp}


def test_the_oracle_chooses_on_one_half_and_scores_on_the_other() -> None:
    perfect = candidate(2, [1.0] * 4, [1.0] * 8)
    others = [candidate(0, [1.0] * 4, [0.5] * 8, anchor=True, kind="nearest-k"), candidate(1, [0.0] * 4, [0.0] * 8)]
    assert search_pool.oracle([*others, perfect]) == (1.0, [2, 2])
    # a candidate right on alternate rows looks best on whichever half holds more of them, and scores
    # what the other half gives it: the oracle is an honest estimate, not the best in hindsight
    lucky = candidate(3, [0.0] * 4, [1.0, 0.0] * 4)
    value, chosen = search_pool.oracle([*others, lucky])
    assert value <= max(np.mean(c["test"]) for c in [*others, lucky]) and set(chosen) <= {0, 3}


def test_the_prior_is_the_best_anchor_on_the_screening_rows() -> None:
    first = candidate(0, [1.0, 0.0, 1.0, 1.0], [1.0] * 4, anchor=True)
    second = candidate(1, [1.0, 1.0, 0.0, 0.0], [0.0] * 4, anchor=True)  # better on the 2 screening rows only
    challenger = candidate(2, [1.0] * 4, [1.0] * 4)
    assert search_pool.prior_of([first, second, challenger])["candidate"] == 1
    assert search_pool.prior_of([candidate(5, [0.0] * 4, [0.0] * 4)])["candidate"] == 5  # no anchor: the first


def test_race_rungs_replays_the_last_measurement_of_a_kept_pool(tmp_path: Path) -> None:
    kept = tmp_path / "pool-news-topic.jsonl"
    lines = [candidate(0, [0.0] * 4, [0.0] * 4, stamp="old"), candidate(0, [1.0, 0.0, 1.0, 0.0], [0.5] * 4),
             candidate(1, [1.0] * 4, [1.0, 1.0, 1.0, 0.0])]
    kept.write_text("\n".join(json.dumps(line) for line in lines) + '\n{"candidate": 2, "dev_pl', encoding="utf-8")
    matrix = race_rungs.recorded(kept)
    # the old fingerprint's line and the torn one are left out
    assert matrix.plain.tolist() == [[1.0, 0.0, 1.0, 0.0], [1.0] * 4]
    assert matrix.truth.tolist() == [0.5, 0.75] and matrix.labels.tolist() == [0, 1, 0, 1]
    assert np.allclose(matrix.race, matrix.plain * 0.9)
    result = race_rungs.measure(race_rungs.plan(4, 12, 2, first=2), "recorded:news-topic",
                                np.random.default_rng(0), 20, 4, [matrix])
    assert result["won"] == 1.0 and result["true"] == result["best_true"] == 0.75  # candidate 1 is best everywhere


def test_the_report_prints_what_is_kept_without_measuring(tmp_path: Path) -> None:
    pool = [candidate(0, [1.0, 0.0, 1.0, 1.0], [1.0, 0.0] * 2, anchor=True, kind="nearest-k"),
            candidate(1, [1.0] * 4, [1.0] * 4, kind="retrieval-policy + terse-instruction")]
    search_pool.print_report({"news-topic": {"candidates": pool, "rosetta": {0: [1.0, 0.0] * 2}, "pool": 2},
                              "sms-spam": {"candidates": [], "rosetta": {}, "pool": None}})


def test_the_dry_run_builds_the_race_s_pool_without_a_call(tmp_path: Path, local_model: str) -> None:
    done = subprocess.run([sys.executable, str(REPO / "bench" / "search_pool.py"), "--agent", "question-type",
                           "--dry-run", "--results", str(tmp_path)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr
    # the race at --max-calls 150 on 50 dev rows: the prior and 13 challengers (bench/README.md's rows)
    assert "a pool of 14 candidates (seed 0, --max-calls 150; set-up 0 calls)" in done.stderr
    assert "kinds: nearest-k, unoptimized, first-k, retrieval-policy" in done.stderr
    assert "at most 2100 calls" in done.stderr and not list(tmp_path.glob("pool-*.jsonl"))
