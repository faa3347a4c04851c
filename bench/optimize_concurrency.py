"""Benchmark: does ``--jobs`` pay in ``compile --optimize``, and is the artifact the same at every ``-j``?

An OpenAI-compatible server on 127.0.0.1 (tests/fault_server.py) answers like the toy model of
tests/scripted_model.py after a fixed latency (1 s by default), as a hosted model would. For each
``-j`` the same search (the toy agent, 24 train / 50 dev / 30 test rows, seed 0, ``--max-calls
150``, no proposer) runs in a fresh project with a cold cache, and the table shows:

- wall time of the search and its test pass, as a user waits for it;
- the critical path: Σ over phases (each rung, the confirmation, the test pass) of
  ⌈calls / j⌉ × latency — what ``j`` calls at once could do at best, phase by phase;
- wall / critical path (target at -j 16: ≤ 1.5);
- whether the artifact's bytes equal the ``-j 1`` artifact's.

    python bench/optimize_concurrency.py [--latency 1.0] [--jobs 1,4,16] [--max-calls 150]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent / "src"))

import scripted_model  # noqa: E402
from fault_server import FaultServer  # noqa: E402

MODEL = "openai/toy-latency"


def project(root: Path, url: str) -> Path:
    root.mkdir(parents=True)
    scripted_model.write_toy_project(root, dev=50, test=30)
    with (root / "pyproject.toml").open("a", encoding="utf-8") as pyproject:
        pyproject.write(f'\n[tool.rosetta.models."{MODEL}"]\napi_base = "{url}"\ncontext_window = 8192\n'
                        "max_output_tokens = 256\n")
    return root


def search(root: Path, jobs: int, max_calls: int) -> tuple[float, object]:
    from rosetta.optimize.study import SearchSettings
    from rosetta.optimize.target import OptimizeRequest, optimize
    from rosetta.settings import load_settings

    request = OptimizeRequest(definition=root / "signatures" / "toy-sorter.md", model=MODEL,
                              settings=SearchSettings(max_calls=max_calls, proposer=None, jobs=jobs))
    started = time.perf_counter()
    report = optimize(request, settings=load_settings(root))
    return time.perf_counter() - started, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=1.0, help="seconds the endpoint takes per answer")
    parser.add_argument("--jobs", default="1,4,16", help="comma-separated -j values")
    parser.add_argument("--max-calls", type=int, default=150)
    args = parser.parse_args()
    import litellm

    litellm.suppress_debug_info = True
    rows = []
    with FaultServer([("reply", scripted_model.toy_answer, args.latency)]) as server, \
            tempfile.TemporaryDirectory() as scratch:
        first: bytes | None = None
        for jobs in (int(j) for j in args.jobs.split(",")):
            root = project(Path(scratch) / f"j{jobs}", server.url)
            wall, report = search(root, jobs, args.max_calls)
            outcome = report.outcome
            phases = {**outcome.phases, "test": outcome.test_calls}
            critical = sum(math.ceil(calls / jobs) for calls in phases.values()) * args.latency
            written = Path(report.artifact).read_bytes()
            first = written if first is None else first
            rows.append((jobs, wall, critical, outcome.calls + outcome.test_calls, server.peak, written == first))
            server.peak = 0
    print(f"`compile --optimize` against a {args.latency:g}-s endpoint, --max-calls {args.max_calls} "
          "(toy agent, 50 dev / 30 test rows, cold cache)\n")
    print("| -j | wall s | critical path s | wall / critical path | calls (search + test) | most at once | "
          "same bytes as -j 1 |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for jobs, wall, critical, calls, peak, same in rows:
        print(f"| {jobs} | {wall:.1f} | {critical:.1f} | {wall / critical:.2f}× | {calls} | {peak} | "
              f"{'yes' if same else 'NO'} |")


if __name__ == "__main__":
    main()
