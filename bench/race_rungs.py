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

- **Recorded** (``--journal PATH``, repeatable): the study journal of a run in which every
  candidate answered all of dev, e.g.
  ``rosetta compile signatures/news-topic.md --model local/gemma-3-270m --optimize --pruner none
  --trials 30 --max-calls 1560`` (the journal is ``.rosetta/studies/<agent>/<model>.journal``).
  Each replay races a random subset of the recorded candidates on a random order of the rows; the
  truth is the full-dev plain score.
- **Synthetic** (always): a documented item-response model. Candidate ``i`` has a true accuracy
  ``p_i``; row ``j`` a difficulty ``b_j ~ N(0, 1)`` shared by all candidates (some rows are hard
  for every prompt); candidate ``i`` answers row ``j`` right when ``z_ij = a_i - b_j + e_ij > 0``
  with ``e_ij ~ N(0, 1)`` and ``a_i = sqrt(2) * Phi^-1(p_i)`` (so its accuracy over rows is
  ``p_i``). The plain score is ``z > 0`` (0 or 1); the label-odds score, the correct label's
  probability, is ``sigmoid(1.7 z)``. Two pools of accuracies typical of the bench (its candidates
  scored 0.04–0.68 on dev, on 40–50 dev rows): ``uniform``: ``p ~ U(0.1, 0.7)``; ``skewed``:
  ``p = 0.1 + 0.6 * Beta(2, 5)`` (most candidates mediocre, a few good ones).

    python bench/race_rungs.py [--reps 2000] [--dev 50] [--budgets 100,150,300] [--journal PATH ...]

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
    true accuracy per candidate where it is known (synthetic pools)."""

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


def recorded(path: Path, seed: int) -> Matrix:
    """The full-dev matrix of a ``--pruner none`` study kept at ``path``
    (``<project>/.rosetta/studies/<agent>/<model>.journal``): each candidate's race and plain
    scores on every dev row, in the study's dev order, which is rebuilt from the project's data and
    ``seed`` (the study's ``--seed``) to know each row's label."""
    import optuna

    from rosetta.settings import load_settings
    from rosetta.optimize.context import load_context
    from rosetta.optimize.race import dev_order
    from rosetta.optimize.space import label_function
    from rosetta.optimize.study import open_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    project, agent, model = path.parents[3], path.parent.name, path.stem.replace("__", "/", 1)
    storage, _ = open_storage(None, path)
    study = optuna.load_study(study_name=optuna.get_all_study_names(storage)[0], storage=storage)
    units = {}
    for trial in study.get_trials(deepcopy=False):
        attrs = trial.user_attrs
        if trial.state.name == "COMPLETE" and "candidate" in attrs:
            units[int(attrs["candidate"])] = (attrs["race"], attrs["plain"])
    context = load_context(project / "signatures" / f"{agent}.md", model, settings=load_settings(project))
    label_of = label_function(context.signature)
    order = dev_order(context.data.dev, seed, label_of)
    full = [units[c] for c in sorted(units) if len(units[c][0]) == len(order)]
    labels = np.array([label_of(row.output) if label_of else "" for row in order])
    return Matrix(np.array([race for race, _ in full], float), np.array([plain for _, plain in full], float),
                  np.unique(labels, return_inverse=True)[1])


def replay(race: Plan, matrix: Matrix, rng: np.random.Generator) -> tuple[list[bool], bool, int]:
    """One race on ``matrix`` (``race.candidates`` of its candidates, drawn at random, answering its
    rows in a random order with labels interleaved): for each cut, whether a full-dev best of those
    raced was still in; whether one won; and the winner."""
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
    return kept, winner in best, int(chosen[winner])


def measure(race: Plan, source: str, rng: np.random.Generator, reps: int, dev: int,
            matrices: list[Matrix]) -> dict[str, float]:
    survived = np.zeros(len(race.rows) - 1)
    won = full_score = true_score = best_true = 0.0
    for rep in range(reps):
        matrix = matrices[rep % len(matrices)] if matrices else synthetic(rng, race.candidates, dev,
                                                                          source.split(":")[1])
        kept, best_won, winner = replay(race, matrix, rng)
        survived += kept
        won += best_won
        full_score += matrix.plain[winner].mean()
        if matrix.truth is not None:
            true_score += matrix.truth[winner]
            best_true += matrix.truth.max()
    known = not matrices
    return {"survived": list(survived / reps), "won": won / reps, "full": full_score / reps,
            "true": true_score / reps if known else math.nan, "best_true": best_true / reps if known else math.nan}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--dev", type=int, default=50)
    parser.add_argument("--budgets", default="100,150,300")
    parser.add_argument("--journal", type=Path, action="append", default=[])
    parser.add_argument("--seed", type=int, default=55, help="the simulation's own seed")
    parser.add_argument("--study-seed", type=int, default=0, help="the recorded studies' --seed (their dev order)")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    sources = [(f"synthetic:{pool}", []) for pool in ("uniform", "skewed", "label-biased")]
    sources += [(f"recorded:{path.parent.name}", [recorded(path, args.study_seed)]) for path in args.journal]
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
        matrices = [Matrix(scores, matrices[0].plain, matrices[0].labels)]
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
