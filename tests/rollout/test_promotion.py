"""The promotion rule, and starting, promoting and stopping experiments in rollout.yaml."""

from __future__ import annotations

import json

import pytest

from rollout_project import MODEL, Versions, artifact_of, compile_agent, log_arm, version_of, versions  # noqa: F401
from rosetta.errors import RolloutError, UsageError
from rosetta.store.pins import Experiment, Rollout, read_rollout
from rosetta.rollout.outcomes import read_outcomes
from rosetta.rollout.promotion import NO_DIFFERENCE, PROMOTE, TOO_FEW, UNTESTABLE, WORSE, decide, promote, \
    start_experiment, stop
from rosetta.rollout.report import build_report
from rosetta.rollout.stats import two_proportion_z, welch_t
from rosetta.store.versions import rollout_path

AGENT = "vuln-triage"


@pytest.mark.parametrize(("counts", "verdict"), [
    ((60, 100, 80, 100), PROMOTE),  # 60% → 80%, p ≈ 0.002
    ((60, 100, 80, 99), TOO_FEW),  # the same rates, one sample short in treatment
    ((60, 100, 62, 100), NO_DIFFERENCE),
    ((80, 100, 60, 100), WORSE),
    ((100, 100, 100, 100), UNTESTABLE),
])
def test_rates_are_decided_by_the_rule(counts, verdict):
    decision = decide(Experiment("e", "a" * 64, 0.5, min_samples=100), two_proportion_z(*counts))
    assert decision.verdict == verdict and decision.promote == (verdict == PROMOTE)


def test_the_reason_is_a_plain_sentence():
    decision = decide(Experiment("e", "a" * 64, 0.5, min_samples=100), two_proportion_z(20, 37, 5, 12))
    assert decision.reason == ("not enough samples to decide: 37 control / 12 treatment with a success value, "
                               "need 100 each")
    decision = decide(Experiment("e", "a" * 64, 0.5, min_samples=100), two_proportion_z(60, 100, 80, 100))
    assert decision.reason.startswith("the treatment is better: success rate 60.0% control vs 80.0% treatment (p = ")


def test_lower_latency_is_better_and_alpha_is_respected():
    fast, slow = [0.5 + 0.01 * (n % 9) for n in range(50)], [0.6 + 0.01 * (n % 9) for n in range(50)]
    experiment = Experiment("e", "a" * 64, 0.5, metric="latency_s", test="welch", min_samples=50)
    assert decide(experiment, welch_t(slow, fast)).verdict == PROMOTE
    assert decide(experiment, welch_t(fast, slow)).verdict == WORSE
    close = [x + 0.006 for x in slow]  # slower by a little: p ≈ 0.25
    result = welch_t(slow, close)
    assert 0.001 < result.p_value < 0.5
    strict = Experiment("e", "a" * 64, 0.5, metric="latency_s", test="welch", alpha=result.p_value / 2, min_samples=50)
    loose = Experiment("e", "a" * 64, 0.5, metric="latency_s", test="welch", alpha=0.9, min_samples=50)
    assert decide(strict, result).verdict == NO_DIFFERENCE and decide(loose, result).verdict == WORSE


def test_the_report_counts_only_this_experiments_lines(tmp_path):
    log = tmp_path / "log.jsonl"
    control, treatment = "c" * 64, "d" * 64
    log_arm(log, "control", control, successes=60, failures=40)
    log_arm(log, "treatment", treatment, successes=80, failures=20)
    log_arm(log, "treatment", treatment, successes=0, failures=50, experiment="exp-0")  # an earlier experiment
    log_arm(log, "treatment", control, successes=0, failures=50)  # a version this arm does not serve
    log_arm(log, "treatment", treatment, successes=0, failures=50, model="openai/o3")
    log_arm(log, None, control, successes=0, failures=50, experiment=None)  # outside any experiment
    outcomes, skipped = read_outcomes(log)
    experiment = Experiment("exp-1", treatment, 0.3, min_samples=100)
    report = build_report(AGENT, MODEL, experiment, {"control": control, "treatment": treatment}, outcomes, skipped)
    assert report.arms["control"].calls == 100 and report.arms["treatment"].calls == 100
    assert report.arms["treatment"].metrics["success"] == (100, 0.8)
    assert report.tests["success"].test == "z" and report.tests["latency_s"].test == "welch"
    assert report.decision.verdict == PROMOTE and "score" not in report.tests  # no scores recorded
    data = report.to_dict()
    assert data["arms"]["control"]["metrics"]["score"] == {"samples": 0, "value": None}
    json.dumps(data, allow_nan=False)


def test_the_serving_version_as_treatment_needs_an_explicit_control(versions):
    """The compiled artifact serves (no rollout file): testing it against the version it replaced
    would move everyone else back to that version, so the command must say so with --control."""
    with pytest.raises(UsageError, match=r"would be both control and treatment \(it is what serves now\)") as caught:
        start_experiment(versions.artifact, versions.tree / "compiled", agent=AGENT, model=MODEL,
                         treatment=versions.new[:12], share=0.2, experiment_id="exp-1")
    assert versions.old[:12] in caught.value.problems[0].hint and not rollout_path(versions.artifact).exists()
    rollout = start_experiment(versions.artifact, versions.tree / "compiled", agent=AGENT, model=MODEL,
                               treatment=versions.new[:12], control=versions.old, share=0.2, experiment_id="exp-1")
    assert rollout == read_rollout(rollout_path(versions.artifact))
    assert rollout.active == versions.old and rollout.experiment.treatment == versions.new
    assert rollout.experiment.restore == versions.new  # what served before: `stop` brings it back
    assert (rollout.experiment.metric, rollout.experiment.test, rollout.experiment.min_samples) == ("success", "z", 100)
    with pytest.raises(UsageError, match="experiment exp-1 is already running"):
        start_experiment(versions.artifact, versions.tree / "compiled", agent=AGENT, model=MODEL,
                         treatment=versions.new, share=0.2)


def test_start_with_an_earlier_version_as_treatment_keeps_the_compiled_one_as_control(versions):
    rollout = start_experiment(versions.artifact, versions.tree / "compiled", agent=AGENT, model=MODEL,
                               treatment=versions.old, share=0.5, metric="score")
    assert rollout.active == versions.new and rollout.experiment.test == "welch"
    assert rollout.experiment.id.startswith("exp-") and rollout.experiment.restore is None  # control = what serves


def test_start_needs_two_versions_and_valid_settings(versions):
    with pytest.raises(RolloutError, match="--share"):
        start_experiment(versions.artifact, versions.tree / "compiled", agent=AGENT, model=MODEL,
                         treatment=versions.old, share=1.5)
    with pytest.raises(UsageError, match="both control and treatment"):
        start_experiment(versions.artifact, versions.tree / "compiled", agent=AGENT, model=MODEL,
                         treatment=versions.new, control=versions.new[:9], share=0.5)
    assert not rollout_path(versions.artifact).exists()


def test_a_single_version_cannot_be_tested(tree):
    compile_agent(tree)
    artifact = artifact_of(tree)
    with pytest.raises(UsageError, match="would be both control and treatment"):
        start_experiment(artifact, tree / "compiled", agent=AGENT, model=MODEL,
                         treatment=version_of(artifact)[:12], share=0.5)


def running(versions: Versions) -> Rollout:
    """The new (compiled, serving) version against the one it replaced, which serves the control arm."""
    return start_experiment(versions.artifact, versions.tree / "compiled", agent=AGENT, model=MODEL,
                            treatment=versions.new, control=versions.old, share=0.2, experiment_id="exp-1")


def test_promote_makes_the_treatment_active_and_ends_the_experiment(versions):
    running(versions)
    assert promote(versions.artifact, versions.tree / "compiled", agent=AGENT, model=MODEL) == Rollout(versions.new)
    assert read_rollout(rollout_path(versions.artifact)) == Rollout(versions.new)
    with pytest.raises(UsageError, match="no experiment is running"):
        promote(versions.artifact, versions.tree / "compiled", agent=AGENT, model=MODEL)


def test_promote_checks_the_experiment_is_still_the_one_decided_on(versions):
    running(versions)
    before = rollout_path(versions.artifact).read_bytes()
    with pytest.raises(RolloutError, match="exp-0 is no longer running"):
        promote(versions.artifact, versions.tree / "compiled", agent=AGENT, model=MODEL, experiment_id="exp-0")
    assert rollout_path(versions.artifact).read_bytes() == before


def test_promote_a_version_rolls_back(versions):
    running(versions)
    promote(versions.artifact, versions.tree / "compiled", agent=AGENT, model=MODEL)
    rolled = promote(versions.artifact, versions.tree / "compiled", agent=AGENT, model=MODEL, version=versions.old[:8])
    assert rolled == Rollout(versions.old)


def test_stop_brings_back_what_served_before_the_experiment(versions):
    running(versions)
    ended = stop(versions.artifact, versions.tree / "compiled", agent=AGENT, model=MODEL)
    assert ended.experiment.id == "exp-1"
    assert read_rollout(rollout_path(versions.artifact)) == Rollout(versions.new)  # the compiled artifact, as before
    start_experiment(versions.artifact, versions.tree / "compiled", agent=AGENT, model=MODEL,
                     treatment=versions.old, share=0.3, experiment_id="exp-2")  # control: what serves
    stop(versions.artifact, versions.tree / "compiled", agent=AGENT, model=MODEL)
    assert read_rollout(rollout_path(versions.artifact)) == Rollout(versions.new)
    with pytest.raises(UsageError, match="no experiment is running"):
        stop(versions.artifact, versions.tree / "compiled", agent=AGENT, model=MODEL)
