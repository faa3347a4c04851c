"""``rosetta versions`` and ``rosetta experiment``: happy paths, exit codes and one-line errors."""

from __future__ import annotations

import json

from rollout_project import MODEL, log_arm, versions  # noqa: F401  (a fixture)
from rosetta.store.pins import Rollout, read_rollout
from rosetta.rollout.outcomes import default_path
from rosetta.store.versions import rollout_path

AGENT = "vuln-triage"


def run(cli, versions, *args):
    result = cli("-C", versions.tree, *args)
    assert "Traceback" not in result.output
    return result


def start(cli, versions, *extra):
    """The new (compiled, serving) version as treatment, against the one it replaced, named as control."""
    result = run(cli, versions, "experiment", "start", AGENT, "--model", MODEL, "--treatment", versions.new[:12],
                 "--control", versions.old[:12], "--share", "0.2", "--id", "exp-1", *extra)
    assert result.exit_code == 0, result.output
    return result


def test_versions_lists_ids_status_and_json(cli, versions):
    result = run(cli, versions, "versions", AGENT, "--model", "gpt-4o")
    assert result.exit_code == 0, result.output
    assert versions.new[:12] in result.stdout and versions.old[:12] in result.stdout
    assert f"{versions.new[:12]}*" in result.stdout and "active" in result.stdout
    start(cli, versions)
    data = json.loads(run(cli, versions, "versions", AGENT, "-m", MODEL, "-f", "json").stdout)
    rows = {row["id"]: row for row in data["versions"]}
    assert (rows[versions.old]["active"], rows[versions.old]["treatment"]) == (True, False)
    assert (rows[versions.new]["active"], rows[versions.new]["treatment"], rows[versions.new]["current"]) == (
        False, True, True)
    assert data["rollout"]["experiment"]["share"] == 0.2
    assert "treatment 20%" in run(cli, versions, "versions", AGENT, "-m", MODEL).stdout


def test_versions_errors_are_one_line_with_a_fix(cli, versions):
    unknown = run(cli, versions, "versions", "no-such-agent", "--model", MODEL)
    assert unknown.exit_code == 2 and "no agent named 'no-such-agent'" in unknown.output
    model = run(cli, versions, "versions", AGENT, "--model", "nonsense-model")
    assert model.exit_code == 2 and "unknown model 'nonsense-model'" in model.output
    missing = run(cli, versions, "versions", AGENT, "--model", "o3")
    assert missing.exit_code == 2 and "has no compiled versions for openai/o3" in missing.output
    assert "rosetta compile --model openai/o3" in missing.output


def test_versions_warns_about_a_broken_rollout_file_and_still_lists(cli, versions):
    versions.rollout("active: [unclosed\n")
    result = run(cli, versions, "versions", AGENT, "--model", MODEL)
    assert result.exit_code == 0 and "warning" in result.output and "gpt-4o.rollout.yaml:1" in result.output
    assert versions.old[:12] in result.stdout


def test_start_writes_the_rollout_file(cli, versions):
    implicit = run(cli, versions, "experiment", "start", AGENT, "-m", MODEL, "--treatment", versions.new, "--share",
                   "0.2")
    assert implicit.exit_code == 2 and "(it is what serves now)" in implicit.output and "--control" in implicit.output
    assert not rollout_path(versions.artifact).exists()  # nothing serves differently
    result = start(cli, versions, "--metric", "score", "--min-samples", "50", "--auto-promote")
    assert "started experiment exp-1" in result.stdout and f"control {versions.old[:12]}" in result.stdout
    assert f"the control is not what served before ({versions.new[:12]})" in " ".join(result.stdout.split())
    rollout = read_rollout(rollout_path(versions.artifact))
    assert rollout.active == versions.old and rollout.experiment.treatment == versions.new
    assert (rollout.experiment.metric, rollout.experiment.test, rollout.experiment.min_samples,
            rollout.experiment.auto_promote) == ("score", "welch", 50, True)


def test_start_errors_name_the_option_and_the_fix(cli, versions):
    bad_id = run(cli, versions, "experiment", "start", AGENT, "-m", MODEL, "--treatment", "v2", "--share", "0.2")
    assert bad_id.exit_code == 2 and "--treatment: 'v2' is not a version id" in bad_id.output
    assert "rosetta versions vuln-triage --model openai/gpt-4o" in bad_id.output
    share = run(cli, versions, "experiment", "start", AGENT, "-m", MODEL, "--treatment", versions.old, "--share", "1.5")
    assert share.exit_code == 2 and "--share: 1.5 is out of range" in share.output
    test = run(cli, versions, "experiment", "start", AGENT, "-m", MODEL, "--treatment", versions.old, "--share", "0.5",
               "--metric", "latency_s", "--test", "z")
    assert test.exit_code == 2 and "--test: the z-test compares rates" in test.output
    assert not rollout_path(versions.artifact).exists()
    start(cli, versions)
    again = run(cli, versions, "experiment", "start", AGENT, "-m", MODEL, "--treatment", versions.new, "--share", "0.5")
    assert again.exit_code == 2 and "experiment exp-1 is already running" in again.output


def test_report_says_when_there_are_too_few_samples(cli, versions):
    start(cli, versions)
    log = default_path(AGENT, versions.tree)
    log_arm(log, "control", versions.old, successes=20, failures=17)
    log_arm(log, "treatment", versions.new, successes=10, failures=2)
    result = run(cli, versions, "experiment", "report", AGENT)
    assert result.exit_code == 0, result.output
    assert "experiment exp-1" in result.stdout and "success ◂" in result.stdout
    assert ("not enough samples to decide: 37 control / 12 treatment with a success value, need 100 each"
            in result.stdout)
    data = json.loads(run(cli, versions, "experiment", "report", AGENT, "-m", MODEL, "-f", "json").stdout)
    assert data["arms"]["control"]["calls"] == 37 and data["decision"]["verdict"] == "not enough samples"
    assert data["tests"]["success"]["test"] == "z" and data["promoted"] is None


def test_report_errors(cli, versions):
    none = run(cli, versions, "experiment", "report", AGENT)
    assert none.exit_code == 2 and "no experiment is running for vuln-triage" in none.output
    assert "rosetta experiment start vuln-triage" in none.output
    versions.rollout(f"active: {versions.old}\nexperiment:\n  id: exp-1\n  share: 3\n")
    broken = run(cli, versions, "experiment", "report", AGENT, "--model", MODEL)
    assert broken.exit_code == 2 and "gpt-4o.rollout.yaml:4:3: experiment.share: 3 is out of range" in broken.output
    assert "experiment.treatment: missing" in broken.output


def test_promote_auto_flips_the_active_version_only_when_the_rule_holds(cli, versions):
    start(cli, versions)
    log = default_path(AGENT, versions.tree)
    file = rollout_path(versions.artifact)
    before = file.read_bytes()
    log_arm(log, "control", versions.old, successes=60, failures=40)
    log_arm(log, "treatment", versions.new, successes=62, failures=38)  # no real difference
    held = run(cli, versions, "experiment", "promote", AGENT, "-m", MODEL, "--auto")
    assert held.exit_code == 1 and "not promoted: no significant difference in success rate" in held.stdout
    assert file.read_bytes() == before
    log_arm(log, "treatment", versions.new, successes=100, failures=0)  # now 81% against 60%
    passed = run(cli, versions, "experiment", "promote", AGENT, "-m", MODEL, "--auto")
    assert passed.exit_code == 0, passed.output
    assert "the treatment is better" in passed.stdout and f"promoted {versions.new[:12]}" in passed.stdout
    assert read_rollout(file) == Rollout(versions.new)


def test_promote_refuses_a_worse_or_undecided_treatment_unless_forced(cli, versions):
    start(cli, versions)
    log = default_path(AGENT, versions.tree)
    early = run(cli, versions, "experiment", "promote", AGENT, "-m", MODEL)  # no outcomes yet
    assert early.exit_code == 1 and "not promoted: not enough samples" in early.stdout
    log_arm(log, "control", versions.old, successes=80, failures=20)
    log_arm(log, "treatment", versions.new, successes=50, failures=50)
    for flags in ((), ("--auto",)):
        result = run(cli, versions, "experiment", "promote", AGENT, "-m", MODEL, *flags)
        assert result.exit_code == 1 and "the treatment is worse" in result.stdout and "--force" in result.output
        assert read_rollout(rollout_path(versions.artifact)).experiment is not None
    forced = run(cli, versions, "experiment", "promote", AGENT, "-m", MODEL, "--force")
    assert forced.exit_code == 0 and "the treatment is worse" in forced.stdout and "(--force)" in forced.stdout
    assert read_rollout(rollout_path(versions.artifact)) == Rollout(versions.new)


def test_report_auto_promotes_when_the_experiment_says_so(cli, versions):
    start(cli, versions, "--auto-promote", "--min-samples", "30")
    log = default_path(AGENT, versions.tree)
    log_arm(log, "control", versions.old, successes=10, failures=20)
    log_arm(log, "treatment", versions.new, successes=25, failures=5)
    result = run(cli, versions, "experiment", "report", AGENT)
    assert result.exit_code == 0 and f"auto_promote: promoted {versions.new[:12]}" in result.stdout
    assert read_rollout(rollout_path(versions.artifact)) == Rollout(versions.new)


def test_promote_and_stop_by_hand(cli, versions):
    start(cli, versions)
    both = run(cli, versions, "experiment", "promote", AGENT, "-m", MODEL, "--auto", "--version", versions.old)
    assert both.exit_code == 2 and "--auto/--force and --version do not mix" in both.output
    stopped = run(cli, versions, "experiment", "stop", AGENT, "-m", MODEL)
    assert stopped.exit_code == 0, stopped.output
    assert f"stopped experiment exp-1: {versions.new[:12]} serves again, as before" in " ".join(stopped.stdout.split())
    assert read_rollout(rollout_path(versions.artifact)) == Rollout(versions.new)
    again = run(cli, versions, "experiment", "stop", AGENT, "-m", MODEL)
    assert again.exit_code == 2 and "no experiment is running for vuln-triage on openai/gpt-4o" in again.output
    promoted = run(cli, versions, "experiment", "promote", AGENT, "-m", MODEL, "--version", versions.old[:10])
    assert promoted.exit_code == 0 and read_rollout(rollout_path(versions.artifact)) == Rollout(versions.old)


def test_versions_shows_an_optimized_versions_scores(cli, versions):
    from dataclasses import replace

    from rosetta.store.artifact import dump_artifact, parse_artifact, read_header
    from rosetta.store.measured import mark_measured
    from rosetta.store.publish import publish

    plain = parse_artifact(versions.artifact.read_text(), path=str(versions.artifact))
    scores = {"metric": "fields", "dev": 0.8, "test": 0.75, "dev_examples": 40, "test_examples": 100}
    optimized = replace(plain, provenance=replace(plain.provenance, optimizer={"name": "rosetta"}, scores=scores,
                                                  dataset_sha256="ab" * 32))
    publish(versions.artifact, dump_artifact(optimized), versions.tree / "compiled")
    forged = " ".join(run(cli, versions, "versions", AGENT, "--model", MODEL).stdout.split())
    assert "not measured here" in forged and "0.800" not in forged  # issue 81: written by hand, as a clone ships it
    planted = json.loads(run(cli, versions, "versions", AGENT, "-m", MODEL, "-f", "json").stdout)["versions"][0]
    assert planted["scores"] == {} and planted["recorded_scores"] == scores and planted["measured_here"] is False
    mark_measured(versions.tree, read_header(versions.artifact.read_text()).content_sha256)  # as a search here does
    result = run(cli, versions, "versions", AGENT, "--model", MODEL)
    assert result.exit_code == 0 and "3 versions" in result.stdout
    shown = " ".join(result.stdout.split())
    assert all(part in shown for part in ("fields: dev", "0.800 (40), test 0.750 (100)", "abababab", "rosetta")), shown
    other = replace(optimized, provenance=replace(optimized.provenance, dataset_sha256="cd" * 32,
                                                  scores={**scores, "test": 0.9, "test_examples": 5}))
    publish(versions.artifact, dump_artifact(other), versions.tree / "compiled")
    mixed = " ".join(run(cli, versions, "versions", AGENT, "--model", MODEL).stdout.split())
    assert "cdcdcdcd" in mixed and "measured on different datasets" in mixed
    rows = json.loads(run(cli, versions, "versions", AGENT, "-m", MODEL, "-f", "json").stdout)["versions"]
    assert {row["dataset_sha256"] for row in rows} == {"ab" * 32, "cd" * 32, None}
