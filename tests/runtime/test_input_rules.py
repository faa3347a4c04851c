"""Input rules in every shape the ADR allows, enforced against a real HTTP server on 127.0.0.1:
what rosetta can check stops the call before a request leaves; what it cannot check never blocks."""

from __future__ import annotations

import json
import time

import pytest

from fault_server import FaultServer
from rosetta.runtime.agent import load
from rosetta.runtime.guardrails import GuardrailError
from rosetta.runtime.result import RetryPolicy

AGENT = """\
---
name: exfil-planner
description: Plans an exfiltration test inside an authorized engagement.
inputs:
  engagement_id: {type: string}
  objective: {type: string}
guardrails:
  input_validation:
    - engagement_id_format: "^RED-\\\\d{4}$"
    - roe_exfiltration_authorized: true
    - objective: "signed off by the client"
    - {field: objective, reject: "(?i)production database", message: Production data is out of scope.}
    - ticket_format: "^T-\\\\d+$"
---
You plan exfiltration tests for the engagement and objective given.
"""
FAST = RetryPolicy(attempts=1, base=0.05, multiplier=2.0, cap=1.0, timeout=2.0)


@pytest.fixture
def agent(project):
    (project / "signatures").mkdir()
    (project / "signatures" / "exfil-planner.md").write_text(AGENT)
    return load("exfil-planner", project=project)


def run(agent, server, **inputs):
    return agent.run(inputs, model="openai/gpt-4o", policy=FAST, api_base=server.url, api_key="sk-test-not-a-key")


def test_enforceable_rules_stop_the_call_before_any_request(agent):
    with FaultServer([("ok", json.dumps("plan"))]) as server:
        with pytest.raises(GuardrailError) as caught:
            run(agent, server, engagement_id="BLUE-1", objective="Staging file share")
        with pytest.raises(GuardrailError, match="out of scope"):
            run(agent, server, engagement_id="RED-0042", objective="Dump the production database")
        assert server.requests == []
    assert "engagement_id" in str(caught.value) and "RED-" in str(caught.value)


def test_preconditions_and_rules_on_no_input_never_block(agent, caplog):
    # the boolean and prose preconditions, and ticket_format (no input 'ticket'), are said once, not enforced
    with FaultServer([("ok", "A plan."), ("ok", "Another plan.")]) as server:
        result = run(agent, server, engagement_id="RED-0042", objective="Staging file share")
        run(agent, server, engagement_id="RED-0043", objective="Staging file share")
    assert len(server.requests) == 2 and result.raw == "A plan."
    said = [r.getMessage() for r in caplog.records if "not enforced" in r.getMessage()]
    assert len(said) == 3 and any("roe_exfiltration_authorized" in m for m in said)


REDOS_AGENT = """\
---
name: code-checker
description: Checks codes.
inputs:
  code: {type: string}
guardrails:
  input_validation:
    - code_format: "^(a+)+$"
    - {field: code, reject: "^(a|aa)+$", message: Codes of only a's are refused.}
---
You check the code given.
"""


@pytest.fixture
def redos_agent(project):
    (project / "signatures").mkdir()
    (project / "signatures" / "code-checker.md").write_text(REDOS_AGENT)
    return load("code-checker", project=project)


def test_a_backtracking_input_rule_answers_within_its_time_limit(redos_agent):
    # `re` took hours on this input (^(a+)+$ is tried 2**40 ways); the `regex` engine answers at once
    with FaultServer([("ok", json.dumps("fine"))]) as server:
        start = time.perf_counter()
        with pytest.raises(GuardrailError) as caught:
            run(redos_agent, server, code="a" * 40 + "!")
        assert time.perf_counter() - start < 5.0
        assert server.requests == []
    assert "does not match '^(a+)+$'" in str(caught.value)


def test_an_input_whose_check_runs_out_of_time_is_refused_naming_the_rule(redos_agent, project):
    # ^(a|aa)+$ backtracks in `regex` too: the search stops at its time limit and the input is refused
    with FaultServer([("ok", json.dumps("fine"))]) as server:
        start = time.perf_counter()
        with pytest.raises(GuardrailError) as caught:
            run(redos_agent, server, code="a" * 60 + "!")
        assert time.perf_counter() - start < 10.0  # 0.25 s of search; a busy machine stretches the check
        assert server.requests == []
    (problem,) = [p for p in caught.value.problems if "took longer" in p.message]
    assert problem.location.file == str(project / "signatures" / "code-checker.md")
    assert (problem.location.line, problem.field) == (9, "guardrails.input_validation[1]")
    assert "'^(a|aa)+$'" in problem.message and "input 'code' was refused" in problem.message
    assert "RS-006" in problem.hint


def test_a_conversation_message_whose_check_runs_out_of_time_is_refused():
    from rosetta.definition.input_rules import InputRule
    from rosetta.runtime.guardrails import check_message

    rules = [InputRule(reject="^(a|aa)+$")]
    check_message(rules, "b", "agent")  # a message the rule allows passes
    with pytest.raises(GuardrailError, match="the message was refused"):
        check_message(rules, "a" * 60 + "!", "agent")
