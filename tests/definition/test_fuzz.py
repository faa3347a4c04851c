"""Fuzzed definitions (issue 52): thousands of mutations of the bundled and corpus agents, each
loaded, linted, lowered and rendered for one model of every adapter, and some through the CLI.

Whatever the input, rosetta answers with one of its own errors (a ``RosettaError``, located) or a
result: never another exception, never a traceback, never more than a few seconds for one
definition, and never a read of a file outside the definition's project. The mutator lives in
``definition_fuzzer.py`` (shared with ``bench/fuzz_definitions.py``, which lists the slowest cases).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from definition_fuzzer import MODELS, FileAudit, generate, run_case, run_cli

CASE_LIMIT_S = 5.0
"""Most CPU time one definition may take through load, lint, lower, typing and four renders (CPU, not
wall time: other processes on a busy machine do not count against it)."""
HANG_S = 60
"""A case still running after this long is stopped and reported as hung."""


class Hung(Exception):
    """Raised by the alarm in a case that runs past :data:`HANG_S`."""


def _alarm(signum: int, frame: object) -> None:
    raise Hung(f"still running after {HANG_S} s")


def fuzz(root: Path, count: int, seed: int, cli_every: int) -> tuple[list[str], FileAudit]:
    """Run ``count`` cases in-process, and every ``cli_every``-th through `validate` and `render`;
    return what went wrong, one line per failure, and the file audit."""
    failures: list[str] = []
    runner = CliRunner()
    audit = FileAudit(root)
    models = list(MODELS.values())
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for case in generate(root, count, seed):
            what = f"case {case.number} ({case.seed}; {'; '.join(case.mutations)})"
            start = time.process_time()
            signal.alarm(HANG_S)
            try:
                with audit:
                    run_case(case)
            except Exception as error:  # run_case lets every RosettaError through as a refusal
                failures.append(f"{what}: {type(error).__name__}: {str(error)[:300]}")
            finally:
                signal.alarm(0)
            elapsed = time.process_time() - start
            if elapsed > CASE_LIMIT_S:
                failures.append(f"{what}: took {elapsed:.1f} s of CPU")
            if case.number % cli_every:
                continue
            model = models[case.number // cli_every % len(models)]
            signal.alarm(2 * HANG_S)
            try:
                failures += [f"{what}: {problem}" for problem in run_cli(case, root, model, runner, audit)]
            finally:
                signal.alarm(0)
    finally:
        signal.signal(signal.SIGALRM, previous)
    return failures, audit


def test_a_hundred_fuzzed_definitions_each_give_a_result_or_a_located_error(tmp_path):
    failures, audit = fuzz(tmp_path, count=100, seed=1, cli_every=5)
    assert not failures, "\n".join(failures)
    assert not audit.outside, f"files read outside the project: {sorted(set(audit.outside))}"


@pytest.mark.slow
def test_a_thousand_fuzzed_definitions_each_give_a_result_or_a_located_error(tmp_path):
    # ~35 s of one core: 1,000 definitions in-process, 100 of them through validate and render
    # (bench/fuzz_definitions.py runs 3,000 with the same seed and lists the slowest)
    failures, audit = fuzz(tmp_path, count=1000, seed=52, cli_every=10)
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:50])
    assert not audit.outside, f"files read outside the project: {sorted(set(audit.outside))}"


def test_the_audit_sees_a_read_outside_the_project(tmp_path):
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("secret")
    project = tmp_path / "project"
    project.mkdir()
    with FileAudit(project) as audit:
        (project / "inside.txt").write_text("fine")
        outside.read_text()
    assert audit.outside == [str(outside.resolve())]


def test_the_generator_gives_the_same_cases_for_the_same_seed(tmp_path):
    first = [(c.seed, c.mutations, c.path.read_bytes()) for c in generate(tmp_path / "a", 40, seed=9)]
    second = [(c.seed, c.mutations, c.path.read_bytes()) for c in generate(tmp_path / "b", 40, seed=9)]
    assert first == second
    assert len({m for _, mutations, _ in first for m in mutations}) > 20  # varied, not one mutation
