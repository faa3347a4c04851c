"""Fixed demo sets for the search to race: train's first rows, then seeded draws taking turns —
label-balanced, diverse (by word overlap), bootstrapped and plain samples. Drawn once per study
from the seed, so every process builds the same sets (:mod:`rosetta.optimize.space` names them)."""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from rosetta.parts import Demo


def draw_demo_sets(labeled: tuple[Demo, ...], bootstrapped: tuple[Demo, ...], size: int, count: int,
               seed: int, label_of: Callable[[Any], str] | None,
               ) -> tuple[tuple[tuple[str, ...], ...], dict[int, int], tuple[str, ...]]:
    """Train's first ``size`` rows as listed (curated datasets often open with their clearest
    cases), then seeded draws taking turns: label-balanced (when the output has a label), diverse,
    bootstrapped (when there are any) and plain samples. Also which sets are label-balanced, and
    over how many labels, and each set's kind ("first-k", then one of :data:`DRAWN_SETS`)."""
    rng = random.Random(seed)
    sets: list[tuple[str, ...]] = [tuple(d.id for d in labeled[:size])] if labeled else []
    kinds_of: list[str] = ["first-k"] if labeled else []
    balanced: dict[int, int] = {}
    groups: dict[str, list[Demo]] = defaultdict(list)
    for demo in labeled:
        groups[label_of(demo.output) if label_of else ""].append(demo)
    kinds = [kind for kind, usable in (("label-balanced", len(groups) > 1), ("diverse", len(labeled) > size),
                                       ("bootstrapped", bool(bootstrapped)), ("sampled", True)) if usable]
    words = {d.id: _words(d.inputs) for d in labeled}
    attempts = 0
    while len(sets) < count and attempts < count * 20:
        kind = kinds[attempts % len(kinds)]
        attempts += 1
        if kind == "label-balanced":
            chosen = _balanced(groups, size, rng)
        elif kind == "diverse":
            chosen = _diverse(labeled, words, size, rng)
        elif kind == "bootstrapped":
            chosen = rng.sample(list(bootstrapped), min(size, len(bootstrapped)))
            chosen += rng.sample(list(labeled), min(size - len(chosen), len(labeled)))
        else:
            chosen = rng.sample(list(labeled), min(size, len(labeled)))
        candidate = tuple(d.id for d in chosen)
        if candidate and candidate not in sets:
            if kind == "label-balanced":
                balanced[len(sets)] = len(groups)
            sets.append(candidate)
            kinds_of.append(kind)
    return tuple(sets), balanced, tuple(kinds_of)


def _balanced(groups: dict[str, list[Demo]], size: int, rng: random.Random) -> list[Demo]:
    """``size`` rows taking the labels in turn (in a shuffled order), a random unused row of each."""
    pools = {label: rng.sample(rows, len(rows)) for label, rows in groups.items()}
    labels = sorted(pools)
    rng.shuffle(labels)
    chosen: list[Demo] = []
    while len(chosen) < size and any(pools.values()):
        for label in labels:
            if pools[label] and len(chosen) < size:
                chosen.append(pools[label].pop())
    return chosen


def _diverse(labeled: tuple[Demo, ...], words: dict[str, frozenset[str]], size: int,
             rng: random.Random) -> list[Demo]:
    """``size`` rows spread over the inputs: a random first row, then each time the row least like
    (by word overlap) the closest one already chosen."""
    chosen = [rng.choice(labeled)]
    while len(chosen) < min(size, len(labeled)):
        rest = [d for d in labeled if d not in chosen]
        chosen.append(max(rest, key=lambda d: (min(_distance(words[d.id], words[c.id]) for c in chosen),
                                               rng.random())))
    return chosen


def _words(inputs: dict[str, Any]) -> frozenset[str]:
    return frozenset(re.findall(r"\w+", json.dumps(inputs, ensure_ascii=False).lower()))


def _distance(a: frozenset[str], b: frozenset[str]) -> float:
    return 1.0 - len(a & b) / len(a | b) if a or b else 0.0
