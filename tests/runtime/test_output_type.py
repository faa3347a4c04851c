"""The user's own output type (issue 84): ``load(name, output_type=Model)`` types every valid answer
as that model, on every path, and a model that disagrees with the definition's output schema is a
clear error at load, before anything is paid for."""

from __future__ import annotations

import asyncio
import json
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from fault_server import FaultServer
from rosetta.errors import UsageError
from rosetta.runtime.agent import load
from rosetta.runtime.result import RetryPolicy

GOOD = json.dumps({"severity": "high", "rationale": "Unauthenticated SQL injection in the login form."})
REPORT = {"report": "SQL injection in the login form lets an unauthenticated attacker bypass authentication."}
FAST = RetryPolicy(attempts=1, timeout=2.0)
CALL = {"model": "openai/gpt-4o", "policy": FAST, "api_key": "sk-test-not-a-real-key"}


class Triage(BaseModel):
    severity: Literal["critical", "high", "medium", "low", "informational"]
    rationale: str = Field(max_length=400)

    def urgent(self) -> bool:
        return self.severity in ("critical", "high")


def test_every_path_types_a_valid_answer_as_the_users_model(tree):
    agent = load("vuln-triage", project=tree, output_type=Triage)
    with FaultServer([("ok", GOOD)] * 4) as server:
        results = [agent.run(REPORT, api_base=server.url, **CALL),
                   asyncio.run(agent.arun(REPORT, api_base=server.url, **CALL)),
                   agent.chat(api_base=server.url, **CALL).send(REPORT)]
        with agent.stream(REPORT, api_base=server.url, **CALL) as stream:
            results.append(stream.result())
    for result in results:
        assert result.valid and type(result.output) is Triage and result.output.urgent()


def test_an_answer_the_users_model_refuses_is_an_issue_not_a_traceback(tree):
    class Strict(BaseModel):  # stricter than the schema only where no answer here reaches
        severity: str
        rationale: str = Field(max_length=400, pattern=r"^[A-Z]")

    agent = load("vuln-triage", project=tree, output_type=Strict)
    lower = json.dumps({"severity": "low", "rationale": "typo on the pricing page."})
    with FaultServer([("ok", lower)] * 3) as server:
        result = agent.run(REPORT, api_base=server.url, validation_retries=0, **CALL)
    assert not result.valid and result.output == {"severity": "low", "rationale": "typo on the pricing page."}
    assert any("rationale" in issue.path for issue in result.issues)


@pytest.mark.parametrize(("model_fields", "said"), [
    ({"severity": (str, ...), "rationale": (str, ...), "cvss": (float, ...)},
     "cvss: the model requires it, but the schema has no such property"),
    ({"severity": (int, ...), "rationale": (str, ...)}, "severity: the schema allows string, the model takes integer"),
    ({"severity": (Literal["critical", "high"], ...), "rationale": (str, ...)},
     "the schema allows ['informational', 'low', 'medium']"),
])
def test_a_model_that_disagrees_with_the_schema_is_refused_at_load(tree, model_fields, said):
    from pydantic import create_model

    wrong = create_model("Wrong", **model_fields)
    with pytest.raises(UsageError) as raised:
        load("vuln-triage", project=tree, output_type=wrong)
    message = str(raised.value)
    assert "output_type Wrong disagrees with vuln-triage's output schema" in message
    assert said.split(": ", 1)[-1] in message and "vuln-triage.md" in message


def test_extra_forbid_and_free_text_agents_and_non_models_are_refused(tree):
    class OnlySeverity(BaseModel):
        model_config = ConfigDict(extra="forbid")
        severity: str

    with pytest.raises(UsageError, match="rationale.*the model forbids fields it does not declare"):
        load("vuln-triage", project=tree, output_type=OnlySeverity)
    with pytest.raises(UsageError, match="must be a pydantic model class"):
        load("vuln-triage", project=tree, output_type=dict)
    free_text = next(p for p in (tree / "signatures").glob("*.md") if "schema:" not in p.read_text())
    with pytest.raises(UsageError, match="declares no output schema"):
        load(free_text, project=tree, output_type=Triage)


def test_a_looser_model_is_taken(tree):
    class Loose(BaseModel):  # optional fields, wider types, unknown fields ignored: every answer fits
        severity: str | None = None

    assert load("vuln-triage", project=tree, output_type=Loose).output_type is Loose
