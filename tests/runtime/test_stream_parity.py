"""A streamed call sends exactly the request ``run()`` sends (plus ``stream``), on every adapter:
both drive the same plan, so timeout, generation parameters, tools and response format agree."""

from __future__ import annotations

import json

import pytest

from rosetta.local.litellm_offline import import_litellm
from rosetta.runtime.agent import load
from rosetta.runtime.result import RetryPolicy

MODELS = {"anthropic": "anthropic/claude-sonnet-5-5", "openai": "openai/gpt-4o", "google": "gemini/gemini-2.5-pro",
          "open-source": "ollama_chat/llama3.1"}
ANSWER = json.dumps({"severity": "high", "rationale": "Unauthenticated SQL injection in the login form."})
REPORT = {"report": "SQL injection in the login form lets an unauthenticated attacker bypass authentication."}


def recorder(calls: list[dict]):
    """litellm itself, answering from ``mock_response`` offline, recording what it was asked."""
    litellm = import_litellm()

    def complete(**kwargs):
        calls.append(dict(kwargs))
        return litellm.completion(**kwargs, mock_response=ANSWER)

    return complete


@pytest.mark.parametrize("adapter", sorted(MODELS))
def test_stream_sends_the_request_run_sends(tree, adapter):
    agent = load("vuln-triage", project=tree)
    policy = RetryPolicy(attempts=1, timeout=7.5)
    ran, streamed = [], []
    agent.run(REPORT, MODELS[adapter], fallbacks=[], policy=policy, validation_retries=0, complete=recorder(ran),
              api_key="sk-test-not-a-real-key")
    result = agent.stream(REPORT, MODELS[adapter], fallbacks=[], policy=policy, validation_retries=0,
                          complete=recorder(streamed), api_key="sk-test-not-a-real-key").result()
    assert streamed[0].pop("stream") is True and "stream" not in ran[0]
    assert streamed[0] == ran[0] and ran[0]["timeout"] == 7.5
    assert result.attempts[0].model == agent.prompt_for(MODELS[adapter]).model


@pytest.mark.parametrize("model", ["anthropic/claude-sonnet-5-5", "openai/gpt-4o", "gemini/gemini-2.5-pro"])
def test_a_finished_stream_leaves_no_http_response_open(tree, model):
    """litellm's Anthropic reader stops at the stop reason without closing the response; left to the
    garbage collector, its cleanup can run while the next request holds the pool's lock and deadlock.
    After a stream over real HTTP, no response may be left open (found before any collection)."""
    import gc

    import httpx
    from vendor_recorder import VendorRecorder

    agent = load("vuln-triage", project=tree)
    base = {"anthropic": "anthropic_base", "openai": "openai_base", "gemini": "gemini_base"}[model.split("/")[0]]
    gc.collect()
    gc.disable()
    try:
        with VendorRecorder(ANSWER) as server:
            stream = agent.stream(REPORT, model, fallbacks=[], policy=RetryPolicy(attempts=1, timeout=5),
                                  validation_retries=0, api_base=getattr(server, base), api_key="sk-test-not-a-real-key")
            chunks, result = list(stream), stream.result()
            assert result.valid and "".join(chunks) == ANSWER
            assert server.requests[0].body.get("stream") is True or "streamGenerateContent" in server.requests[0].path
            left_open = [o for o in gc.get_objects() if isinstance(o, httpx.Response) and not o.is_closed]
    finally:
        gc.enable()
    assert left_open == []
