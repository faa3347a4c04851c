"""Benchmark: the fuzzed definitions of tests/definition/test_fuzz.py, slowest first.

Runs the same seeded generator (tests/definition/definition_fuzzer.py) and, for each case, the same
stages in-process: load, lint, lower, type the output, render for one model of each adapter.
Prints the slowest cases (CPU and wall seconds, the mutations that made them, the stage that took
longest), the time per stage over all cases, and every exception that is not one of rosetta's own
errors. Targets (issue 52): no case over 5 s of CPU, no exception but a RosettaError.

    python bench/fuzz_definitions.py [--count 3000] [--seed 52] [--top 15]
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
from definition_fuzzer import STAGES, generate, run_case  # noqa: E402  (the generator the fuzz test uses)

CASE_TARGET_S = 5.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=52)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()

    cases, failures, per_stage = [], [], Counter()
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        for case in generate(Path(folder), args.count, args.seed):
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


if __name__ == "__main__":
    main()
