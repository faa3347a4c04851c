"""Which context's KV cache a prompt reuses, and how much of it: a fixed instruction block is
evaluated once, even by a caller alternating between prompts, and answers stay bit-identical to a
fresh run (only whole :data:`~rosetta.local.models.BATCH` blocks evaluated at the same positions are
kept)."""

from __future__ import annotations

from rosetta.local.models import BATCH, Context, Loaded, new_context

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
            best = Context(new_context(loaded.local))
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
