"""Benchmark: which candidates are worth racing — the race's decision replayed on the recorded pools.

``bench/search_pool.py`` keeps, per agent, every candidate of the search's pool (seed 0,
``--max-calls 150``) scored on all of dev and all of test. This script replays what the search
does with such a pool, many times over, each time on another seeded split of dev into screening and
confirmation rows (:func:`rosetta.optimize.race.split_dev`, as the search splits it): the prior is
the best anchor on the screening rows; the challengers race on the screening rows by successive
halving as :func:`rosetta.optimize.race.plan` sizes it (cut by :func:`~rosetta.optimize.race.leaders`
on the race's scores, label odds where recorded); the best finalist
(:func:`~rosetta.optimize.race.winner`) answers the confirmation rows and replaces the prior only when
:func:`~rosetta.optimize.race.replaces` says so. The chosen candidate's test score, against the
prior's, is what that split of dev would have shipped.

It does so for the pool as built and for the pool with one kind of candidate left out (the fixed
demo sets, the drawn retrieval policies, the knob variants, ...), and prints per agent and pooled:
how often the prior is replaced, the mean test gain over the prior (and how often a replacement
loses on test); the same for the screening's winner had it replaced the prior without the paired
test (the race before issue 79); and the best test score the pool holds (what a perfect choice could
gain). A kind
earns its place when leaving it out lowers the gain or the best the pool holds; a kind whose
removal changes nothing only spends calls.

Two simplifications: prompt sizes are not recorded, so :func:`~rosetta.optimize.race.winner`'s
preference for the shorter of two finalists within noise is not replayed (every prompt counts 0
tokens; ties go by the race's seeded tie order); and the plan is :func:`~rosetta.optimize.race.plan`'s
for the pool's candidates at the budget less two calls, not the search's own call plan (which also
pays for set-up calls), so a later rung may keep one candidate more or fewer than the search did.

    python bench/pool_replay.py [--pool bench/results/pool-AGENT.jsonl ...] [--splits 500]

By default every ``bench/results/pool-*.jsonl``. Measures nothing: no model call.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from race_rungs import SLACK  # noqa: E402
from search_pool import demos_of, kept_pool, prior_of  # noqa: E402

from rosetta.optimize.race import (  # noqa: E402
    CONFIDENCE, Standing, leaders, plan, replaces, split_dev, tie_order, winner)
from rosetta.optimize.space import DRAWN_SETS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXED = ("first-k", *DRAWN_SETS)


VARIANTS: dict[str, Callable[[dict], bool]] = {
    "the pool as built": lambda c: True,
    "without fixed demo sets": lambda c: demos_of(c) not in FIXED,
    "without retrieval policies": lambda c: demos_of(c) != "retrieval-policy",
    "without label-balanced retrieval": lambda c: not c["params"].get("retrieval_balance"),
    "without knob variants": lambda c: " + " not in str(c["kind"]),
    "without the unoptimized render": lambda c: demos_of(c) != "unoptimized",
}
"""Each variant keeps the candidates its test accepts (the anchors always: the prior is never left out)."""


@dataclass(frozen=True)
class Row:
    """A dev row as :func:`split_dev` wants it: its place in the recorded matrix, its label as output."""

    id: int
    output: str


@dataclass(frozen=True)
class Replay:
    replaced: bool
    gain: float  # the chosen candidate's test mean less the prior's
    unconfirmed: float  # the same for the screening's winner, had it replaced the prior untested


def decide(pool: list[dict], split: int, max_calls: int, confidence: float = CONFIDENCE) -> Replay:
    """The search's decision on ``pool`` with dev split by seed ``split``, the paired test at ``confidence``."""
    rows = [Row(i, label) for i, label in enumerate(pool[0]["dev_labels"])]
    labelled = any(rows[0].output != row.output for row in rows)
    screening, confirming = split_dev(rows, split, (lambda label: label) if labelled else None)
    screen, confirm = [r.id for r in screening], [r.id for r in confirming]
    anchors = [c for c in pool if c["anchor"]] or pool[:1]
    prior = max(anchors, key=lambda c: (statistics.fmean(c["dev_plain"][i] for i in screen), -c["candidate"]))
    challengers = [c for c in pool if c is not prior]
    race = plan(len(rows), max_calls - SLACK, len(pool), anchors=1)
    ties = tie_order(len(pool), split)
    if race is None or not challengers or not race.keep[0]:
        return Replay(False, 0.0, 0.0)
    alive = list(range(min(race.keep[0], len(challengers))))

    def standing(index: int, answered: int) -> Standing:
        c = challengers[index]
        return Standing(index, tuple(c["dev_race"][i] for i in screen[:answered]),
                        tuple(c["dev_plain"][i] for i in screen[:answered]), 0, tie=ties[index])

    for rung in range(1, len(race.rows)):  # each cut on the rows the rung before answered
        alive = leaders([standing(c, race.rows[rung - 1]) for c in alive], race.keep[rung])
    best = challengers[winner([standing(c, race.rows[-1]) for c in alive]).candidate]
    better, _ = replaces([best["dev_plain"][i] for i in confirm], [prior["dev_plain"][i] for i in confirm],
                         confidence)
    chosen = best if better else prior
    return Replay(better, statistics.fmean(chosen["test"]) - statistics.fmean(prior["test"]),
                  statistics.fmean(best["test"]) - statistics.fmean(prior["test"]))


def summary(pool: list[dict], splits: int, max_calls: int, confidence: float = CONFIDENCE) -> dict[str, float]:
    replays = [decide(pool, split, max_calls, confidence) for split in range(splits)]
    replaced = [r for r in replays if r.replaced]
    prior = prior_of(pool)
    return {"candidates": len(pool), "replaced": len(replaced) / splits,
            "gain": statistics.fmean(r.gain for r in replays),
            "losing": sum(r.gain < 0 for r in replaced) / splits,
            "unconfirmed": statistics.fmean(r.unconfirmed for r in replays),
            "unconfirmed_losing": sum(r.unconfirmed < 0 for r in replays) / splits,
            "headroom": max(statistics.fmean(c["test"]) for c in pool) - statistics.fmean(prior["test"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pool", type=Path, action="append", default=None,
                        help="a pool kept by bench/search_pool.py (default: every bench/results/pool-*.jsonl)")
    parser.add_argument("--splits", type=int, default=500, help="seeded splits of dev replayed per pool")
    parser.add_argument("--max-calls", type=int, default=150, help="the budget the race is planned for")
    parser.add_argument("--confidences", default="0.95,0.9,0.8",
                        help="the paired test's confidences replayed on the pool as built (comma-separated)")
    args = parser.parse_args()
    paths = args.pool or sorted((ROOT / "bench" / "results").glob("pool-*.jsonl"))
    pools = {path.stem.removeprefix("pool-"): kept_pool(path) for path in paths}
    pools = {agent: pool for agent, pool in pools.items() if pool}
    if not pools:
        raise SystemExit("no pool kept: run bench/search_pool.py first")
    print(f"the race's decision replayed on {args.splits} splits of dev per pool (--max-calls {args.max_calls}, "
          f"the paired test at {CONFIDENCE:.0%}); test scores against the prior's")
    header("pool")
    for variant, keeps in VARIANTS.items():
        rows(variant, {agent: summary([c for c in pool if c["anchor"] or keeps(c)], args.splits, args.max_calls)
                       for agent, pool in pools.items()})
    print("\nthe pool as built, the paired test at other confidences:")
    header("confidence")
    for confidence in (float(value) for value in args.confidences.split(",")):
        rows(f"{confidence:.0%}", {agent: summary(pool, args.splits, args.max_calls, confidence)
                                   for agent, pool in pools.items()})


def header(first: str) -> None:
    print(f"| {first} | agent | candidates | prior replaced | mean test gain | replaced and worse on test | "
          "untested screening winner: gain | worse on test | best in pool − prior (test) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")


def rows(label: str, found: dict[str, dict[str, float]]) -> None:
    """One table row per agent, then their mean where there are several."""
    lines = list(found.items())
    if len(found) > 1:
        lines.append((f"**mean of {len(found)}**",
                      {key: statistics.fmean(r[key] for r in found.values()) for key in next(iter(found.values()))}))
    for agent, r in lines:
        print(f"| {label} | {agent} | {r['candidates']:.3g} | {r['replaced']:.1%} | {r['gain']:+.4f} | "
              f"{r['losing']:.1%} | {r['unconfirmed']:+.4f} | {r['unconfirmed_losing']:.1%} | {r['headroom']:+.3f} |")


if __name__ == "__main__":
    main()
