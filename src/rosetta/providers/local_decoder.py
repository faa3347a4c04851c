"""The embedded model's decoder: llama.cpp in-process, under the ``local/`` provider.

- One model per model file per process, loaded lazily and kept, with up to :data:`CONTEXTS`
  llama.cpp contexts over it; llama.cpp is not thread-safe, so loading and each generation hold
  that model's lock. A prompt goes to the context whose KV cache shares most of it, and that
  cache is reused in whole 32-token blocks (:func:`reuse`): a fixed instruction block is evaluated
  once, even by a caller alternating between prompts, and answers stay bit-identical to a fresh run.
- Generation is one token loop for streamed and whole answers, so both give the same text and
  exact token counts. Stop strings are never emitted, not even in part.
- ``response_format`` ``json_schema`` constrains decoding with a llama.cpp grammar built from the
  schema (:mod:`rosetta.providers.local_grammar`), ``json_object`` with a generic JSON grammar.
- ``logprobs``/``top_logprobs`` return each answer token's log-probability and its best
  alternatives' in OpenAI's shape, from the distribution the decoder chose from (after the
  grammar: a label's odds among the labels the schema allows); whole answers only, not streams.
- ``temperature: 0`` is greedy decoding, deterministic for the same prompt; ``seed`` seeds sampling.
  A greedy answer caught in a loop (its last tokens are one cycle repeated: a short cycle over
  :data:`LOOP_WINDOW` tokens, or a cycle of up to :data:`LOOP_PERIOD` tokens — a whole JSON item —
  three times) ends there with ``finish_reason == "length"``: greedy decoding of a small model
  practically never leaves such a loop, so running on to ``max_tokens`` would give the same
  cut-off answer many seconds later.
"""

from __future__ import annotations

import atexit
import codecs
import ctypes
import functools
import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from rosetta.providers.local_weights import INSTALL_HINT, LocalModel, prompt_style
from rosetta.providers.model_map import offline_litellm

PROVIDER = "local"
CONTEXT_TOKENS = 8192
"""KV-cache size per context (≈150 MB for Gemma 3 270M); longer prompts are refused as context errors."""
BATCH = 32
"""Prompt tokens per llama.cpp batch, and the unit of KV-cache reuse (see :func:`reuse`)."""
CONTEXTS = 3
"""llama.cpp contexts (each its own KV cache, ≈150 MB for Gemma 3 270M; the weights are mapped
once) kept per loaded model. With one, a caller alternating between prompts would evaluate each
whole every time: DSPy asks again through its JSON adapter after each chat answer it cannot
parse, so on a small model its two formats' instructions and demos (~1,500 tokens) alternate on
every answer. llama.cpp's own state save and restore cannot stand in: a restored cache of more
than the model's attention window (512 tokens for Gemma 3) gives different logits."""
KEEP_MIN = 8 * BATCH
"""Prompt tokens worth a KV cache: a prompt sharing fewer than this with the best-matching context
goes to another rather than overwrite this many of its cache (see :func:`pick`)."""
LOOP_WINDOW = 96
"""Tokens a greedy answer must have repeated one cycle for before it is stopped as a loop."""
LOOP_REPEATS = 3
"""...and at least this many whole repeats of a longer cycle."""
LOOP_PERIOD = 64
"""Longest cycle (in tokens) the loop check looks for."""
ODDS_TOKENS = 24
"""First tokens of a grammar-constrained answer whose log-probabilities cover every token the
grammar allows (the rest: the allowed ones among the best candidates), when they are asked for."""


def hard(message: str, model: str) -> Exception:
    """A caller mistake, as litellm's BadRequestError: rosetta's retry policy does not retry it."""
    return offline_litellm().BadRequestError(message=message, model=model, llm_provider=PROVIDER)


# -- loading ----------------------------------------------------------------------------------

@dataclass
class Loaded:
    """A model kept in memory, with the lock every use of it holds."""

    llm: Any  # llama_cpp.Llama
    vocab: Any  # for end-of-generation checks
    style: str  # "completion" | "chat"
    lock: threading.Lock
    local: LocalModel  # what a new context loads
    formatter: Any = None  # llama_cpp Jinja2ChatFormatter for chat models
    contexts: list[Context] = field(default_factory=list)  # least recently used first (see pick)


@dataclass
class Context:
    """One llama.cpp context over the loaded model, and the prompt tokens whose KV cache it holds
    (see :func:`reuse`)."""

    llm: Any  # llama_cpp.Llama
    cached: list[int] = field(default_factory=list)


_models: dict[tuple[str, int, int], Loaded] = {}
_model_locks: dict[tuple[str, int, int], threading.Lock] = {}
_registry_lock = threading.Lock()
_log_callback: Any = None
log = logging.getLogger("rosetta.local.llama_cpp")


def _llama_cpp(model: str) -> ModuleType:
    try:
        import llama_cpp
    except ImportError:
        raise hard(f"{model} runs on llama.cpp, which is not installed: {INSTALL_HINT}", model) from None
    global _log_callback
    if _log_callback is None:  # llama.cpp's own messages go to logging, not straight to stderr
        @llama_cpp.llama_log_callback
        def callback(level: int, text: bytes, user_data: Any) -> None:
            # ggml levels: 1 debug, 2 info, 3 warn, 4 error, 5 continued; llama.cpp warns about trivia
            log.log(logging.ERROR if level == 4 else logging.DEBUG, "%s", text.decode("utf-8", "replace").rstrip())

        _log_callback = callback  # ctypes needs the callback object kept alive
        llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    return llama_cpp


def load_model(local: LocalModel) -> Loaded:
    """The loaded model for ``local``, loading it on first use."""
    stat = local.path.stat()
    key = (str(local.path), stat.st_size, stat.st_mtime_ns)
    with _registry_lock:
        loaded = _models.get(key)
        if loaded is not None:
            return loaded
        lock = _model_locks.setdefault(key, threading.Lock())
    with lock:
        loaded = _models.get(key)
        if loaded is None:
            if not _models:
                atexit.register(_close_all)
            loaded = _models[key] = _new_model(local, lock)
    return loaded


def _close_all() -> None:
    """Free the models while llama_cpp still exists: left to interpreter shutdown, its finalizers
    run after the module's globals are gone and print tracebacks."""
    for loaded in list(_models.values()):
        if loaded.lock.acquire(timeout=5):  # an abandoned stream's thread may still be generating
            for context in loaded.contexts:
                context.llm.close()
            loaded.lock.release()
    _models.clear()


def _new_model(local: LocalModel, lock: threading.Lock) -> Loaded:
    llama_cpp = _llama_cpp(local.id)
    llm = _new_llama(local)
    style = prompt_style(local, llm.metadata)
    formatter = None
    if style == "chat":
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        def text(token: int) -> str:
            return llm._model.token_get_text(token) if token != -1 else ""

        formatter = Jinja2ChatFormatter(template=llm.metadata["tokenizer.chat_template"],
                                        eos_token=text(llm.token_eos()), bos_token=text(llm.token_bos()))
    return Loaded(llm, llama_cpp.llama_model_get_vocab(llm.model), style, lock, local, formatter, [Context(llm)])


def _new_llama(local: LocalModel) -> Any:
    """A llama.cpp context over ``local``'s weights (mapped, so a second one shares them)."""
    from rosetta.project import project_dirs

    llama_cpp = _llama_cpp(local.id)
    # the thread count does not change answers (each dot product is one thread's), only their speed
    threads = project_dirs().local_threads or os.cpu_count() or 1
    n_ctx = min(local.context_window or CONTEXT_TOKENS, CONTEXT_TOKENS)
    try:
        return llama_cpp.Llama(model_path=str(local.path), n_ctx=n_ctx, n_batch=BATCH, n_ubatch=BATCH,
                               n_threads=threads, n_threads_batch=threads, verbose=False)
    except (ValueError, RuntimeError) as exc:
        raise hard(f"llama.cpp cannot load {local.path}: {exc}", local.id) from None


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


def grammar_for(response_format: Any, model: str) -> Any:
    """The llama.cpp grammar ``response_format`` asks for, or None for free text."""
    if response_format is None:
        return None
    if isinstance(response_format, type) and hasattr(response_format, "model_json_schema"):  # a pydantic model
        return _grammar(json.dumps(response_format.model_json_schema()), model)
    if not isinstance(response_format, Mapping):
        raise hard(f"unsupported response_format {response_format!r}", model)
    kind = response_format.get("type")
    if kind in (None, "text"):
        return None
    schema = None
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
    elif kind != "json_object":
        raise hard(f"unsupported response_format type {kind!r} (use json_schema or json_object)", model)
    return _grammar(None if schema is None else json.dumps(schema), model)  # key order is the answer's order


@functools.lru_cache(maxsize=64)
def _cached_grammar(schema: str | None) -> Any:
    from llama_cpp import LlamaGrammar

    from rosetta.providers.local_grammar import schema_to_gbnf

    return LlamaGrammar.from_string(schema_to_gbnf(None if schema is None else json.loads(schema)), verbose=False)


def _grammar(schema: str | None, model: str) -> Any:
    """A grammar per schema text, built once (the schema-to-GBNF conversion is pure Python)."""
    _llama_cpp(model)
    try:
        return _cached_grammar(schema)
    except Exception as exc:  # the converter raises bare Exceptions for refs and features it cannot express
        raise hard(f"cannot turn the response_format JSON Schema into a llama.cpp grammar: {exc}", model) from None


# -- generation -------------------------------------------------------------------------------

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


class GrammarGate:
    """Grammar-constrained decoding as a logits processor that checks the model's top candidates
    first and scans the whole vocabulary only when none of them fits the grammar.

    Adding the grammar to llama-cpp-python's sampler chain applies it to every token of the
    vocabulary at every step (262k for Gemma: ~4x slower than the model itself); llama.cpp's own
    common sampler checks the chosen token first for the same reason. Greedy decoding picks the
    same token either way: the best allowed token is the first allowed one among the best.
    ``full_scan`` scans everything for that many first tokens: a caller who asks for
    log-probabilities gets every allowed token's odds where an answer's label usually is (the
    chosen token is the same; later tokens get the odds among the best candidates).
    """

    def __init__(self, loaded: Loaded, grammar: Any, top_k: int, model: str, full_scan: int = 0) -> None:
        import llama_cpp
        import numpy as np

        self._llama_cpp, self._np = llama_cpp, np
        self._sampler = llama_cpp.llama_sampler_init_grammar(
            loaded.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
        if not self._sampler:
            raise hard("llama.cpp rejected the grammar built from response_format", model)
        self._top_k = top_k if top_k > 0 else 40
        self._full_scan = full_scan
        self._dtype = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        np = self._np
        size = scores.shape[0]
        # the best few, then the best 2048 (~2 ms), then everything (~40 ms)
        self._full_scan -= 1
        for k in (self._top_k, 2048) if self._full_scan < 0 else ():
            if k < size:
                allowed = self._allowed(np.argpartition(-scores, k - 1)[:k], scores)
                if allowed.size:
                    break
        else:
            allowed = self._allowed(np.arange(size, dtype=np.intc), scores)
        masked = np.full_like(scores, -np.inf)
        masked[allowed] = scores[allowed]
        return masked

    def _allowed(self, ids: Any, scores: Any) -> Any:
        llama_cpp, np = self._llama_cpp, self._np
        data = np.empty(ids.shape[0], dtype=self._dtype)
        data["id"], data["logit"], data["p"] = ids, scores[ids], 0.0
        array = llama_cpp.llama_token_data_array(
            data=data.ctypes.data_as(llama_cpp.llama_token_data_p), size=data.shape[0], selected=-1, sorted=False)
        llama_cpp.llama_sampler_apply(self._sampler, ctypes.byref(array))
        return data["id"][np.isfinite(data["logit"])]

    def accept(self, token: int) -> None:
        self._llama_cpp.llama_sampler_accept(self._sampler, token)

    def close(self) -> None:
        if getattr(self, "_sampler", None):
            self._llama_cpp.llama_sampler_free(self._sampler)
            self._sampler = None

    __del__ = close  # a stream nobody read still frees its grammar


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


def pick(loaded: Loaded, tokens: list[int]) -> Context:
    """The context whose KV cache shares the most blocks with ``tokens``, unless it shares fewer
    than :data:`KEEP_MIN` tokens and would lose that many or more: then a new context while there
    are fewer than :data:`CONTEXTS`, else the least recently used.

    So an agent's next input, however long, overwrites the last one's behind the instructions they
    share, while DSPy's JSON retry, which shares a block or two with its chat prompt, leaves that
    prompt's instructions and demos cached for the next chat call."""
    contexts = loaded.contexts
    best = max(reversed(contexts), key=lambda context: shared_blocks(context.cached, tokens))
    shared = shared_blocks(best.cached, tokens)
    if shared < KEEP_MIN <= len(best.cached) - shared:
        if len(contexts) < CONTEXTS:
            best = Context(_new_llama(loaded.local))
            contexts.append(best)
        else:
            best = contexts[0]
    contexts.remove(best)
    contexts.append(best)
    return best


def reuse(context: Context, tokens: list[int]) -> int:
    """How many leading prompt tokens to keep from the context's KV cache, so the answer is
    bit-identical to a fresh evaluation.

    llama.cpp's kernels depend on the batch shape: the same token evaluated alone or inside a batch
    of 5 gets slightly different logits, enough to flip a greedy choice between near-ties. So we keep
    only whole BATCH-sized blocks that a previous prompt evaluated at the same positions (never
    generated tokens) and evaluate the rest in the same blocks a fresh run would use. A repeated
    prompt costs at most BATCH tokens instead of all of them.
    """
    return min(shared_blocks(context.cached, tokens), context.llm.n_tokens)


def shared_blocks(cached: list[int], tokens: list[int]) -> int:
    """The leading tokens of ``tokens`` in whole BATCH blocks that ``cached`` holds too, never all of
    them (the last prompt token is always evaluated: its logits choose the first answer token)."""
    common = 0
    for old, new in zip(cached, tokens):
        if old != new:
            break
        common += 1
    return min(common, len(tokens) - 1) // BATCH * BATCH


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


