"""Nearest demos: pick, per request, the labeled examples whose inputs read most like it.

A small model copies the shape and often the answer of the examples in front of it, so the
examples most similar to the request help it far more than a fixed set (DSPy's KNNFewShot does
the same with an embedding model). Similarity here is lexical — TF-IDF cosine over lower-cased
word tokens, IDF from the pool — because it needs no model and no network, and it is exact:
pure-Python sums in a fixed order give the same ranking on every machine, so a prompt scores the
same at run time as it did during the search. Ties keep the pool's order.
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
    if count <= 0 or not pool:
        return []
    index = _index(tuple(pool))
    idf, vectors = index
    wanted = _vector(Counter(_TOKEN.findall(query.lower())), idf)
    scores = [sum(weight * vector.get(token, 0.0) for token, weight in sorted(wanted.items())) for vector in vectors]
    return sorted(range(len(pool)), key=lambda i: (-scores[i], i))[:count]


@lru_cache(maxsize=32)
def _index(pool: tuple[str, ...]) -> tuple[dict[str, float], list[dict[str, float]]]:
    counts = [Counter(_TOKEN.findall(text.lower())) for text in pool]
    documents = Counter(token for count in counts for token in count)
    idf = {token: math.log((len(pool) + 1) / (n + 1)) + 1.0 for token, n in documents.items()}
    return idf, [_vector(count, idf) for count in counts]


def _vector(counts: Counter, idf: dict[str, float]) -> dict[str, float]:
    """Sublinear TF × IDF, unit length; tokens the pool never uses carry no weight."""
    weights = {token: (1.0 + math.log(n)) * idf[token] for token, n in sorted(counts.items()) if token in idf}
    norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
    return {token: w / norm for token, w in weights.items()}
