"""Benchmark: compile 1,000 agents × 4 models, recompile with nothing changed, and runtime selection.

Targets (issue #4): no-op recompile < 1 s; median warm `prompt_for` < 50 µs; a fresh
`python -c "import rosetta; rosetta.load(...).prompt_for(...)"` < 300 ms wall. The full compile
has no target; its time is reported, with `--jobs 1` as the baseline for the parallel run.

    python bench/compile.py [--agents 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from load_validate import generate  # noqa: E402  (same generated definitions as the load benchmark)

MODELS = ("sonnet", "openai/gpt-4o", "gemini/2.5-pro", "ollama/llama3.1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from rosetta.compile.compiler import CompileOptions, Status, compile_paths
    from rosetta.providers.adapter import load_adapters

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "pyproject.toml").write_text("[tool.rosetta]\n")
        (root / "signatures").mkdir()
        generate(root / "signatures", args.agents, seed=7)
        adapters = load_adapters()

        def run(out: str, *, jobs: int | None = None, force: bool = False) -> tuple[float, object]:
            options = CompileOptions(out=root / out, root=root, adapters=adapters, models=MODELS, force=force)
            start = time.perf_counter()
            report = compile_paths([root / "signatures"], options, jobs=jobs)
            return time.perf_counter() - start, report

        serial, _ = run("compiled-serial", jobs=1)
        full, report = run("compiled")
        noop = min(run("compiled")[0] for _ in range(3))
        written, failed = report.count(Status.WRITTEN), report.count(Status.FAILED)

        import rosetta

        agent = rosetta.load("agent-1", project=root)
        agent.prompt_for("sonnet")
        samples = []
        for _ in range(args.repeat * 2000):
            began = time.perf_counter_ns()
            agent.prompt_for("sonnet")
            samples.append(time.perf_counter_ns() - began)
        warm_us = statistics.median(samples) / 1000

        code = "import rosetta; rosetta.load('agent-1').prompt_for('sonnet')"
        walls = []
        for _ in range(args.repeat):
            began = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], cwd=root, check=True)
            walls.append(time.perf_counter() - began)
        baseline = []
        for _ in range(args.repeat):
            began = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            baseline.append(time.perf_counter() - began)

    targets = args.agents * len(MODELS)
    print(f"{args.agents} agents x {len(MODELS)} models = {targets:,} targets ({written:,} written, {failed} failed)"
          f" · python {sys.version.split()[0]}")
    print(f"{'measurement':<48} {'value':>10}  {'detail':<24} {'target':<9} result")
    rows = [
        ("full compile, one process (--jobs 1)", f"{serial:.2f} s", f"{serial / targets * 1e3:.2f} ms/target", "", ""),
        ("full compile, all CPUs", f"{full:.2f} s", f"ratio {serial / full:.2f}x vs 1 process", "", ""),
        ("no-op recompile (best of 3)", f"{noop:.2f} s", f"{noop / targets * 1e6:.0f} µs/target", "< 1 s",
         "ok" if noop < 1 else "MISSED"),
        ("prompt_for, warm (median)", f"{warm_us:.2f} µs", f"{len(samples):,} calls", "< 50 µs",
         "ok" if warm_us < 50 else "MISSED"),
        ("python -c 'import rosetta; load().prompt_for()'", f"{statistics.median(walls) * 1e3:.0f} ms",
         f"python -c pass: {statistics.median(baseline) * 1e3:.0f} ms", "< 300 ms",
         "ok" if statistics.median(walls) < 0.3 else "MISSED"),
    ]
    for name, value, detail, target, result in rows:
        print(f"{name:<48} {value:>10}  {detail:<24} {target:<9} {result}")


if __name__ == "__main__":
    main()
