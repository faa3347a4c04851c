"""Benchmark: how big the race's first rung must be for its first cut to be informed.

The race (``rosetta.optimize.race``) has every candidate answer the first rows of dev, keeps the
best third, adds rows, and so on until the finalists answer all of dev. Few rows in rung 0 let the
budget pay for more candidates, but cut on little evidence; many rows cut well among fewer. This
script replays the race, as :func:`rosetta.optimize.race.plan` sizes it for each first-rung size
tried, on full-dev score matrices (candidates × dev rows: every candidate's score on every dev
row), and measures:

- how often the eventual full-dev best (the raced candidate with the highest mean on all of dev)
  survives each cut, and how often it wins;
- the winner's quality: its full-dev score, and, for synthetic matrices, its true accuracy (the
  probability it answers a new row right), beside the best true accuracy among those raced.

Matrices come from two sources:

- **Recorded** (``--pool PATH``, repeatable): one agent's search pool with every candidate scored
  on all of dev and test, as ``bench/search_pool.py`` keeps it (``bench/results/pool-AGENT.jsonl``).
  Each replay races a random subset of the recorded candidates on a random order of the rows; the
  truth is each candidate's test score. (A ``--pruner none`` study no longer records such a matrix:
  since issue 79 only the best challenger answers the confirmation rows.)
- **Synthetic** (always): a documented item-response model. Candidate ``i`` has a true accuracy
  ``p_i``; row ``j`` a difficulty ``b_j ~ N(0, 1)`` shared by all candidates (some rows are hard
  for every prompt); candidate ``i`` answers row ``j`` right when ``z_ij = a_i - b_j + e_ij > 0``
  with ``e_ij ~ N(0, 1)`` and ``a_i = sqrt(2) * Phi^-1(p_i)`` (so its accuracy over rows is
  ``p_i``). The plain score is ``z > 0`` (0 or 1); the label-odds score, the correct label's
  probability, is ``sigmoid(1.7 z)``. Two pools of accuracies typical of the bench (its candidates
  scored 0.04–0.68 on dev, on 40–50 dev rows): ``uniform``: ``p ~ U(0.1, 0.7)``; ``skewed``:
  ``p = 0.1 + 0.6 * Beta(2, 5)`` (most candidates mediocre, a few good ones).

    python bench/race_rungs.py [--reps 2000] [--dev 50] [--budgets 100,150,300] [--pool PATH ...]

Prints one table per (source, scoring, budget): per first-rung size, the plan (rows and candidates
per rung) and the measurements above; then the size each scoring's rule chose.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rosetta.optimize.race import FIRST_ROWS, Plan, plan  # noqa: E402

FIRSTS = (2, 3, 4, 6, 8, 10, 12, 16, 25)
LABELS = 4  # labels in a synthetic dev split, balanced
SLACK = 2  # calls the call plan keeps for one answer's validation retries: the race's room is the budget less them


@dataclass
class Matrix:
    """Every candidate's per-row scores on all of dev: the race's score and the plain metric's; the
    true accuracy per candidate where it is known (synthetic pools; a recorded pool's test scores)."""

    race: np.ndarray  # candidates × rows
    plain: np.ndarray
    labels: np.ndarray  # each row's label (the race interleaves them, see race.dev_order)
    truth: np.ndarray | None = None


def synthetic(rng: np.random.Generator, candidates: int, rows: int, pool: str) -> Matrix:
    from scipy.stats import norm

    p = 0.1 + 0.6 * rng.beta(2, 5, candidates) if pool == "skewed" else rng.uniform(0.1, 0.7, candidates)
    labels = np.arange(rows) % LABELS
    a = math.sqrt(2) * norm.ppf(p)
    bias = rng.normal(0, 1, (candidates, LABELS)) if pool == "label-biased" else np.zeros((candidates, LABELS))
    z = (a[:, None] + bias[:, labels]) - rng.normal(0, 1, rows)[None, :] + rng.normal(0, 1, (candidates, rows))
    if pool == "label-biased":  # the true accuracy on balanced labels, the label effects included
        p = norm.cdf((a[:, None] + bias) / math.sqrt(2)).mean(axis=1)
    return Matrix(1 / (1 + np.exp(-1.7 * z)), (z > 0).astype(float), labels, p)


def interleaved(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random row order as :func:`rosetta.optimize.race.dev_order` makes them: each label's rows
    shuffled, labels taken in turn, the most frequent first."""
    groups = {label: rng.permutation(np.flatnonzero(labels == label)).tolist() for label in set(labels.tolist())}
    ordered = sorted(groups, key=lambda label: (-len(groups[label]), label))
    return np.array([groups[label][k] for k in range(max(map(len, groups.values())))
                     for label in ordered if k < len(groups[label])])


def recorded(path: Path) -> Matrix:
    """The full-dev matrix of the pool kept at ``path`` by ``bench/search_pool.py``: each candidate's
    race and plain scores on every dev row (in the race's dev order), each row's label, and each
    candidate's mean test score as its true accuracy. Rows of the last measurement only (its
    fingerprint), one per candidate; a line torn by a kill is skipped."""
    from search_pool import kept_pool

    ordered = kept_pool(path)
    if not ordered:
        raise SystemExit(f"{path}: no candidates kept; run bench/search_pool.py first")
    labels = np.unique(np.array(ordered[0]["dev_labels"]), return_inverse=True)[1]
    return Matrix(np.array([c["dev_race"] for c in ordered], float), np.array([c["dev_plain"] for c in ordered], float),
                  labels, np.array([float(np.mean(c["test"])) for c in ordered]))


def replay(race: Plan, matrix: Matrix, rng: np.random.Generator) -> tuple[list[bool], bool, int, np.ndarray]:
    """One race on ``matrix`` (``race.candidates`` of its candidates, drawn at random, answering its
    rows in a random order with labels interleaved): for each cut, whether a full-dev best of those
    raced was still in; whether one won; the winner; and the candidates raced."""
    chosen = rng.permutation(len(matrix.race))[:race.candidates]
    order = interleaved(matrix.labels, rng)
    scores, full = matrix.race[chosen][:, order], matrix.plain[chosen].mean(axis=1)
    best = set(np.flatnonzero(full == full.max()))
    tie = rng.permutation(len(chosen))  # ties go to a random order fixed before the race, as in the race
    alive = np.arange(len(chosen))
    kept: list[bool] = []
    for rung, keep in enumerate(race.keep):
        if rung:
            means = scores[alive, :race.rows[rung - 1]].mean(axis=1)
            alive = alive[np.lexsort((tie[alive], -means))][:keep]
            kept.append(bool(best & set(alive.tolist())))
    means = scores[alive].mean(axis=1)
    winner = int(alive[np.lexsort((tie[alive], -means))][0])
    return kept, winner in best, int(chosen[winner]), chosen


def measure(race: Plan, source: str, rng: np.random.Generator, reps: int, dev: int,
            matrices: list[Matrix]) -> dict[str, float]:
    survived = np.zeros(len(race.rows) - 1)
    won = full_score = true_score = best_true = 0.0
    for rep in range(reps):
        matrix = matrices[rep % len(matrices)] if matrices else synthetic(rng, race.candidates, dev,
                                                                          source.split(":")[1])
        kept, best_won, winner, raced = replay(race, matrix, rng)
        survived += kept
        won += best_won
        full_score += matrix.plain[winner].mean()
        if matrix.truth is not None:
            true_score += matrix.truth[winner]
            best_true += matrix.truth[raced].max()
    known = all(m.truth is not None for m in matrices)
    return {"survived": list(survived / reps), "won": won / reps, "full": full_score / reps,
            "true": true_score / reps if known else math.nan, "best_true": best_true / reps if known else math.nan}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--dev", type=int, default=50)
    parser.add_argument("--budgets", default="100,150,300")
    parser.add_argument("--pool", type=Path, action="append", default=[],
                        help="a pool kept by bench/search_pool.py (bench/results/pool-AGENT.jsonl), repeatable")
    parser.add_argument("--seed", type=int, default=55, help="the simulation's own seed")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    sources = [(f"synthetic:{pool}", []) for pool in ("uniform", "skewed", "label-biased")]
    sources += [(f"recorded:{path.stem.removeprefix('pool-')}", [recorded(path)]) for path in args.pool]
    for source, matrices in sources:
        dev = matrices[0].race.shape[1] if matrices else args.dev
        for scoring in ("odds", "metric"):
            if matrices and scoring == "odds" and np.array_equal(matrices[0].race, matrices[0].plain):
                continue  # the recorded race scored the metric: no label odds to replay
            for budget in (int(b) for b in args.budgets.split(",")):
                table(source, scoring, budget, dev, rng, args.reps, matrices)
    print(f"\nchosen: rung 0 answers {FIRST_ROWS} rows (rosetta.optimize.race.FIRST_ROWS), whatever the scoring")


def table(source: str, scoring: str, budget: int, dev: int, rng: np.random.Generator, reps: int,
          matrices: list[Matrix]) -> None:
    if matrices:
        scores = matrices[0].race if scoring == "odds" else matrices[0].plain
        matrices = [Matrix(scores, matrices[0].plain, matrices[0].labels, matrices[0].truth)]
    print(f"\n{source}, {dev} dev rows, scored by {'label odds' if scoring == 'odds' else 'the metric'}, "
          f"--max-calls {budget}" + (f" ({len(matrices[0].race)} recorded candidates)" if matrices else ""))
    print("| rung 0 rows | rows per rung | candidates per rung | best survives each cut | best wins | winner's "
          "full-dev score | winner's true accuracy | best true accuracy raced |")
    print("| ---: | --- | --- | --- | ---: | ---: | ---: | ---: |")
    seen: set[Plan] = set()
    for first in FIRSTS:
        cap = len(matrices[0].race) if matrices else None  # a recorded study races at most its candidates
        race = plan(dev, budget - SLACK, cap, first=first)
        if race is None or race in seen:
            continue  # no race fits, or the same race as a smaller size tried
        seen.add(race)
        result = measure(race, source, rng, reps, dev, matrices)
        mark = " ← chosen" if first == FIRST_ROWS else ""
        survived = " · ".join(f"{s:.2f}" for s in result["survived"]) or "–"
        print(f"| {first}{mark} | {', '.join(map(str, race.rows))} | {', '.join(map(str, race.keep))} | {survived} | "
              f"{result['won']:.2f} | {result['full']:.3f} | {_num(result['true'])} | {_num(result['best_true'])} |")


def _num(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.3f}"


if __name__ == "__main__":
    main()
