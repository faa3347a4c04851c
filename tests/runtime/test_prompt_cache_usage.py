"""Issue 85: what the provider's prompt cache saved reaches ``Result.usage`` and the cost. A fake
server on 127.0.0.1 answers in OpenAI's shape (``prompt_tokens_details.cached_tokens``) and in
Anthropic's (``cache_read_input_tokens`` / ``cache_creation_input_tokens``); the cost of the cached
call is below the uncached one's by exactly the provider's price difference, as litellm's map
prices it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fault_server import FaultServer

from rosetta.local.litellm_offline import import_litellm
from rosetta.runtime.agent import load
from rosetta.runtime.result import RetryPolicy

GOOD = json.dumps({"severity": "high", "rationale": "Unauthenticated SQL injection in the login form."})
REPORT = {"report": "SQL injection in the login form lets an unauthenticated attacker bypass authentication."}
FAST = RetryPolicy(attempts=1, timeout=5.0)
PROMPT, CACHED, WRITTEN, OUT = 2000, 1536, 300, 20


def openai_body(cached: int) -> str:
    usage: dict[str, Any] = {"prompt_tokens": PROMPT, "completion_tokens": OUT, "total_tokens": PROMPT + OUT}
    if cached:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "gpt-4o",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": GOOD},
                                    "finish_reason": "stop"}], "usage": usage})


def anthropic_body(read: int, written: int) -> str:
    usage = {"input_tokens": PROMPT - read - written, "output_tokens": OUT, "cache_read_input_tokens": read,
             "cache_creation_input_tokens": written}
    return json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
                       "content": [{"type": "text", "text": GOOD}], "stop_reason": "end_turn",
                       "stop_sequence": None, "usage": usage})


def price(model: str, key: str) -> float:
    entry = import_litellm().model_cost[model]
    return float(entry[key])


@pytest.mark.parametrize("model, shape", [("openai/gpt-4o", "openai"), ("anthropic/claude-sonnet-4-6", "anthropic")])
def test_cached_tokens_reach_the_usage_and_cut_the_cost_by_the_price_ratio(tree, model, shape):
    agent = load("vuln-triage", project=tree)
    bodies = [openai_body(0), openai_body(CACHED)] if shape == "openai" else \
        [anthropic_body(0, WRITTEN), anthropic_body(CACHED, 0)]
    with FaultServer([("body", 200, body, "application/json") for body in bodies]) as server:
        first, second = (agent.run(REPORT, model, fallbacks=[], policy=FAST, api_base=server.url,
                                   api_key="sk-test-not-a-real-key", validation_retries=0) for _ in bodies)
    assert first.valid and second.valid
    assert first.usage["prompt_tokens"] == second.usage["prompt_tokens"] == PROMPT
    assert second.usage["cached_tokens"] == CACHED and "cached_tokens" not in first.usage
    bare = model.split("/", 1)[1]
    saved = CACHED * (price(bare, "input_cost_per_token") - price(bare, "cache_read_input_token_cost"))
    if shape == "anthropic":  # the first call wrote the cache, at the cache-write price
        assert first.usage["cache_write_tokens"] == WRITTEN
        saved += WRITTEN * (price(bare, "cache_creation_input_token_cost") - price(bare, "input_cost_per_token"))
    assert first.cost is not None and second.cost is not None and second.cost < first.cost
    assert first.cost - second.cost == pytest.approx(saved, rel=1e-6)
