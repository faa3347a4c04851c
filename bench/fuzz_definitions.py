"""Benchmark: the fuzzed definitions of tests/definition/test_fuzz.py, slowest first.

Runs the same seeded generator (tests/definition/definition_fuzzer.py) and, for each case, the same
stages in-process: load, lint, lower, type the output, render for one model of each adapter.
Prints the slowest cases (CPU and wall seconds, the mutations that made them, the stage that took
longest), the time per stage over all cases, and every exception that is not one of rosetta's own
errors. Targets (issues 52, 81): no case over 5 s of CPU or 500 MB, no exception but a RosettaError;
with ``--cli-every N``, every Nth case also goes through `rosetta validate` and `rosetta render` (the
fuzz test's own commands) and no command prints a traceback.

    python bench/fuzz_definitions.py [--count 3000] [--seed 52] [--top 15] [--cli-every N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "definition"))
from definition_fuzzer import MODELS, STAGES, generate, run_case, run_cli  # noqa: E402  (the fuzz test's generator)

CASE_TARGET_S = 5.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=52)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--cli-every", type=int, default=0, help="also run every Nth case through the CLI")
    args = parser.parse_args()

    import resource

    from typer.testing import CliRunner

    runner, models, commands, cli_failures = CliRunner(), list(MODELS.values()), 0, []
    cases, failures, per_stage = [], [], Counter()
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        for case in generate(Path(folder), args.count, args.seed):
            if args.cli_every and case.number % args.cli_every == 0:
                model = models[case.number // args.cli_every % len(models)]
                cli_failures += [f"case {case.number}: {problem}" for problem in run_cli(case, Path(folder), model,
                                                                                           runner)]
                commands += 2
            start, cpu = time.perf_counter(), time.process_time()
            try:
                timings = run_case(case)
            except Exception as error:  # what the fuzz test would fail on
                where = traceback.extract_tb(error.__traceback__)[-1]
                failures.append(f"case {case.number}: {type(error).__name__} at {Path(where.filename).name}:"
                                f"{where.lineno}: {str(error)[:120]}")
                timings = []
            for stage, seconds in timings:
                per_stage[stage] += seconds
            slowest = max(timings, key=lambda t: t[1], default=("-", 0.0))
            cases.append((time.process_time() - cpu, time.perf_counter() - start, case, slowest))
        wall = time.perf_counter() - started

    cases.sort(key=lambda c: c[0], reverse=True)
    print(f"{len(cases):,} fuzzed definitions (seed {args.seed}) in {wall:.1f} s, generation included; "
          f"slowest {min(args.top, len(cases))}:")
    print(f"{'cpu s':>7} {'wall s':>7}  {'case':>5}  {'slowest stage (wall s)':<24} mutations [seed file]")
    for cpu, seconds, case, (stage, stage_seconds) in cases[:args.top]:
        print(f"{cpu:>7.3f} {seconds:>7.3f}  {case.number:>5}  {f'{stage} {stage_seconds:.3f}':<24} "
              f"{'; '.join(case.mutations)} [{Path(case.seed).name}]")
    print(f"\n{'stage':<24} {'seconds':>8}  (over all cases)")
    for stage in STAGES:
        print(f"{stage:<24} {per_stage[stage]:>8.2f}")
    worst = cases[0][0] if cases else 0.0
    print(f"\nslowest case {worst:.2f} s of CPU (target < {CASE_TARGET_S:.0f} s: "
          f"{'ok' if worst < CASE_TARGET_S else 'MISSED'}); "
          f"{len(failures)} exceptions other than RosettaError (target 0)")
    for failure in failures:
        print("  " + failure)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f"peak resident memory of the whole run {peak:,.0f} MB (so no case over it; target < 500 MB)")
    if args.cli_every:
        print(f"{commands} CLI commands (every {args.cli_every}th case through validate and render): "
              f"{len(cli_failures)} tracebacks, crashes or unexpected exit codes (target 0)")
        for failure in cli_failures:
            print("  " + failure)


if __name__ == "__main__":
    main()
