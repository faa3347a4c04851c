"""``bench/pool_replay.py`` (issue 79): the race's decision replayed on a kept pool — the prior is
replaced only by a challenger the paired test finds better on the confirmation rows, and what the
replacement gains is measured on test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))

import pool_replay  # noqa: E402

DEV = 30  # 10 screening rows, 20 confirmation rows: enough for the paired test to tell a clear winner


def candidate(index: int, dev: float, test: float, *, kind: str = "sampled", anchor: bool = False,
              params: dict | None = None) -> dict:
    """A candidate right on the first ``dev`` share of each label's rows and on ``test`` of 10 test rows."""
    labels = ["a", "b", "c"] * (DEV // 3)
    right = [1.0 if (i // 3) < dev * DEV / 3 else 0.0 for i in range(DEV)]
    return {"candidate": index, "kind": kind, "anchor": anchor, "params": params or {}, "dev_labels": labels,
            "dev_plain": right, "dev_race": right, "screening": DEV // 3,
            "test": [1.0] * round(test * 10) + [0.0] * (10 - round(test * 10)), "fingerprint": "now"}


def test_a_challenger_better_on_every_row_replaces_the_prior_and_its_gain_is_measured_on_test() -> None:
    prior = candidate(0, 0.2, 0.4, kind="nearest-k", anchor=True)
    pool = [prior, candidate(1, 0.1, 0.1), candidate(2, 1.0, 0.9, kind="retrieval-policy")]
    result = pool_replay.summary(pool, splits=20, max_calls=150)
    assert result["replaced"] == 1.0 and abs(result["gain"] - 0.5) < 1e-9 and result["losing"] == 0.0
    assert abs(result["headroom"] - 0.5) < 1e-9


def test_a_tie_keeps_the_prior_whatever_test_says() -> None:
    pool = [candidate(0, 0.5, 0.4, kind="nearest-k", anchor=True), candidate(1, 0.5, 0.9), candidate(2, 0.5, 0.1)]
    result = pool_replay.summary(pool, splits=20, max_calls=150)
    assert result["replaced"] == 0.0 and result["gain"] == 0.0 and abs(result["headroom"] - 0.5) < 1e-9


def test_a_variant_leaves_out_its_kind_but_never_the_prior(tmp_path: Path) -> None:
    pool = [candidate(0, 0.2, 0.4, kind="nearest-k", anchor=True, params={"retrieval_balance": True}),
            candidate(1, 1.0, 0.9, kind="retrieval-policy", params={"retrieval_balance": True}),
            candidate(2, 0.1, 0.1, kind="diverse + terse-instruction")]
    kept = {variant: [c["candidate"] for c in pool if c["anchor"] or keeps(c)]
            for variant, keeps in pool_replay.VARIANTS.items()}
    assert kept["without retrieval policies"] == kept["without label-balanced retrieval"] == [0, 2]
    assert kept["without fixed demo sets"] == kept["without knob variants"] == [0, 1]
    path = tmp_path / "pool-news-topic.jsonl"
    path.write_text("\n".join(json.dumps(c) for c in pool) + "\n", encoding="utf-8")
    done = subprocess.run([sys.executable, str(REPO / "bench" / "pool_replay.py"), "--pool", str(path), "--splits",
                           "10"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "| the pool as built | news-topic | 3 | 100.0% | +0.5000 | 0.0% | +0.5000 | 0.0% | +0.500 |" in done.stdout
    # left with a worse challenger: the paired test keeps the prior; had the screening's winner replaced
    # it untested (the race before issue 79), test would have lost 0.3 on every split
    assert "| without retrieval policies | news-topic | 2 | 0.0% | +0.0000 | 0.0% | -0.3000 | 100.0% | +0.000 |" \
        in done.stdout
    assert "| 80% | news-topic | 3 | 100.0% |" in done.stdout  # the other confidences, on the pool as built
