"""Grammar-constrained decoding: what a ``response_format`` asks for, its llama.cpp grammar (built
from the JSON Schema by :mod:`rosetta.local.gbnf`, a generic JSON grammar for ``json_object``) and
the logits processor that applies it cheaply."""

from __future__ import annotations

import ctypes
import functools
import json
from collections.abc import Mapping
from typing import Any

from rosetta.local.models import Loaded, hard, llama_cpp_module


def json_grammar(schema: dict[str, Any] | None, model: str) -> Any:
    """The llama.cpp grammar for JSON valid against ``schema`` (None: any JSON; key order is the
    answer's order), built once per schema text (the schema-to-GBNF conversion is pure Python)."""
    llama_cpp_module(model)
    try:
        return _cached_grammar(None if schema is None else json.dumps(schema))
    except Exception as exc:  # the converter raises bare Exceptions for refs and features it cannot express
        raise hard(f"cannot turn the JSON Schema (response_format, or a tool's parameters) into a llama.cpp "
                   f"grammar: {exc}", model) from None


def answer_format(response_format: Any, model: str) -> tuple[bool, dict[str, Any] | None]:
    """Whether ``response_format`` asks for JSON, and the JSON Schema it gives (None: any JSON)."""
    if response_format is None:
        return False, None
    if isinstance(response_format, type) and hasattr(response_format, "model_json_schema"):  # a pydantic model
        return True, response_format.model_json_schema()
    if not isinstance(response_format, Mapping):
        raise hard(f"unsupported response_format {response_format!r}", model)
    kind = response_format.get("type")
    if kind in (None, "text"):
        return False, None
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        return True, spec.get("schema") if isinstance(spec, Mapping) else None
    if kind != "json_object":
        raise hard(f"unsupported response_format type {kind!r} (use json_schema or json_object)", model)
    return True, None


@functools.lru_cache(maxsize=64)
def _cached_grammar(schema: str | None) -> Any:
    from llama_cpp import LlamaGrammar

    from rosetta.local.gbnf import schema_to_gbnf

    return LlamaGrammar.from_string(schema_to_gbnf(None if schema is None else json.loads(schema)), verbose=False)


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
