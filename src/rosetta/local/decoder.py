"""The embedded model's decoding loop: one token loop for streamed and whole answers, so both give
the same text and exact token counts.

- Stop strings are never emitted, not even in part.
- ``temperature: 0`` is greedy decoding, deterministic for the same prompt; ``seed`` seeds sampling.
  A greedy answer caught in a loop (its last tokens are one cycle repeated: a short cycle over
  :data:`LOOP_WINDOW` tokens, or a cycle of up to :data:`LOOP_PERIOD` tokens — a whole JSON item —
  three times) ends there with ``finish_reason == "length"``: greedy decoding of a small model
  practically never leaves such a loop, so running on to ``max_tokens`` would give the same
  cut-off answer many seconds later.
- ``logprobs``/``top_logprobs`` return each answer token's log-probability and its best
  alternatives' in OpenAI's shape, from the distribution the decoder chose from (after the
  grammar: a label's odds among the labels the schema allows); whole answers only, not streams.
"""

from __future__ import annotations

import codecs
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rosetta.local.grammar import GrammarGate
from rosetta.local.kv_cache import pick, reuse
from rosetta.local.models import BATCH, Loaded
from rosetta.local.tool_calls import ToolTurns

LOOP_WINDOW = 96
"""Tokens a greedy answer must have repeated one cycle for before it is stopped as a loop."""
LOOP_REPEATS = 3
"""...and at least this many whole repeats of a longer cycle."""
LOOP_PERIOD = 64
"""Longest cycle (in tokens) the loop check looks for."""
ODDS_TOKENS = 24
"""First tokens of a grammar-constrained answer whose log-probabilities cover every token the
grammar allows (the rest: the allowed ones among the best candidates), when they are asked for."""


@dataclass
class Request:
    """One generation, fully checked and tokenized, ready to run under the model's lock."""

    model: str  # "local/<name>"
    loaded: Loaded
    tokens: list[int]
    max_tokens: int
    stop: list[str]
    sampling: dict[str, Any]
    seed: int
    gate: GrammarGate | None  # constrains decoding to a JSON grammar
    strip: bool  # drop the answer's leading whitespace (completion style)
    created: int = field(default_factory=lambda: int(time.time()))
    logprobs: TokenOdds | None = None  # set when the caller asked for log-probabilities
    tools: ToolTurns | None = None  # set when the request offers tools: the reply is read as a call or the answer


@dataclass(frozen=True)
class Piece:
    text: str
    finish: str | None = None  # set on the last piece, with the token counts
    prompt_tokens: int = 0
    completion_tokens: int = 0


def generate(request: Request, cancelled: threading.Event | None = None) -> Iterator[Piece]:
    """The answer, piece by piece; the caller holds the model's lock for the whole iteration."""
    loaded, stop, gate = request.loaded, request.stop, request.gate
    context = pick(loaded, request.tokens)
    llm = context.llm
    llm.set_seed(request.seed)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    raw, sent, count, finish = "", 0, 0, "length"
    answer: list[int] = []
    greedy = request.sampling["temp"] <= 0
    llm.n_tokens = reuse(context, request.tokens)
    context.cached = []  # until the new prompt is evaluated
    odds = request.logprobs
    processors = [p for p in (gate, odds) if p is not None]
    tokens = llm.generate(request.tokens, logits_processor=processors or None, **request.sampling)
    try:
        for token in tokens:
            if not context.cached:
                context.cached = request.tokens[:len(request.tokens) // BATCH * BATCH]
            if _is_end(loaded, token):
                finish = "stop"
                break
            count += 1
            if gate is not None:
                gate.accept(token)
            if odds is not None:
                odds.record(token)
            raw += decoder.decode(llm.detokenize([token]))
            hits = [i for i in (raw.find(s) for s in stop) if i >= 0]
            if hits:
                raw, finish = raw[:min(hits)], "stop"
                break
            answer.append(token)
            if count >= request.max_tokens or (cancelled is not None and cancelled.is_set()) \
                    or (greedy and looping(answer)):
                break
            text = raw.lstrip() if request.strip else raw
            ready = len(text) - _held_back(text, stop)
            if gate is not None:  # the grammar may end in whitespace; the JSON does not
                ready = min(ready, len(text.rstrip()))
            if ready > sent:
                yield Piece(text[sent:ready])
                sent = ready
    finally:
        tokens.close()
        if gate is not None:
            gate.close()
    if finish == "length":
        raw += decoder.decode(b"", final=True)
    text = raw.lstrip() if request.strip else raw
    if gate is not None:
        text = text.rstrip()
    yield Piece(text[sent:], finish, len(request.tokens), count)


class TokenOdds:
    """A logits processor placed after the grammar that keeps each step's scores, so the token
    chosen from them gets its log-probability and the ``top`` best alternatives' (OpenAI's
    ``logprobs.content`` entries). The scores are copied: later samplers reorder them in place."""

    def __init__(self, llm: Any, top: int) -> None:
        import numpy as np

        self._np, self._llm, self.top = np, llm, max(0, top)
        self._scores: Any = None
        self.content: list[dict[str, Any]] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        self._scores = self._np.array(scores, dtype=self._np.float64)
        return scores

    def record(self, token: int) -> None:
        np, scores = self._np, self._scores
        finite = np.isfinite(scores)
        peak = scores[finite].max()
        total = peak + np.log(np.exp(scores[finite] - peak).sum())
        count = min(self.top, int(finite.sum()))
        best = np.argpartition(-scores, count - 1)[:count] if count else np.array([], dtype=int)
        best = best[np.argsort(-scores[best], kind="stable")]
        self.content.append({**self._token(token, scores[token] - total),
                             "top_logprobs": [self._token(int(i), scores[i] - total) for i in best]})

    def _token(self, token: int, logprob: float) -> dict[str, Any]:
        data = self._llm.detokenize([token])
        return {"token": data.decode("utf-8", "replace"), "logprob": float(max(logprob, -9999.0)),
                "bytes": list(data)}


def looping(tokens: list[int], window: int = LOOP_WINDOW, longest: int = LOOP_PERIOD,
            repeats: int = LOOP_REPEATS) -> bool:
    """Whether the answer ends in one cycle of at most ``longest`` tokens, repeated over the last
    ``window`` tokens and at least ``repeats`` times."""
    for period in range(1, min(longest, len(tokens) // repeats) + 1):
        span = max(window, repeats * period)
        if len(tokens) >= span and tokens[-span + period:] == tokens[-span:-period]:
            return True
    return False


def _is_end(loaded: Loaded, token: int) -> bool:
    import llama_cpp

    return bool(llama_cpp.llama_vocab_is_eog(loaded.vocab, token))


def _held_back(text: str, stops: list[str]) -> int:
    """How many trailing characters could be the start of a stop string (not to be sent yet)."""
    held = 0
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), held, -1):
            if text.endswith(stop[:size]):
                held = size
                break
    return held
