"""An experiment's report: per-arm counts, rates and means from the outcome log, every metric
compared with its test, and the decision the experiment's own rule reaches."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rosetta.rollout.outcomes import Outcome
from rosetta.rollout.promotion import Decision, decide
from rosetta.rollout.stats import TestResult, mean, two_proportion_z, welch_t
from rosetta.store.pins import METRICS, Experiment
from rosetta.store.routing import CONTROL, TREATMENT

ARMS = (CONTROL, TREATMENT)


def metric_values(outcomes: list[Outcome], metric: str) -> list[float]:
    """The samples of ``metric`` in ``outcomes``: 1.0/0.0 for rates, the numbers for means; calls
    that did not record it (no success flag, no score, unknown cost) are left out."""
    values = []
    for outcome in outcomes:
        value = getattr(outcome, metric)
        if value is not None:
            values.append(float(value))
    return values


def compare(control: list[float], treatment: list[float], test: str) -> TestResult:
    """``test`` ("z" or "welch") of the two arms' samples of one metric."""
    if test == "z":
        return two_proportion_z(round(sum(control)), len(control), round(sum(treatment)), len(treatment))
    return welch_t(control, treatment)


@dataclass(frozen=True)
class ArmSummary:
    """One arm: how many calls, and the rate or mean of each metric over the calls that recorded it."""

    arm: str
    version: str  # the version id the arm serves
    calls: int
    retries_mean: float
    metrics: dict[str, tuple[int, float]]  # metric → (samples, rate or mean; nan without samples)


@dataclass(frozen=True)
class ExperimentReport:
    """What ``rosetta experiment report`` shows for one (agent, model)."""

    agent: str
    model: str
    experiment: Experiment
    arms: dict[str, ArmSummary]
    tests: dict[str, TestResult]  # every metric with samples in both arms; the decision's metric first
    decision: Decision
    skipped_lines: int = 0  # log lines that could not be read

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (nan becomes None)."""

        def clean(value: float | None) -> float | None:
            return None if value is None or math.isnan(value) else value

        return {
            "agent": self.agent, "model": self.model, "experiment": self.experiment.to_dict(),
            "arms": {name: {"version": arm.version, "calls": arm.calls, "retries_mean": clean(arm.retries_mean),
                            "metrics": {m: {"samples": n, "value": clean(v)} for m, (n, v) in arm.metrics.items()}}
                     for name, arm in self.arms.items()},
            "tests": {metric: {"test": t.test, "control": clean(t.control), "treatment": clean(t.treatment),
                               "effect": clean(t.effect), "n_control": t.n_control, "n_treatment": t.n_treatment,
                               "statistic": t.statistic, "p_value": t.p_value, "df": t.df}
                      for metric, t in self.tests.items()},
            "decision": {"promote": self.decision.promote, "verdict": self.decision.verdict,
                         "reason": self.decision.reason},
            "skipped_lines": self.skipped_lines,
        }


def build_report(agent: str, model: str, experiment: Experiment, versions: dict[str, str], outcomes: list[Outcome],
                 skipped_lines: int = 0) -> ExperimentReport:
    """The report over the outcomes of ``experiment`` on ``model`` whose arm served its configured
    version (``versions``: arm → full version id); any other line in the log is not this experiment's."""
    by_arm: dict[str, list[Outcome]] = {arm: [] for arm in ARMS}
    for outcome in outcomes:
        if outcome.model == model and outcome.experiment == experiment.id and outcome.arm in by_arm \
                and outcome.version == versions[outcome.arm]:
            by_arm[outcome.arm].append(outcome)
    arms = {}
    for arm, rows in by_arm.items():
        metrics = {}
        for metric in METRICS:
            values = metric_values(rows, metric)
            metrics[metric] = (len(values), mean(values))
        retries = mean([float(r.retries) for r in rows])
        arms[arm] = ArmSummary(arm, versions[arm], len(rows), retries, metrics)
    tests: dict[str, TestResult] = {}
    for metric in (experiment.metric, *(m for m in METRICS if m != experiment.metric)):
        control, treatment = metric_values(by_arm[CONTROL], metric), metric_values(by_arm[TREATMENT], metric)
        if metric == experiment.metric or (control and treatment):
            test = experiment.test if metric == experiment.metric else ("z" if METRICS[metric] == "rate" else "welch")
            tests[metric] = compare(control, treatment, test)
    return ExperimentReport(agent, model, experiment, arms, tests, decide(experiment, tests[experiment.metric]),
                            skipped_lines)
