"""The outcome log: what a line records, and appends from many processes at once losing nothing."""

from __future__ import annotations

import json
import multiprocessing

import pytest

import rosetta
from rollout_project import GOOD, MODEL, REPORT, versions  # noqa: F401  (a fixture)
from rosetta.errors import UsageError
from rosetta.rollout.outcomes import ATOMIC_APPEND, append_line, read_outcomes
from rosetta.runtime.agent import load

WRITERS, LINES = 4, 1500


def _write_lines(path: str, writer: int, count: int) -> None:
    """One writer process: ``count`` lines, every tenth one longer than an atomic append."""
    from pathlib import Path

    for number in range(count):
        padding = "x" * (ATOMIC_APPEND + 100) if number % 10 == 0 else ""
        append_line(Path(path), json.dumps({"writer": writer, "n": number, "padding": padding}))


def test_concurrent_writers_lose_no_line_and_write_only_whole_lines(tmp_path):
    path = tmp_path / "outcomes" / "agent.jsonl"
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_write_lines, args=(str(path), writer, LINES)) for writer in range(WRITERS)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    records = [json.loads(line) for line in raw.decode("utf-8").splitlines()]  # a torn line would not parse
    assert len(records) == WRITERS * LINES
    for writer in range(WRITERS):
        assert [r["n"] for r in records if r["writer"] == writer] == list(range(LINES))  # each writer's order kept
    assert sum(len(r["padding"]) > ATOMIC_APPEND for r in records) == WRITERS * LINES // 10


def test_record_outcome_writes_what_the_result_says(versions, tmp_path, monkeypatch):
    versions.rollout(f"active: {versions.old}\nexperiment: {{id: exp-1, treatment: {versions.new}, share: 1.0}}\n")
    agent = load("vuln-triage", project=versions.tree)
    result = agent.run(REPORT, model=MODEL, user_id="user-1", extra={"mock_response": GOOD})
    monkeypatch.chdir(tmp_path)  # issue 57: the agent's project's log, not the working directory's
    path = rosetta.record_outcome(result, success=True, score=0.75)
    assert path == versions.tree / ".rosetta" / "outcomes" / "vuln-triage.jsonl"
    assert not (tmp_path / ".rosetta").exists()
    rosetta.record_outcome(result, success=False, path=tmp_path / "elsewhere.jsonl")
    line = json.loads(path.read_text())
    assert line["ts"].endswith("+00:00")
    assert len(line.pop("hmac")) == 64  # issue 81: signed under the project's key; a report counts only such lines
    assert "hmac" not in (tmp_path / "elsewhere.jsonl").read_text()  # a log the user names is the user's
    del line["ts"]
    assert line == {"agent": "vuln-triage", "model": MODEL, "experiment": "exp-1", "arm": "treatment",
                    "version": versions.new, "valid": True, "retries": 0,
                    "latency_s": pytest.approx(result.latency_s, abs=1e-6),  # rounded to the microsecond
                    "cost_usd": pytest.approx(result.cost, abs=1e-8), "success": True, "score": 0.75}
    (outcome,), skipped = read_outcomes(tmp_path / "elsewhere.jsonl")
    assert (outcome.success, outcome.score, outcome.arm, skipped) == (False, None, "treatment", 0)


@pytest.mark.parametrize("bad", [{"success": "yes"}, {"success": 1}, {"score": float("nan")}, {"score": True}])
def test_record_outcome_refuses_bad_verdicts(versions, tmp_path, bad):
    result = load("vuln-triage", project=versions.tree).run(REPORT, model=MODEL, extra={"mock_response": GOOD})
    with pytest.raises(UsageError):
        rosetta.record_outcome(result, path=tmp_path / "log.jsonl", **bad)
    assert not (tmp_path / "log.jsonl").exists()


def test_reading_skips_torn_and_foreign_lines(tmp_path):
    path = tmp_path / "log.jsonl"
    good = {"ts": "t", "agent": "a", "model": "m", "experiment": "e", "arm": "control", "version": "v",
            "valid": True, "retries": 1, "latency_s": 0.5, "cost_usd": None, "success": None, "score": 2}
    path.write_text(json.dumps(good) + "\n" + '{"ts": "t", "agent"\n' + json.dumps({**good, "valid": "no"}) + "\n"
                    + "[1, 2]\n\n" + json.dumps(good) + "\n")
    outcomes, skipped = read_outcomes(path)
    assert len(outcomes) == 2 and skipped == 3
    assert outcomes[0].retries == 1 and outcomes[0].score == 2
    assert read_outcomes(tmp_path / "missing.jsonl") == ([], 0)
