"""Racing candidates against a prior: challengers screened on a third of dev, a paired test on the rest.

dev is split in two before the first call (:func:`split_dev`): a third *screening* rows, the rest
*confirmation* rows. The *prior* — the nearest-demos prompt where a pool exists, else the better on
the screening rows of the seeded prompts (the unoptimized render, the plain k-shot prompt) — answers
all of dev first, and is never cut. Then challengers race on the screening rows by successive
halving: every challenger of rung 0 answers the same first two rows (why two: :data:`FIRST_ROWS`);
the best third go on to rung 1, which adds rows, and so on until the last rung has answered every
screening row. The best challenger then answers the confirmation rows, and replaces the prior only
when a one-sided paired test on those rows, which chose nothing, says it is better
(:func:`replaces`); a tie keeps the prior. Label odds may screen; the test uses the plain metric.

Rows already answered are never asked again, so a rung costs only its new rows. The plan (how
many candidates, how many rows per rung) is fixed before the first call from the dev size and the
budget, and spends the budget: the answers a cut in thirds leaves over buy more candidates, in
rung 0 first.

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


CONFIDENCE = 0.95
"""How sure the paired test on confirmation rows must be that a challenger beats the prior (one-sided)."""


@dataclass(frozen=True)
class Plan:
    """The answers of a search: the ``anchors`` (the seeded prompts the prior is the best of)
    answer all of dev first; then challengers race on the screening rows, ``keep[k]`` of them
    answering up to ``rows[k]``; then the best challenger answers the ``confirm`` rows."""

    rows: tuple[int, ...]  # screening rows answered by the end of each rung (the last: all of them)
    keep: tuple[int, ...]  # challengers in each rung (0: none, the prior alone)
    confirm: int = 0  # confirmation rows: the rest of dev
    anchors: int = 1

    @property
    def candidates(self) -> int:
        return self.anchors + self.keep[0]

    @property
    def dev(self) -> int:
        return self.rows[-1] + self.confirm

    def calls(self) -> int:
        """Answers the search needs, retries aside."""
        return self.anchors * self.dev + self.answers_after(-1, self.keep[0])

    def widened(self, rung: int, entrants: int, spare: int) -> Plan:
        """This plan with as many more challengers in ``rung`` (at most ``entrants``, those that
        finished the rung before) as ``spare`` answers pay for; the rungs after keep theirs."""
        step = self.rows[rung] - self.rows[rung - 1]
        extra = max(0, min(spare // step, entrants - self.keep[rung]))
        keep = (*self.keep[:rung], self.keep[rung] + extra, *self.keep[rung + 1:])
        return Plan(self.rows, keep, self.confirm, self.anchors) if extra else self

    def answers_after(self, rung: int, entrants: int) -> int:
        """Answers the challengers' rungs after ``rung`` (-1: all of them) and the confirmation need
        when ``entrants`` challengers finish it, retries aside."""
        later = sum(min(keep, entrants) * (rows - before) for keep, rows, before
                    in zip(self.keep[rung + 1:], self.rows[rung + 1:], (0, *self.rows)[rung + 1:]))
        return later + min(1, entrants, self.keep[-1]) * self.confirm

    def describe(self) -> dict[str, Any]:
        return {"candidates": self.candidates, "anchors": self.anchors, "rows": list(self.rows),
                "keep": list(self.keep), "confirm": self.confirm, "calls": self.calls()}


def plan(dev_size: int, budget: int | None, candidates: int | None = None, *, halving: bool = True,
         first: int = FIRST_ROWS, anchors: int = 1) -> Plan | None:
    """The search over the most candidates (at most ``candidates``, the ``anchors`` among them, as
    many as ``candidates`` and the budget allow) whose answers fit ``budget``: the anchors answer
    all of dev, then challengers race on the screening rows (:func:`split_dev`), rung 0 answering
    ``first`` of them and each later rung about three times as many, up to all of them, and the best
    one answers the confirmation rows; the answers a third-by-third cut leaves over buy more
    challengers (see :func:`_spent`). Without a budget, ``candidates`` (or 24) race. None when not
    even the prior can answer all of dev. ``halving=False``: every challenger answers every
    screening row."""
    if dev_size <= 0:
        return None
    cap = candidates or (MAX_CANDIDATES if budget is not None else UNBOUNDED_CANDIDATES)
    anchors = max(1, min(anchors, cap, budget // dev_size if budget is not None else anchors))
    screen = screening_rows(dev_size)
    rows = rungs(screen, first) if halving else (screen,)
    confirm = dev_size - screen
    if budget is None:
        return _uncut(_thirds(rows, cap - anchors, anchors, confirm))
    fits = [n for n in range(cap - anchors + 1) if _thirds(rows, n, anchors, confirm).calls() <= budget]
    if not fits:
        return None
    return _uncut(_spent(_thirds(rows, max(fits), anchors, confirm), budget, cap - anchors))


def screening_rows(dev_size: int) -> int:
    """How many of dev's rows screen (the rest confirm): a third, rounded up. The screening only
    has to find a challenger, and the old race chose its winner on about a third of dev anyway (its
    last rung that cut); the paired test needs every row it can get: with 50 dev rows, 33 confirm."""
    return -(-dev_size // 3)


def _uncut(race: Plan) -> Plan:
    """``race`` without the screening rungs that cut no challenger (the next rung keeps them all):
    each would only be a decision on fewer rows that decides nothing, e.g. one challenger answering
    the screening rows in three steps. The same challengers answer the same rows, so the calls are
    unchanged."""
    kept = [k for k in range(len(race.rows)) if k == len(race.rows) - 1 or race.keep[k + 1] < race.keep[k]]
    return Plan(tuple(race.rows[k] for k in kept), tuple(race.keep[k] for k in kept), race.confirm, race.anchors)


def rungs(dev_size: int, first: int) -> tuple[int, ...]:
    """Rows answered by the end of each rung: ``first``, then about :data:`ETA` times more per
    rung, the last all ``dev_size`` (a single rung when ``first`` is within a factor ETA of it)."""
    first = max(1, min(first, dev_size))
    depth = round(math.log(dev_size / first, ETA))  # rungs after the first
    if depth <= 0:
        return (dev_size,)
    return tuple(sorted({round(first * (dev_size / first) ** (k / depth)) for k in range(depth)} | {dev_size}))


def _thirds(rows: tuple[int, ...], challengers: int, anchors: int, confirm: int) -> Plan:
    """``challengers`` racing, a third of them kept at each cut, at least one."""
    keep = tuple(max(1, math.ceil(challengers / ETA ** k)) if challengers else 0 for k in range(len(rows)))
    return Plan(rows, keep, confirm, anchors)


def _spent(race: Plan, budget: int, cap: int) -> Plan:
    """``race`` with the answers it leaves unspent turned into challengers: first more in rung 0
    (up to ``cap``), then more in each later rung in turn (never more than the rung before kept).
    One more challenger in thirds would often need another finalist (a whole pass over the
    screening rows), so without this up to a quarter of the budget went unused. The race adds
    challengers to a rung by the same rule when its answers cost fewer calls than were kept for them
    (:meth:`Plan.widened`), so a plan that has spent its budget here is run as it stands."""
    if not race.keep[0]:
        return race
    keep = list(race.keep)
    keep[0] += max(0, min((budget - race.calls()) // race.rows[0], cap - keep[0]))
    race = Plan(race.rows, tuple(keep), race.confirm, race.anchors)
    for rung in range(1, len(race.rows)):
        race = race.widened(rung, race.keep[rung - 1], budget - race.calls())
    return race


def dev_order(examples: Sequence[Any], seed: int, label_of: Callable[[Any], str] | None) -> list[Any]:
    """One seeded order of dev with labels interleaved (the most frequent label first, each label's
    rows shuffled), so the first rows cover several labels."""
    return _interleave(_groups(examples, seed, label_of))


def split_dev(examples: Sequence[Any], seed: int,
              label_of: Callable[[Any], str] | None) -> tuple[list[Any], list[Any]]:
    """dev's screening rows (:func:`screening_rows` of them) and confirmation rows, each label's
    rows dealt to both in proportion, so both cover the labels alike; each in the order every
    candidate answers it (labels interleaved, as :func:`dev_order`)."""
    groups = _groups(examples, seed, label_of)
    size, screen = len(examples), screening_rows(len(examples))
    halves: tuple[dict[str, list[Any]], dict[str, list[Any]]] = ({}, {})
    position = 0
    for label, rows in groups.items():  # the screening rows spread evenly over the rows, label by label
        for row in rows:
            screens = (position + 1) * screen // size > position * screen // size
            halves[0 if screens else 1].setdefault(label, []).append(row)
            position += 1
    return _interleave(halves[0]), _interleave(halves[1])


def _groups(examples: Sequence[Any], seed: int, label_of: Callable[[Any], str] | None) -> dict[str, list[Any]]:
    """dev's rows by label, each label's shuffled with ``seed``, the most frequent label first (one
    group of all rows, shuffled, without labels)."""
    rng = random.Random(seed)
    if label_of is None:
        rows = list(examples)
        rng.shuffle(rows)
        return {"": rows}
    groups: dict[str, list[Any]] = defaultdict(list)
    for example in examples:
        groups[label_of(example.output)].append(example)
    for rows in groups.values():
        rng.shuffle(rows)
    return {label: groups[label] for label in sorted(groups, key=lambda label: (-len(groups[label]), label))}


def _interleave(groups: dict[str, list[Any]]) -> list[Any]:
    """The groups' rows taking the labels in turn, in the groups' order."""
    longest = max((len(rows) for rows in groups.values()), default=0)
    return [rows[position] for position in range(longest) for rows in groups.values() if position < len(rows)]


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
        return bool(best.mean == other.mean)
    mean = sum(diffs) / n
    spread = (sum((d - mean) ** 2 for d in diffs) / (n - 1) / n) ** 0.5
    return bool(mean <= spread)


def winner(finalists: Sequence[Standing], *, tolerance: float | None = None) -> Standing:
    """The best finalist, or the shortest prompt among those within noise of it (or within
    ``tolerance`` of its score, for ``--pareto``)."""
    best = min(finalists, key=lambda s: (-s.mean, s.tokens, s.tie))
    if tolerance is not None:
        close = [s for s in finalists if s.mean >= best.mean - tolerance]
    else:
        close = [s for s in finalists if within_noise(best, s)]
    return min(close, key=lambda s: (s.tokens, -s.mean, s.tie))


def one_sided_p(differences: Sequence[float]) -> float:
    """The p-value of a one-sided paired sign-flip test that the per-row ``differences``
    (challenger − prior, on the same rows) have a positive mean: the chance, were each difference's
    sign a coin flip, of a total at least the one observed. Exact (every sign pattern, counted by
    their totals) unless the totals grow too many, then 20,000 seeded draws, so the same rows
    always give the same answer. 1.0 for no rows; a total of 0 or less is never significant."""
    values = [round(d, 9) for d in differences if abs(d) > 1e-12]
    observed = round(sum(values), 9)
    if observed <= 0:
        return 1.0
    counts: dict[float, int] = {0.0: 1}
    for value in values:
        step: dict[float, int] = defaultdict(int)
        for total, ways in counts.items():
            step[round(total + value, 9)] += ways
            step[round(total - value, 9)] += ways
        counts = step
        if len(counts) > 200_000:
            break
    else:
        return float(sum(ways for total, ways in counts.items() if total >= observed - 1e-9) / 2 ** len(values))
    rng = random.Random("one_sided_p")
    draws = 20_000
    hits = sum(1 for _ in range(draws) if sum(v if rng.random() < 0.5 else -v for v in values) >= observed - 1e-9)
    return (hits + 1) / (draws + 1)


def replaces(challenger: Sequence[float], prior: Sequence[float], confidence: float = CONFIDENCE) -> tuple[bool, float]:
    """Whether the challenger's plain scores beat the prior's on the same confirmation rows by the
    one-sided paired test at ``confidence``, and its p-value; a tie keeps the prior."""
    p = one_sided_p([a - b for a, b in zip(challenger, prior, strict=True)])
    return p <= 1 - confidence, p
