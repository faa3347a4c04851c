"""Racing candidates: successive halving on shared dev rows, planned to fit the call budget.

Every candidate of rung 0 answers the same first two rows of one fixed dev order (why two:
:data:`FIRST_ROWS`); the best third go on to rung 1, which adds rows, and so on until the last
rung, where the finalists answer the whole dev split. Rows already answered are never asked again,
so rung ``k`` costs only its new rows. The plan (how many candidates, how many rows per rung) is
fixed before the first call from the dev size and the budget, and spends the budget: the answers
a cut in thirds leaves over buy more candidates, in rung 0 first. The race departs from it only
where validation retries make answers cost more than one call, and then by what the calls spent so
far say, never by what was cached, so cached answers, resumes and workers never change what is
tried.

:func:`plan` sizes the race; :func:`dev_order` interleaves labels so a rung's few rows cover
several; :func:`leaders` and :func:`winner` choose on equal rows, preferring the simpler prompt
(fewer tokens) when candidates are within noise of each other, and breaking ties by a seeded order
(:func:`tie_order`), not by candidate number.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

ETA = 3
"""Each rung keeps a third of the candidates and triples their rows (Hyperband's usual factor)."""
FIRST_ROWS = 2
"""Rows every candidate answers in rung 0. Few rows cut on little evidence, but buy candidates:
``bench/race_rungs.py`` replays the race on full-dev score matrices with first rungs of 2 to 25
rows. In 34 of its 36 settings (three pools of candidates, label odds or the metric, 100, 150 or
300 calls, 40 or 50 dev rows) two rows gave the winner of highest true accuracy, and in the other
two they came within 0.001 of three rows. The full-dev best among those raced survives a two-row
first cut less often (69–93% of races, against 74–99% with 6 to 16 rows), but losing the best of
25 mostly leaves a near-best, while racing 10 instead misses better candidates altogether."""
MAX_CANDIDATES = 81
"""At most this many candidates when only the budget bounds the race."""
UNBOUNDED_CANDIDATES = 24
"""Candidates when neither ``--trials`` nor a call budget is given."""


@dataclass(frozen=True)
class Plan:
    """How many candidates answer how many rows at each rung."""

    rows: tuple[int, ...]  # rows answered by the end of each rung (the last: all of dev)
    keep: tuple[int, ...]  # candidates in each rung

    @property
    def candidates(self) -> int:
        return self.keep[0]

    def calls(self) -> int:
        """Answers the race needs, retries aside."""
        return sum(keep * (rows - before) for keep, rows, before in zip(self.keep, self.rows, (0, *self.rows)))

    def widened(self, rung: int, entrants: int, spare: int) -> Plan:
        """This plan with as many more candidates in ``rung`` (at most ``entrants``, those that
        finished the rung before) as ``spare`` answers pay for; the rungs after keep theirs."""
        step = self.rows[rung] - self.rows[rung - 1]
        extra = max(0, min(spare // step, entrants - self.keep[rung]))
        keep = (*self.keep[:rung], self.keep[rung] + extra, *self.keep[rung + 1:])
        return Plan(self.rows, keep) if extra else self

    def answers_after(self, rung: int, entrants: int) -> int:
        """Answers the rungs after ``rung`` need when ``entrants`` candidates finish it, retries aside."""
        return sum(min(keep, entrants) * (rows - before) for keep, rows, before
                   in zip(self.keep[rung + 1:], self.rows[rung + 1:], self.rows[rung:]))

    def describe(self) -> dict[str, Any]:
        return {"candidates": self.candidates, "rows": list(self.rows), "keep": list(self.keep),
                "calls": self.calls()}


def plan(dev_size: int, budget: int | None, candidates: int | None = None, *, halving: bool = True,
         first: int = FIRST_ROWS) -> Plan | None:
    """The race over the most candidates (at most ``candidates``) whose answers fit ``budget``, rung
    0 answering ``first`` rows and each later rung about three times as many, up to all of dev; the
    answers a third-by-third cut leaves over buy more candidates (see :func:`_spent`). Without a
    budget, ``candidates`` (or 24) race. None when not even one candidate can answer all of dev.
    ``halving=False``: every candidate answers all of dev."""
    if dev_size <= 0:
        return None
    cap = candidates or (MAX_CANDIDATES if budget is not None else UNBOUNDED_CANDIDATES)
    rows = rungs(dev_size, first) if halving else (dev_size,)
    if budget is None:
        return _uncut(_thirds(rows, cap))
    count = max((n for n in range(1, cap + 1) if _thirds(rows, n).calls() <= budget), default=0)
    return _uncut(_spent(_thirds(rows, count), budget, cap)) if count else None


def _uncut(race: Plan) -> Plan:
    """``race`` without the rungs that cut no candidate (the next rung keeps them all): each would
    only be a decision on fewer rows that decides nothing, e.g. one candidate answering dev in
    three steps. The same candidates answer the same rows, so the calls are unchanged."""
    kept = [k for k in range(len(race.rows)) if k == len(race.rows) - 1 or race.keep[k + 1] < race.keep[k]]
    return Plan(tuple(race.rows[k] for k in kept), tuple(race.keep[k] for k in kept))


def rungs(dev_size: int, first: int) -> tuple[int, ...]:
    """Rows answered by the end of each rung: ``first``, then about :data:`ETA` times more per
    rung, the last all of dev (a single rung when ``first`` is within a factor ETA of dev)."""
    first = max(1, min(first, dev_size))
    depth = round(math.log(dev_size / first, ETA))  # rungs after the first
    if depth <= 0:
        return (dev_size,)
    return tuple(sorted({round(first * (dev_size / first) ** (k / depth)) for k in range(depth)} | {dev_size}))


def _thirds(rows: tuple[int, ...], count: int) -> Plan:
    return Plan(rows, tuple(max(1, math.ceil(count / ETA ** k)) for k in range(len(rows))))


def _spent(race: Plan, budget: int, cap: int) -> Plan:
    """``race`` with the answers it leaves unspent turned into candidates: first more in rung 0
    (up to ``cap``), then more in each later rung in turn (never more than the rung before kept).
    One more candidate in thirds would often need another finalist (a whole dev pass), so without
    this up to a quarter of the budget went unused. The race adds candidates to a rung by the same
    rule when its answers cost fewer calls than were kept for them (:meth:`Plan.widened`), so a
    plan that has spent its budget here is run as it stands."""
    keep = list(race.keep)
    keep[0] += max(0, min((budget - race.calls()) // race.rows[0], cap - keep[0]))
    race = Plan(race.rows, tuple(keep))
    for rung in range(1, len(race.rows)):
        race = race.widened(rung, race.keep[rung - 1], budget - race.calls())
    return race


def dev_order(examples: Sequence[Any], seed: int, label_of: Callable[[Any], str] | None) -> list[Any]:
    """The one order every candidate answers dev in: seeded, and with labels interleaved (the most
    frequent label first, each label's rows shuffled), so the first rows cover several labels."""
    rng = random.Random(seed)
    if label_of is None:
        order = list(examples)
        rng.shuffle(order)
        return order
    groups: dict[str, list[Any]] = defaultdict(list)
    for example in examples:
        groups[label_of(example.output)].append(example)
    for rows in groups.values():
        rng.shuffle(rows)
    labels = sorted(groups, key=lambda label: (-len(groups[label]), label))
    order: list[Any] = []
    for position in range(max(len(rows) for rows in groups.values())):
        order += [groups[label][position] for label in labels if position < len(groups[label])]
    return order


@dataclass(frozen=True)
class Standing:
    """A candidate's scores on the rows it answered: race scores (a label's probability where
    available), plain metric scores, and its prompt's size."""

    candidate: int
    race: tuple[float, ...]
    plain: tuple[float, ...]
    tokens: int
    tie: int = 0  # the candidate's place in the race's tie order (see :func:`tie_order`)

    @property
    def mean(self) -> float:
        return sum(self.race) / len(self.race) if self.race else 0.0

    @property
    def plain_mean(self) -> float:
        return sum(self.plain) / len(self.plain) if self.plain else 0.0


def tie_order(candidates: int, seed: int) -> list[int]:
    """Each candidate's place when scores tie: a seeded shuffle fixed before the race, so that ties
    favour no candidate number (the seeded prompts come first in the space's order)."""
    places = list(range(candidates))
    random.Random(f"ties:{seed}").shuffle(places)
    return places


def leaders(standings: Sequence[Standing], keep: int) -> list[int]:
    """The ``keep`` best candidates on the same rows (ties: the earlier in the tie order; the
    simpler prompt is preferred only among finalists, where the rows are enough to tell)."""
    ranked = sorted(standings, key=lambda s: (-s.mean, s.tie))
    return [s.candidate for s in ranked[:keep]]


def within_noise(best: Standing, other: Standing) -> bool:
    """Whether ``other`` trails ``best`` by less than one standard error of their paired
    per-row differences (both answered the same rows)."""
    diffs = [a - b for a, b in zip(best.race, other.race)]
    n = len(diffs)
    if n < 2:
        return best.mean == other.mean
    mean = sum(diffs) / n
    spread = (sum((d - mean) ** 2 for d in diffs) / (n - 1) / n) ** 0.5
    return mean <= spread


def winner(finalists: Sequence[Standing], *, tolerance: float | None = None) -> Standing:
    """The best finalist, or the shortest prompt among those within noise of it (or within
    ``tolerance`` of its score, for ``--pareto``)."""
    best = min(finalists, key=lambda s: (-s.mean, s.tokens, s.tie))
    if tolerance is not None:
        close = [s for s in finalists if s.mean >= best.mean - tolerance]
    else:
        close = [s for s in finalists if within_noise(best, s)]
    return min(close, key=lambda s: (s.tokens, -s.mean, s.tie))
