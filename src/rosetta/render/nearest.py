"""Nearest demos: pick, per request, the labeled examples whose inputs read most like it.

A small model copies the shape and often the answer of the examples in front of it, so the
examples most similar to the request help it far more than a fixed set (DSPy's KNNFewShot does
the same with an embedding model). Similarity here is lexical — TF-IDF cosine over lower-cased
word tokens, IDF from the pool — because it needs no model and no network, and it is exact:
pure-Python sums in a fixed order give the same ranking on every machine, so a prompt scores the
same at run time as it did during the search. Ties keep the pool's order.

:func:`rank` is the retrieval policy beyond plain nearness, each part a knob the search can set:
diversity (maximal marginal relevance: each next demo trades its similarity to the request against
its largest similarity to the demos already picked, so near-duplicates do not fill the prompt) and
label balance (the picks take the labels in turn, most similar label first, so the model sees more
than one answer).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

_TOKEN = re.compile(r"[a-z0-9]+")


def input_text(inputs: Mapping[str, Any]) -> str:
    """The text of a request's (or an example's) inputs, in their given order."""
    return "\n".join(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
                     for value in inputs.values() if value is not None)


def nearest(query: str, pool: Sequence[str], count: int) -> list[int]:
    """Indexes of the ``count`` pool texts most similar to ``query``, most similar first."""
    return rank(query, pool, count)


def rank(query: str, pool: Sequence[str], count: int, *, diversity: float = 0.0,
         labels: Sequence[str] | None = None) -> list[int]:
    """Indexes of ``count`` pool texts to show with ``query``, the first picked first: by similarity
    alone by default; with ``diversity`` in (0, 1] each next pick maximises ``(1 - diversity) *
    similarity - diversity * (its largest similarity to those picked)``; with ``labels`` (one per
    pool text) the picks take the labels in turn, in the order of each label's most similar text.
    Ties keep the pool's order."""
    if count <= 0 or not pool:
        return []
    idf, vectors = _index(tuple(pool))
    wanted = _vector(Counter(_TOKEN.findall(query.lower())), idf)
    similarity = [_dot(wanted, vector) for vector in vectors]
    order = sorted(range(len(pool)), key=lambda i: (-similarity[i], i))
    if not diversity and labels is None:
        return order[:count]
    turns = list(dict.fromkeys(labels[i] for i in order)) if labels is not None else [None]
    position = {i: rank_ for rank_, i in enumerate(order)}
    picked: list[int] = []
    remaining, turn = list(order), 0
    while len(picked) < count and remaining:
        turn %= len(turns)
        allowed = [i for i in remaining if labels is None or labels[i] == turns[turn]]
        if not allowed:  # this label has no text left: the next label takes its turn
            del turns[turn]
            continue
        turn += 1

        def value(i: int) -> tuple[float, int]:
            overlap = max((_dot(vectors[i], vectors[j]) for j in picked), default=0.0)
            return (1.0 - diversity) * similarity[i] - diversity * overlap, -position[i]

        best = max(allowed, key=value)
        picked.append(best)
        remaining.remove(best)
    return picked


def _dot(left: dict[str, float], right: dict[str, float]) -> float:
    """Cosine of two unit vectors, summed in token order (the same on every machine)."""
    return sum(weight * right.get(token, 0.0) for token, weight in sorted(left.items()))


@lru_cache(maxsize=32)
def _index(pool: tuple[str, ...]) -> tuple[dict[str, float], list[dict[str, float]]]:
    counts = [Counter(_TOKEN.findall(text.lower())) for text in pool]
    documents = Counter(token for count in counts for token in count)
    idf = {token: math.log((len(pool) + 1) / (n + 1)) + 1.0 for token, n in documents.items()}
    return idf, [_vector(count, idf) for count in counts]


def _vector(counts: Counter[str], idf: dict[str, float]) -> dict[str, float]:
    """Sublinear TF × IDF, unit length; tokens the pool never uses carry no weight."""
    weights = {token: (1.0 + math.log(n)) * idf[token] for token, n in sorted(counts.items()) if token in idf}
    norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
    return {token: w / norm for token, w in weights.items()}
