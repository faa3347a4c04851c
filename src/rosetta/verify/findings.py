"""What ``rosetta verify`` found, as plain pydantic models: the JSON report is their dump, and the
terminal table and the HTML report are views of it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Verdict = Literal["pass", "fail", "indeterminate"]
Status = Literal["pass", "fail", "indeterminate", "n/a"]

CRITERIA = {
    "PV-011": "Valid structured output",
    "PV-012": "Tool calls match their schemas",
    "PV-013": "Forbidden actions and guardrails hold",
    "PV-014": "Identity is consistent",
    "PV-015": "Quality (judge rubric)",
    "PV-016": "Graceful degradation",
    "PV-017": "Legacy agent renders and runs",
    "PV-018": "Portability section is optional",
    "PV-019": "Tools are called when the case needs them",
}
"""The behavioral portability criteria of the ADR, by id."""


class Check(BaseModel):
    """One verdict on one run, by rules or by the judge."""

    criterion: str
    verdict: Verdict
    source: Literal["rules", "judge"]
    reasoning: str = ""
    confidence: float | None = None


class CaseRun(BaseModel):
    """One case answered by one model: what went in, what came out, and the verdicts on it."""

    case_id: str
    kind: Literal["example", "adversarial", "degraded", "without-portability"]
    inputs: dict[str, Any]
    expected: Any = None
    probe: str | None = None  # what an adversarial case tries to make the agent do
    output: Any = None
    raw: str = ""
    valid: bool = False
    first_attempt_valid: bool = False
    attempts: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    error: str | None = None  # the run raised: a guardrail refusal, a provider error, ...
    refused_by_guardrail: bool = False
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    review: dict[str, Any] | None = None  # the quality judge's review (PV-015)
    checks: list[Check] = Field(default_factory=list)


class CriterionResult(BaseModel):
    id: str
    title: str
    status: Status
    detail: str
    score: float | None = None


class ModelResult(BaseModel):
    """One agent on one model."""

    model: str
    prompt_source: str  # the artifact used, or why the fallback render was used
    criteria: list[CriterionResult] = Field(default_factory=list)
    runs: list[CaseRun] = Field(default_factory=list)
    compliance: float | None = None  # first-attempt schema-valid share of example runs that answered
    retry_rate: float | None = None  # extra attempts per call
    mean_latency_s: float | None = None
    mean_cost_usd: float | None = None
    quality: float | None = None  # PV-015 weighted rubric score
    error: str | None = None  # the model could not be verified at all
    not_run: str | None = None  # why nothing was run on it (no credentials here): listed apart, not a failure

    def criterion(self, criterion_id: str) -> CriterionResult | None:
        return next((c for c in self.criteria if c.id == criterion_id), None)


class AgentResult(BaseModel):
    agent: str
    definition: str
    primary_model: str
    cases: str  # where the example cases came from
    models: list[ModelResult] = Field(default_factory=list)
    error: str | None = None  # the agent could not be verified at all
    skipped: str | None = None  # verifying a tree: why this agent was left out (it has nothing to verify with)


class VerifyReport(BaseModel):
    created: str
    rosetta_version: str
    models: list[str]
    judge: str
    thresholds: dict[str, float]
    agents: list[AgentResult] = Field(default_factory=list)

    @property
    def not_run(self) -> list[str]:
        """``agent × model: why`` for every model nothing was run on (no credentials here): listed
        apart, neither a failure nor a pass."""
        return [f"{agent.agent} × {model.model}: {model.not_run}" for agent in self.agents for model in agent.models
                if model.not_run]

    @property
    def failed(self) -> list[str]:
        """``agent × model: PV-xxx`` for every failed criterion (and every agent or model that
        could not be verified)."""
        failures = []
        for agent in self.agents:
            if agent.error:
                failures.append(f"{agent.agent}: {agent.error}")
            for model in agent.models:
                if model.error:
                    failures.append(f"{agent.agent} × {model.model}: {model.error}")
                failures += [f"{agent.agent} × {model.model}: {c.id} {c.title}"
                             for c in model.criteria if c.status == "fail"]
        return failures
