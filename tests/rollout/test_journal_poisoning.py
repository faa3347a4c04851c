"""Issue 52: the outcome log (``.rosetta/outcomes/<agent>.jsonl``) earns its trust. A line with an
impossible number (1e308, NaN, a negative latency, an integer no float holds) is skipped and counted
like a torn one, so `rosetta experiment report` neither crashes nor changes its verdict; the statistics
themselves never overflow; and the log is read and appended to only as a plain file reached without
symlinks."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

import rosetta
from rollout_project import GOOD, MODEL, REPORT, log_arm, versions  # noqa: F401  (a fixture)
from rosetta.errors import UsageError
from rosetta.rollout.outcomes import append_line, default_path, read_outcomes, signed_line
from rosetta.runtime.agent import load

AGENT = "vuln-triage"
LINE = {"ts": "2025-01-01T00:00:00+00:00", "agent": AGENT, "model": MODEL, "experiment": "exp-1",
        "arm": "treatment", "version": None, "valid": True, "retries": 0, "latency_s": 0.5, "cost_usd": 0.001,
        "success": True, "score": 0.5}
IMPOSSIBLE = [
    {"score": 1e308}, {"score": -1e308}, {"score": float("nan")}, {"score": float("inf")}, {"score": 10 ** 400},
    {"latency_s": -0.2}, {"latency_s": 1e308}, {"latency_s": float("nan")}, {"cost_usd": -0.01},
    {"cost_usd": float("inf")}, {"retries": -1}, {"retries": 10 ** 400}, {"retries": True}, {"retries": 1.5},
    {"arm": ["treatment"]}, {"experiment": {"id": "exp-1"}}, {"success": "yes"},
]


def lines(*changes: dict, root: Path | None = None) -> str:
    """Outcome lines; signed as this machine's rosetta signs them when ``root`` (the project) is given."""
    return "".join((signed_line(json.dumps({**LINE, **change}), root) if root else json.dumps({**LINE, **change}))
                   + "\n" for change in changes)


def test_impossible_numbers_are_skipped_and_counted(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text(lines({}, *IMPOSSIBLE, {"score": -3.5, "latency_s": 0, "retries": 2}, {}))
    outcomes, skipped = read_outcomes(path)
    assert skipped == len(IMPOSSIBLE) and len(outcomes) == 3
    assert [o.score for o in outcomes] == [0.5, -3.5, 0.5] and outcomes[1].latency_s == 0.0


def test_a_line_torn_inside_a_character_costs_only_that_line(tmp_path):
    path = tmp_path / "log.jsonl"
    separated = json.dumps({**LINE, "model": "line\u2028separator"}, ensure_ascii=False)  # as record_outcome writes
    path.write_bytes(lines({}, {"model": "ünïcode"}).encode() + separated.encode() + b"\n"
                     + json.dumps(LINE).encode()[:-3] + "é".encode()[:1])
    outcomes, skipped = read_outcomes(path)
    assert [o.model for o in outcomes] == [MODEL, "ünïcode", "line\u2028separator"] and skipped == 1


@pytest.mark.parametrize("metric", ["success", "score"])
def test_report_ignores_planted_lines_and_counts_them(cli, versions, metric):
    started = cli("-C", versions.tree, "experiment", "start", AGENT, "--model", MODEL, "--treatment",
                  versions.new[:12], "--control", versions.old[:12], "--share", "0.2", "--id", "exp-1",
                  "--metric", metric)
    assert started.exit_code == 0, started.output
    log = default_path(AGENT, versions.tree)
    log_arm(log, "control", versions.old, successes=20, failures=17)
    log_arm(log, "treatment", versions.new, successes=10, failures=2)
    with log.open("a") as stream:  # every arm scored, so the score metric has samples
        for arm, version in (("control", versions.old), ("treatment", versions.new)):
            stream.write(lines(*({"arm": arm, "version": version, "score": 0.1 * n} for n in range(5)),
                               root=versions.tree))
    clean = cli("-C", versions.tree, "experiment", "report", AGENT, "-m", MODEL, "-f", "json")
    assert clean.exit_code == 0, clean.output
    planted = [{"arm": "treatment", "version": versions.new, **change} for change in IMPOSSIBLE]
    with log.open("a") as stream:  # two scores of 1e308 crashed the report with an OverflowError (signed:
        # a line this machine wrote and the disk then corrupted; a line it did not sign never counts, below)
        stream.write(lines(*planted, {"arm": "control", "version": versions.old, "score": 1e308}, root=versions.tree))
    for format in ("json", "text"):
        result = cli("-C", versions.tree, "experiment", "report", AGENT, "-m", MODEL, "-f", format)
        assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    assert f"{len(planted) + 1} line(s) in the outcome log skipped" in result.output
    poisoned = json.loads(cli("-C", versions.tree, "experiment", "report", AGENT, "-m", MODEL, "-f", "json").stdout)
    assert poisoned["skipped_lines"] == len(planted) + 1
    assert {**poisoned, "skipped_lines": 0} == json.loads(clean.stdout)  # the same arms, tests and decision


def test_statistics_of_huge_values_do_not_overflow():
    from rosetta.rollout.stats import mean, welch_t

    assert mean([1e308, 1e308]) == 1e308 and mean([1e308, -1e308, 3.0]) == 1.0
    assert math.isnan(mean([math.inf, -math.inf])) and math.isnan(mean([]))
    result = welch_t([1e308, 1e308, 1.7e308], [1e308, 0.0, 5.0])  # no OverflowError
    assert result.p_value is None or 0.0 <= result.p_value <= 1.0
    small = welch_t([1.0, 2.0, 3.5, 4.0], [2.0, 3.0, 5.0, 6.5])
    huge = welch_t([v * 1e300 for v in (1.0, 2.0, 3.5, 4.0)], [v * 1e300 for v in (2.0, 3.0, 5.0, 6.5)])
    assert huge.statistic == pytest.approx(small.statistic) and huge.p_value == pytest.approx(small.p_value)
    assert huge.df == pytest.approx(small.df) and huge.effect == pytest.approx(small.effect * 1e300)
    assert welch_t([1.0, math.nan, 2.0], [1.0, 2.0, 3.0]).p_value is None


def plant_fifo(log):
    os.mkfifo(log)


def plant_link_to_a_log(log):
    log.with_name("real.jsonl").write_text(lines({}))
    log.symlink_to(log.with_name("real.jsonl"))


def plant_dev_zero(log):
    log.symlink_to("/dev/zero")


def plant_linked_folder(log):
    elsewhere = log.parents[2] / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / log.name).write_text(lines({}))
    log.parent.rmdir()
    log.parent.symlink_to(elsewhere, target_is_directory=True)


@pytest.mark.parametrize("plant", [plant_fifo, plant_link_to_a_log, plant_dev_zero, plant_linked_folder],
                         ids=lambda plant: plant.__name__)
def test_report_refuses_a_log_that_is_not_a_plain_file_under_the_project(cli, versions, plant):
    started = cli("-C", versions.tree, "experiment", "start", AGENT, "--model", MODEL, "--treatment",
                  versions.new[:12], "--control", versions.old[:12], "--share", "0.2", "--id", "exp-1")
    assert started.exit_code == 0, started.output
    log = default_path(AGENT, versions.tree)
    log.parent.mkdir(parents=True)
    plant(log)
    result = cli("-C", versions.tree, "experiment", "report", AGENT, "-m", MODEL)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "cannot read the outcome log" in result.output and "symlink" in result.output


@pytest.mark.parametrize("link", ["file", "folder", "state folder"])
def test_record_outcome_refuses_to_follow_a_link(versions, tmp_path, monkeypatch, link):
    result = load(AGENT, project=versions.tree).run(REPORT, model=MODEL, extra={"mock_response": GOOD})
    monkeypatch.chdir(versions.tree)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / f"{AGENT}.jsonl").write_text("precious\n")
    log = default_path(AGENT, versions.tree)
    if link == "file":
        log.parent.mkdir(parents=True)
        log.symlink_to(victim / f"{AGENT}.jsonl")
    elif link == "folder":
        log.parent.parent.mkdir()
        log.parent.symlink_to(victim, target_is_directory=True)
    else:
        (victim / "outcomes").mkdir()
        log.parent.parent.symlink_to(victim, target_is_directory=True)
    before = sorted(victim.rglob("*"))
    with pytest.raises(UsageError, match="symlink"):
        rosetta.record_outcome(result, success=True)
    assert (victim / f"{AGENT}.jsonl").read_text() == "precious\n" and sorted(victim.rglob("*")) == before


def test_appending_to_a_fifo_neither_blocks_nor_writes(tmp_path):
    path = tmp_path / "log.jsonl"
    os.mkfifo(path)
    with pytest.raises(UsageError, match="not a plain file"):
        append_line(path, json.dumps(LINE))


def test_a_score_no_report_would_read_is_refused_when_recorded(versions, tmp_path):
    result = load(AGENT, project=versions.tree).run(REPORT, model=MODEL, extra={"mock_response": GOOD})
    with pytest.raises(UsageError, match="between"):
        rosetta.record_outcome(result, score=1e308, path=tmp_path / "log.jsonl")
    rosetta.record_outcome(result, score=-1e9, path=tmp_path / "log.jsonl")
    outcomes, skipped = read_outcomes(tmp_path / "log.jsonl")
    assert [outcome.score for outcome in outcomes] == [-1e9] and skipped == 0


def test_planted_outcome_lines_decide_no_experiment(cli, versions, tmp_path):
    """Issue 81: 150 lines per arm shipped in the project's log (or copied from another project,
    signed under its key) made `experiment promote` promote the treatment. Only lines this machine
    signed for this project count now."""
    started = cli("-C", versions.tree, "experiment", "start", AGENT, "--model", MODEL, "--treatment",
                  versions.new[:12], "--control", versions.old[:12], "--share", "0.2", "--id", "exp-1")
    assert started.exit_code == 0, started.output
    log = default_path(AGENT, versions.tree)
    elsewhere = tmp_path / "another-project"
    elsewhere.mkdir()
    log.parent.mkdir(parents=True)
    with log.open("a") as stream:
        stream.write(lines(*({"arm": "control", "version": versions.old, "success": n < 30} for n in range(150))))
        stream.write(lines(*({"arm": "treatment", "version": versions.new, "success": True} for n in range(150)),
                           root=elsewhere))
    promoted = cli("-C", versions.tree, "experiment", "promote", AGENT, "-m", MODEL)
    assert promoted.exit_code == 1 and "not enough samples" in promoted.stdout, promoted.output
    assert "300 line(s) in the outcome log skipped" in " ".join(promoted.output.split())
    report = json.loads(cli("-C", versions.tree, "experiment", "report", AGENT, "-m", MODEL, "-f", "json").stdout)
    assert report["arms"]["control"]["calls"] == 0 and report["skipped_lines"] == 300
    log_arm(log, "control", versions.old, successes=30, failures=120)  # this machine's own lines decide
    log_arm(log, "treatment", versions.new, successes=150, failures=0)
    assert cli("-C", versions.tree, "experiment", "promote", AGENT, "-m", MODEL).exit_code == 0
