"""What a response used and cost: its token counts, those its provider's prompt cache read or wrote,
and litellm's price for them (which knows the cache rates). Kept apart from the retry plan that sums
them per run (:mod:`rosetta.runtime.invoke`) and the tracing that records them per call."""

from __future__ import annotations


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
