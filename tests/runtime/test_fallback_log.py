"""Issue 59: a run logs its model's fallback ("no usable compiled artifact ... rendering the
definition uncompiled") once, however the model was named and whether or not it was explained
first, and a newly loaded agent logs it again (no process-wide memory hides it). Calls go to a real
HTTP server on 127.0.0.1 (tests/fault_server.py)."""

from __future__ import annotations

import json
import logging

import pytest
from fault_server import FaultServer
from rosetta.errors import RosettaError
from rosetta.runtime.agent import load
from rosetta.runtime.result import RetryPolicy

GOOD = json.dumps({"severity": "high", "rationale": "Unauthenticated SQL injection in the login form."})
REPORT = {"report": "SQL injection in the login form lets an unauthenticated attacker bypass authentication."}
ONCE = RetryPolicy(attempts=1, base=0.01, multiplier=1.0, cap=0.01, timeout=2.0)
FALLBACK = "rendering the definition uncompiled"


def fallbacks(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if FALLBACK in r.getMessage()]


def run(agent, server, model="openai/gpt-4o", **options):
    return agent.run(REPORT, model, policy=ONCE, api_base=server.url, api_key="sk-test-not-a-real-key", **options)


def test_one_run_logs_its_fallback_once_and_each_new_agent_again(tree, caplog):
    caplog.set_level(logging.WARNING, logger="rosetta.runtime")
    with FaultServer([("ok", GOOD)] * 3) as server:
        assert run(load("vuln-triage", project=tree), server).valid
        assert len(fallbacks(caplog)) == 1
        assert run(load("vuln-triage", project=tree), server).valid  # a new agent: said again
    assert len(fallbacks(caplog)) == 2


def test_a_model_explained_then_run_logs_its_fallback_once(tree, caplog):
    """What ``rosetta evaluate``, ``verify`` and a judge's budget do: explain the choice, then run it."""
    agent = load("vuln-triage", project=tree)
    caplog.set_level(logging.WARNING, logger="rosetta.runtime")
    with FaultServer([("ok", GOOD)]) as server:
        selection = agent.explain("openai/gpt-4o")
        assert selection.kind == "uncompiled" and FALLBACK in selection.reason
        assert run(agent, server).valid
    assert len(fallbacks(caplog)) == 1


def test_an_alias_and_the_full_id_in_one_chain_log_one_fallback(tree, caplog):
    """``-m gpt-4o`` with openai/gpt-4o among the fallbacks: one model, one choice, one warning."""
    agent = load("vuln-triage", project=tree)
    caplog.set_level(logging.WARNING, logger="rosetta.runtime")
    with FaultServer([("status", 503), ("ok", GOOD)]) as server:
        result = run(agent, server, model="gpt-4o", fallbacks=["openai/gpt-4o"])
    assert result.valid and result.model == "openai/gpt-4o"
    said = fallbacks(caplog)
    assert len(said) == 1 and "on openai/gpt-4o" in said[0], said


def test_a_render_that_fails_logs_no_fallback_before_its_error(tree, caplog):
    """The warning says what is served: nothing is when the uncompiled render itself fails."""
    agent = load("advisory-extractor", project=tree)
    caplog.set_level(logging.WARNING, logger="rosetta.runtime")
    for _ in range(2):
        with pytest.raises(RosettaError, match="context"):
            agent.prompt_for("local/smollm2-135m-instruct")  # an 8,192-token window for a 32,000-token agent
    assert fallbacks(caplog) == []
