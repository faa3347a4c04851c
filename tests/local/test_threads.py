"""Issue 59: the embedded model's default thread count does not oversubscribe the CPUs, the explicit
setting wins, and a slow local call says how to change the count. No model is loaded here."""

from __future__ import annotations

import logging
import subprocess
import sys
import time

import pytest

from rosetta.local import threads
from rosetta.local.threads import default_threads


@pytest.mark.parametrize(("cpus", "load", "expected"), [
    (1, None, 1), (2, None, 1), (3, None, 1), (4, None, 2), (16, None, 8),  # load unknown: half, at least one
    (2, 0.0, 2), (8, 0.2, 8),  # an idle machine: every CPU
    (2, 1.56, 1),  # issue 59's machine: another job on one of two CPUs
    (8, 5.0, 3), (8, 5.6, 2), (16, 15.0, 1), (4, 9.0, 1),  # a busy machine: only its free CPUs, never below one
    (0, None, 1), (8, -1.0, 4), (8, float("nan"), 4),  # nonsense in: a usable count out
])
def test_the_default_is_the_free_cpus_and_fewer_on_a_busy_machine(cpus, load, expected):
    assert default_threads(cpus, load) == expected


def test_the_setting_wins_and_the_default_reads_this_process_cpus_and_the_load(monkeypatch):
    monkeypatch.setattr(threads, "available_cpus", lambda: 8)
    monkeypatch.setattr(threads, "current_load", lambda: 1.0)
    assert threads.thread_count(None) == 7
    monkeypatch.setattr(threads, "current_load", lambda: 7.0)
    assert threads.thread_count(None) == 1
    assert threads.thread_count(6) == 6  # the project's local_threads: taken as given, busy or not


def test_the_setting_is_the_projects_wherever_the_process_stands(monkeypatch, tmp_path):
    from rosetta.local.project import LocalSettings
    from rosetta.settings import load_settings

    (tmp_path / "pyproject.toml").write_text("[tool.rosetta]\nlocal_threads = 3\n")
    monkeypatch.delenv("ROSETTA_LOCAL_THREADS", raising=False)
    monkeypatch.delenv("ROSETTA_ROOT", raising=False)
    carried = LocalSettings.of(load_settings(tmp_path)).metadata({"trace": "t"})
    assert carried["trace"] == "t" and LocalSettings.of_call({"litellm_params": {"metadata": carried}}).local_threads == 3
    monkeypatch.setenv("ROSETTA_LOCAL_THREADS", "6")  # the environment wins over the project's file
    assert LocalSettings.of(load_settings(tmp_path)).local_threads == 6


def test_the_cpus_counted_are_those_this_process_may_use(monkeypatch):
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 5}, raising=False)
    assert threads.available_cpus() == 2
    monkeypatch.delattr(threads.os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 12)
    assert threads.available_cpus() == 12


def test_a_slow_local_call_says_how_to_set_the_threads_once_per_model(monkeypatch, caplog):
    monkeypatch.setattr(threads, "_slow_said", set())
    with caplog.at_level(logging.WARNING, logger="rosetta.local"):
        threads.slow_call("local/gemma-3-270m", threads.SLOW_CALL_S - 1)  # not slow: nothing said
        assert not caplog.records
        for _ in range(3):
            threads.slow_call("local/gemma-3-270m", 82.0)
        threads.slow_call("local/smollm2-135m-instruct", 82.0)
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 2 and "local/gemma-3-270m took 82 s" in said[0]
    assert all("ROSETTA_LOCAL_THREADS" in line and "local_threads" in line for line in said)


def test_a_slow_local_answer_through_the_runtime_is_reported(tree, monkeypatch, caplog):
    """The runtime times each answer and hands an embedded model's to slow_call (no model loaded:
    litellm answers from mock_response)."""
    from rosetta.local.litellm_offline import import_litellm
    from rosetta.runtime.agent import load

    litellm = import_litellm()

    answer = '{"severity": "high", "rationale": "Unauthenticated SQL injection in the login form."}'
    monkeypatch.setattr(threads, "_slow_said", set())
    monkeypatch.setattr(threads, "SLOW_CALL_S", -1.0)  # every answer counts as slow
    agent = load("vuln-triage", project=tree)
    with caplog.at_level(logging.WARNING, logger="rosetta.local"):
        result = agent.run({"report": "SQL injection in the login form lets an unauthenticated attacker in."},
                           "local/gemma-3-270m",
                           complete=lambda **kwargs: litellm.completion(**kwargs, mock_response=answer))
    assert result.valid
    said = [r.getMessage() for r in caplog.records if r.name == "rosetta.local"]
    assert len(said) == 1 and said[0].startswith("local/gemma-3-270m took")
    assert "ROSETTA_LOCAL_THREADS" in said[0]


STAT = """cpu  300 0 100 500 100 0 0 0 0 0
cpu0 100 0 50 200 50 0 0 0 0 0
cpu1 200 0 50 300 50 0 0 10 0 0
cpu2 0 0 0 9 x
intr 1 2 3
"""


def test_the_cpu_times_are_each_usable_cpus_busy_and_total_ticks(monkeypatch, tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(STAT)
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert threads.cpu_times(stat) == {0: (150, 400), 1: (260, 610)}  # idle and I/O wait are free, steal busy
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {1}, raising=False)
    assert threads.cpu_times(stat) == {1: (260, 610)}  # only the CPUs this process may run on
    assert threads.cpu_times(tmp_path / "missing") == {}


def test_the_load_is_what_the_cpus_do_now_not_a_minute_s_average(monkeypatch):
    """A job that ended a moment ago no longer counts: one CPU busy over the sample, one idle."""
    readings = iter([{0: (100, 1000), 1: (100, 1000)}, {0: (200, 1100), 1: (100, 1100)}])
    monkeypatch.setattr(threads, "cpu_times", lambda: next(readings))
    monkeypatch.setattr(threads, "SAMPLE_S", 0.0)
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (2.0, 2.0, 2.0))  # the average still remembers the job
    assert threads.current_load() == pytest.approx(1.0)
    monkeypatch.setattr(threads, "cpu_times", lambda: {})  # no /proc/stat (macOS): the load average
    assert threads.current_load() == 2.0


def test_a_cpu_spinning_now_is_seen_as_busy():
    """On this (Linux) machine the sample reads /proc/stat: a process spinning now is counted."""
    assert threads.cpu_times(), "no /proc/stat to read"
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # started and running
        assert threads.current_load() >= 0.6
    finally:
        spinner.kill()
        spinner.wait()


def test_settings_a_call_carries_in_another_shape_are_a_clear_error():
    import pytest

    from rosetta.errors import UsageError
    from rosetta.local.project import KEY, LocalSettings

    with pytest.raises(UsageError, match="metadata.rosetta_local is not what rosetta's runtime writes"):
        LocalSettings.of_call({"litellm_params": {"metadata": {KEY: {"local_threads": 2}}}})  # no cache_dir

