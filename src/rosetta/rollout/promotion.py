"""Changing what serves: start an experiment, promote its treatment, or stop it; and the rule that
says when a treatment has earned promotion.

The rule: at least ``min_samples`` per arm on the experiment's metric, the configured test's
two-sided p-value below ``alpha``, and the difference in the treatment's favour (higher success,
validity and score; lower latency and cost). Every change rewrites ``rollout.yaml`` atomically
under the output tree's lock (the compiler's), re-reading it first, so concurrent commands never
lose each other's changes and a reader never sees half a file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rosetta.errors import Location, Problem, RolloutError, UsageError
from rosetta.rollout.stats import TestResult
from rosetta.store.pins import (
    LOWER_IS_BETTER,
    METRICS,
    Experiment,
    Rollout,
    default_test,
    make_experiment,
    read_rollout,
)
from rosetta.store.publish import locked, write_pins
from rosetta.store.versions import list_versions, load_version, rollout_path, short_id

PROMOTE, TOO_FEW, NO_DIFFERENCE, WORSE, UNTESTABLE = "promote", "not enough samples", "no difference", "worse", \
    "untestable"


@dataclass(frozen=True)
class Decision:
    """What the rule says, and why, in one sentence."""

    promote: bool
    verdict: str  # "promote" | "not enough samples" | "no difference" | "worse" | "untestable"
    reason: str


def decide(experiment: Experiment, result: TestResult) -> Decision:
    """Apply the promotion rule to the test of the experiment's metric."""
    need, metric = experiment.min_samples, experiment.metric
    if result.n_control < need or result.n_treatment < need:
        return Decision(False, TOO_FEW, f"not enough samples to decide: {result.n_control} control / "
                                        f"{result.n_treatment} treatment with a {metric} value, need {need} each")
    label = describe(metric, result)
    if result.p_value is None:
        return Decision(False, UNTESTABLE, f"cannot test {metric}: {label}, with no variation in either arm")
    better = result.effect < 0 if metric in LOWER_IS_BETTER else result.effect > 0
    significance = f"p = {result.p_value:.3g}, alpha {experiment.alpha:g}, {_TEST_NAMES[result.test]}"
    if result.p_value >= experiment.alpha:
        return Decision(False, NO_DIFFERENCE, f"no significant difference in {label} ({significance}): keep "
                                              "collecting, or stop the experiment")
    if not better:
        return Decision(False, WORSE, f"the treatment is worse: {label} ({significance}); stop the experiment")
    return Decision(True, PROMOTE, f"the treatment is better: {label} ({significance}), with at least {need} "
                                   "samples per arm")


_TEST_NAMES = {"z": "two-proportion z-test", "welch": "Welch's t-test"}


def describe(metric: str, result: TestResult) -> str:
    """``success rate 55.0% control vs 62.0% treatment`` / ``mean latency_s 1.2 control vs 0.9 treatment``."""
    if METRICS[metric] == "rate" and result.test == "z":
        return f"{metric} rate {_percent(result.control)} control vs {_percent(result.treatment)} treatment"
    return f"mean {metric} {result.control:.4g} control vs {result.treatment:.4g} treatment"


def _percent(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{100 * value:.1f}%"



def start_experiment(artifact: Path, out: Path, *, agent: str, model: str, treatment: str, share: float,
                     experiment_id: str | None = None, control: str | None = None, metric: str = "success",
                     test: str | None = None, alpha: float = 0.05, min_samples: int = 100,
                     auto_promote: bool = False) -> Rollout:
    """Run ``treatment`` against the version that serves now (``control``: another one) for ``share``
    of users. What serves changes only as the command says: the treatment's share gets it, and the
    rest get the control, which is what served unless ``control`` names another version; then
    :func:`stop` brings back what served before.
    """
    with locked(out):
        current = read_rollout(rollout_path(artifact))
        if current is not None and current.experiment is not None:
            raise UsageError(Problem(f"experiment {current.experiment.id} is already running for {agent} on {model}",
                                     Location(str(rollout_path(artifact))), hint="promote or stop it first"))
        treated, _ = load_version(artifact, treatment, agent=agent, model=model, field_name="--treatment")
        serving = serving_version(artifact, current, agent=agent, model=model)
        if control is not None:
            base, _ = load_version(artifact, control, agent=agent, model=model, field_name="--control")
        else:
            base = serving
        if base.content_sha256 == treated.content_sha256:
            earlier = [v.short for v in list_versions(artifact) if v.id != treated.content_sha256 and v.problem is None]
            raise UsageError(Problem(
                f"version {short_id(treated.content_sha256)} would be both control and treatment"
                + (" (it is what serves now)" if control is None else ""), field="--treatment",
                hint="pass --control ID to compare it with another version, which then serves the other users"
                     + (f" (versions: {', '.join(earlier[:5])})" if earlier else "")))
        experiment = make_experiment({
            "id": experiment_id or f"exp-{datetime.now(UTC):%Y%m%d-%H%M%S}", "treatment": treated.content_sha256,
            "share": share, "metric": metric, "test": test or default_test(metric), "alpha": alpha,
            "min_samples": min_samples, "auto_promote": auto_promote,
            **({"restore": serving.content_sha256} if base.content_sha256 != serving.content_sha256 else {})})
        rollout = Rollout(base.content_sha256, experiment)
        write_pins(artifact, rollout)
    return rollout


def serving_version(artifact: Path, current: Rollout | None, *, agent: str, model: str) -> Any:
    """The version that serves now: the rollout file's active one, else the compiled artifact."""
    if current is not None:
        return load_version(artifact, current.active, agent=agent, model=model,
                            where=Location(str(rollout_path(artifact))), field_name="active")[0]
    compiled = [v for v in list_versions(artifact) if v.current and v.problem is None]
    if not compiled:
        raise UsageError(Problem(f"{agent} on {model} has no usable compiled artifact to serve as control",
                                 Location(str(artifact)), "--control", hint="pass --control ID"))
    return load_version(artifact, compiled[0].id, agent=agent, model=model)[0]


def promote(artifact: Path, out: Path, *, agent: str, model: str, version: str | None = None,
            experiment_id: str | None = None) -> Rollout:
    """Make the running experiment's treatment (or ``version``) the active version, ending the
    experiment. ``experiment_id``: promote only if that experiment is still the one running."""
    with locked(out):
        current = read_rollout(rollout_path(artifact))
        if version is None:
            if current is None or current.experiment is None:
                raise UsageError(Problem(f"no experiment is running for {agent} on {model}", field="--model",
                                         hint="start one with `rosetta experiment start`, or pass --version ID "
                                              "to make a version active"))
            if experiment_id is not None and current.experiment.id != experiment_id:
                raise RolloutError(Problem(f"experiment {experiment_id} is no longer running (now: "
                                           f"{current.experiment.id}); nothing changed",
                                           Location(str(rollout_path(artifact)))))
            version = current.experiment.treatment
        chosen, _ = load_version(artifact, version, agent=agent, model=model, field_name="--version")
        rollout = Rollout(chosen.content_sha256)
        write_pins(artifact, rollout)
    return rollout


def stop(artifact: Path, out: Path, *, agent: str, model: str) -> Rollout:
    """End the running experiment; what served before it serves again (the control, unless the
    experiment chose another control: then its ``restore`` version), and the treatment goes back on
    the shelf. Returns the rollout as it was (with the experiment that ended)."""
    with locked(out):
        current = read_rollout(rollout_path(artifact))
        if current is None or current.experiment is None:
            raise UsageError(Problem(f"no experiment is running for {agent} on {model}", field="--model",
                                     hint="`rosetta experiment report` shows what runs"))
        write_pins(artifact, Rollout(current.experiment.restore or current.active))
    return current
