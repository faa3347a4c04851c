"""Issue 85: what a call costs in service counts the prompt cache. A prompt whose stable prefix the
host caches pays the cache-write rate once (Anthropic) and the cache-read rate on every later call;
the rest of the prompt and the answer pay the usual rates (litellm's price map). The optimizer's dry
run estimates with it, and `rosetta trials` shows each candidate's input per call at that price."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import REPO

from rosetta.local.litellm_offline import import_litellm
from rosetta.runtime.agent import load
from rosetta.runtime.usage import call_price


def _prices(model: str) -> dict:
    return import_litellm().get_model_info(model)


@pytest.mark.parametrize(("agent", "model"), [("vuln-triage", "anthropic/claude-sonnet-4-6"),
                                              ("question-type", "openai/gpt-5.6")])
def test_a_cached_prefix_is_billed_at_the_cache_rates_after_the_first_call(agent: str, model: str) -> None:
    prompt = load(agent, project=REPO).explain(model).prompt
    prefix = prompt.cache_prefix
    assert prefix is not None and prefix.cached  # vuln-triage is marked on Claude, question-type long enough for GPT
    info, price = _prices(model), call_price(prompt)
    uncached = call_price(replace(prompt, cache_prefix=None))
    assert uncached.first == uncached.steady  # no cache: every call pays the full input rate
    saving = prefix.tokens * (info["input_cost_per_token"] - info["cache_read_input_token_cost"])
    assert price.steady == pytest.approx(uncached.steady - saving)
    assert price.steady < 0.5 * uncached.steady + prompt.generation["max_tokens"] * info["output_cost_per_token"]
    write = info.get("cache_creation_input_token_cost")  # Anthropic's write premium; OpenAI has none
    expected_first = uncached.first + prefix.tokens * ((write or info["input_cost_per_token"])
                                                       - info["input_cost_per_token"])
    assert price.first == pytest.approx(expected_first)
    assert price.of(10) == pytest.approx(price.first + 9 * price.steady) and price.of(0) == 0.0


def test_a_short_prefix_and_a_local_model_cost_what_they_did() -> None:
    agent = load("vuln-triage", project=REPO)
    haiku = agent.explain("anthropic/claude-haiku-5-5").prompt  # 1,041 tokens, under Haiku 5.5's 4,096
    assert not haiku.cache_prefix.cached
    assert call_price(haiku) == call_price(replace(haiku, cache_prefix=None))
    assert call_price(agent.explain("local/gemma-3-270m").prompt).of(100) == 0.0


def test_the_dry_run_estimates_at_the_steady_state_price(tmp_path, cli) -> None:
    from conftest import question_type_project

    root = question_type_project(tmp_path / "project", train=8, dev=6, test=4)
    result = cli("-C", root, "compile", root / "signatures" / "question-type.md", "--model", "openai/gpt-5.6",
                 "--optimize", "--max-calls", "40", "--dry-run")
    assert result.exit_code == 0, result.output
    head = " ".join(result.output.split())
    calls = int(head.split("at most ", 1)[1].split()[0])
    stated = float(head.split("about $", 1)[1].split()[0])
    prompt = load("question-type", project=root).explain("openai/gpt-5.6").prompt  # the unoptimized render
    assert calls > 40 and stated == pytest.approx(round(call_price(prompt).of(calls), 4), abs=1e-4)
    full = call_price(replace(prompt, cache_prefix=None))
    assert stated < full.of(calls)  # what the estimate was before: every call at the full input price
