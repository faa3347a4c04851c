"""Racing candidates: successive halving on shared dev rows, planned to fit the call budget.

Every candidate of rung 0 answers the same first few rows of one fixed dev order; the best third
(fewer, when spare calls widened rung 0) go on to rung 1, which adds rows, and so on until the
last rung, where the finalists answer the whole dev split. Rows already answered are never asked
again, so rung ``k`` costs only its new rows. The plan (how many candidates, how many rows per
rung) is fixed before the first call from the dev size and the budget, so cached answers, resumes
and workers never change what is tried.

:func:`plan` sizes the race; :func:`dev_order` interleaves labels so a rung's few rows cover
several; :func:`leaders` and :func:`winner` choose on equal rows, preferring the simpler prompt
(fewer tokens) when candidates are within noise of each other.
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
MIN_ROWS = {"odds": 2, "metric": 3}
"""Rows a candidate answers in rung 0, at least: two when a row's score is the correct label's
probability, three when it is the plain metric (often 0 or 1, where two rows rank little)."""
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

    def answers_after(self, rung: int, entrants: int) -> int:
        """Answers the rungs after ``rung`` need when ``entrants`` candidates finish it, retries aside."""
        return sum(min(keep, entrants) * (rows - before) for keep, rows, before
                   in zip(self.keep[rung + 1:], self.rows[rung + 1:], self.rows[rung:]))

    def describe(self) -> dict[str, Any]:
        return {"candidates": self.candidates, "rows": list(self.rows), "keep": list(self.keep),
                "calls": self.calls()}


def plan(dev_size: int, budget: int | None, candidates: int | None = None, *, halving: bool = True,
         scoring: str = "metric") -> Plan | None:
    """The race with the most candidates (at most ``candidates``) whose answers fit ``budget``;
    among equals, the one with fewer rungs (more rows per decision). Without a budget, the race
    halves until a few finalists are left. None when not even one candidate can answer all of
    dev. ``halving=False``: every candidate answers all of dev."""
    if dev_size <= 0:
        return None
    cap = candidates or (MAX_CANDIDATES if budget is not None else UNBOUNDED_CANDIDATES)
    best: Plan | None = None
    for depth in range(8 if halving else 1):
        rows = tuple(math.ceil(dev_size / ETA ** (depth - k)) for k in range(depth + 1))
        if depth and (rows[0] < MIN_ROWS[scoring] or len(set(rows)) < len(rows)):
            break
        if budget is None:  # no budget: halve down to the last few finalists
            if depth and ETA ** depth > cap:
                break
            best = _plan(rows, cap)
            continue
        count = _most_candidates(rows, budget, cap)
        widest = _widened(_plan(rows, count), budget, cap) if count else None
        if widest is not None and (best is None or widest.candidates > best.candidates):
            best = widest
    return best


def _plan(rows: tuple[int, ...], count: int) -> Plan:
    return Plan(rows, tuple(max(1, math.ceil(count / ETA ** k)) for k in range(len(rows))))


def _widened(race: Plan, budget: int, cap: int) -> Plan:
    """The calls a halving plan leaves unspent buy more rung-0 candidates, the later rungs keeping
    as many: one more candidate in thirds would often need another finalist (a whole dev pass), so
    up to a quarter of the budget went unused."""
    extra = min((budget - race.calls()) // race.rows[0], cap - race.candidates)
    return Plan(race.rows, (race.keep[0] + extra, *race.keep[1:])) if extra > 0 else race


def _most_candidates(rows: tuple[int, ...], budget: int | None, cap: int) -> int:
    if budget is None:
        return cap
    count = 0
    for trying in range(1, cap + 1):
        if _plan(rows, trying).calls() <= budget:
            count = trying
    return count


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

    @property
    def mean(self) -> float:
        return sum(self.race) / len(self.race) if self.race else 0.0

    @property
    def plain_mean(self) -> float:
        return sum(self.plain) / len(self.plain) if self.plain else 0.0


def leaders(standings: Sequence[Standing], keep: int) -> list[int]:
    """The ``keep`` best candidates on the same rows (ties: the earlier candidate, so the baselines;
    the simpler prompt is preferred only among finalists, where the rows are enough to tell)."""
    ranked = sorted(standings, key=lambda s: (-s.mean, s.candidate))
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
    best = min(finalists, key=lambda s: (-s.mean, s.tokens, s.candidate))
    if tolerance is not None:
        close = [s for s in finalists if s.mean >= best.mean - tolerance]
    else:
        close = [s for s in finalists if within_noise(best, s)]
    return min(close, key=lambda s: (s.tokens, -s.mean, s.candidate))
