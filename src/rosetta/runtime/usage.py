"""What a response used and cost: its token counts, those its provider's prompt cache read or wrote,
and litellm's price for them (which knows the cache rates). Kept apart from the retry plan that sums
them per run (:mod:`rosetta.runtime.invoke`) and the tracing that records them per call."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rosetta.render.prompt import RenderedPrompt


def add_usage(total: dict[str, int], response: object) -> None:
    """Add a response's token counts to ``total``: prompt, completion and total, and of the prompt's
    the ``cached_tokens`` read from the provider's prompt cache (OpenAI's
    ``prompt_tokens_details.cached_tokens``, Anthropic's ``cache_read_input_tokens``: litellm gives
    both) and the ``cache_write_tokens`` written to it (Anthropic's ``cache_creation_input_tokens``).
    A count the provider did not give is left out, never guessed."""
    usage = getattr(response, "usage", None)
    if usage is None:
        return
    details = getattr(usage, "prompt_tokens_details", None)
    found = {key: getattr(usage, key, None) for key in ("prompt_tokens", "completion_tokens", "total_tokens")}
    read = getattr(details, "cached_tokens", None)
    found["cached_tokens"] = read if isinstance(read, int) else getattr(usage, "cache_read_input_tokens", None)
    found["cache_write_tokens"] = getattr(usage, "cache_creation_input_tokens", None)
    for key, value in found.items():
        if isinstance(value, int) and not isinstance(value, bool) and (value or key not in CACHE_COUNTS):
            total[key] = total.get(key, 0) + value


CACHE_COUNTS = ("cached_tokens", "cache_write_tokens")
"""Usage keys kept only when the provider reported a cache at work (a zero says nothing new)."""


def response_cost(response: object) -> float:
    """litellm's price of ``response`` in USD (its map's cache rates included); 0 where it has none."""
    try:
        from rosetta.local.litellm_offline import import_litellm

        return float(import_litellm().completion_cost(completion_response=response) or 0.0)
    except Exception:  # unknown price (local and custom models): cost is simply not known
        return 0.0


@dataclass(frozen=True)
class CallPrice:
    """What one call of a prompt costs in USD at litellm's prices: the first, which writes the cached
    prefix (at the host's cache-write rate where it has one), and each later one within the cache's
    lifetime, which reads it — the steady state, what a prompt in service costs per call."""

    first: float
    steady: float

    def of(self, calls: int) -> float:
        """USD for ``calls`` calls in a row: the first writes the prefix, the others read it."""
        return 0.0 if calls <= 0 else self.first + (calls - 1) * self.steady


def call_price(prompt: RenderedPrompt, output_tokens: int | None = None) -> CallPrice:
    """:class:`CallPrice` of ``prompt`` answering ``output_tokens`` (default: its ``max_tokens``): the
    cached prefix (:attr:`~rosetta.render.prompt.RenderedPrompt.cache_prefix`, where the host caches
    it) at the cache rates, the rest at the input rate. Zero for a model litellm has no price for."""
    rates = _rates(prompt.model)
    if rates is None:
        return CallPrice(0.0, 0.0)
    read, written, per_input = rates["cache_read_input_token_cost"], rates["cache_creation_input_token_cost"], \
        rates["input_cost_per_token"] or 0.0
    prefix = prompt.cache_prefix
    cached = prefix.tokens if prefix is not None and prefix.cached and read is not None else 0
    answer = prompt.generation.get("max_tokens", 0) if output_tokens is None else output_tokens
    rest = (prompt.tokens.get("total", 0) - cached) * per_input + answer * (rates["output_cost_per_token"] or 0.0)
    first = rest + cached * (written if written is not None else per_input)
    return CallPrice(first, rest + cached * (read or 0.0))


PRICES = ("input_cost_per_token", "output_cost_per_token", "cache_read_input_token_cost",
          "cache_creation_input_token_cost")
"""The per-token prices :func:`call_price` reads from litellm's map."""


@functools.lru_cache(maxsize=128)
def _rates(model: str) -> dict[str, float | None] | None:
    """litellm's per-token prices of ``model`` (None where it has none): asked once per model, since
    the optimizer prices every candidate it races."""
    try:
        from rosetta.local.litellm_offline import import_litellm
        from rosetta.third_party import using_litellm

        with using_litellm():
            info = import_litellm().get_model_info(model)
    except Exception:  # unknown price (local and custom models): the cost is simply not known
        return None
    return {key: float(value) if isinstance(value := info.get(key), (int, float)) else None for key in PRICES}
