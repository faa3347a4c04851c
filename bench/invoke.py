"""Benchmark: per-call overhead of `agent.arun`, excluding the model server's own time.

Target (issue #5): < 2 ms p50. Two measurements, both sequential calls on a warm agent:
- against the local HTTP test server: `arun` vs a bare `litellm.acompletion` with the same
  kwargs in the same run (the baseline) — the difference is what rosetta adds per call;
- with an instant completion function that returns a prepared litellm response: rosetta alone.

    python bench/invoke.py [--calls 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from fault_server import FaultServer  # noqa: E402  (the same server the tests use)

ANSWER = json.dumps({"severity": "high", "rationale": "Unauthenticated SQL injection in the login form."})
INPUTS = {"report": "SQL injection in the login form lets an unauthenticated attacker bypass authentication."}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()

    import shutil

    import rosetta
    from rosetta.local.litellm_offline import import_litellm

    litellm = import_litellm()
    with tempfile.TemporaryDirectory() as tmp, FaultServer([("ok", ANSWER)]) as server:
        root = Path(tmp)
        (root / "pyproject.toml").write_text("[tool.rosetta]\n")
        (root / "signatures").mkdir()
        shutil.copy(HERE.parent / "signatures" / "vuln-triage.md", root / "signatures")
        agent = rosetta.load("vuln-triage", project=root)
        extra = {"api_base": server.url, "api_key": "sk-bench"}
        kwargs = {**agent.prompt_for("openai/gpt-4o").to_litellm(INPUTS), **extra, "max_retries": 0, "num_retries": 0, "timeout": 60.0}

        async def timed(make) -> list[float]:
            samples = []
            for _ in range(args.calls):
                began = time.perf_counter()
                await make()
                samples.append(time.perf_counter() - began)
            return samples

        async def paired(first, second) -> tuple[list[float], list[float]]:
            """Both kinds of call alternately, so that the server's and the machine's drift over
            the run falls on both alike (one block after the other made the difference noise)."""
            ones, twos = [], []
            for _ in range(args.calls):
                for make, samples in ((first, ones), (second, twos)):
                    began = time.perf_counter()
                    await make()
                    samples.append(time.perf_counter() - began)
            return ones, twos

        async def measure() -> tuple[list[float], list[float], list[float]]:
            await agent.arun(INPUTS, model="openai/gpt-4o", **extra)  # warm up both paths
            await litellm.acompletion(**kwargs)
            rosetta_calls, bare_calls = await paired(lambda: agent.arun(INPUTS, model="openai/gpt-4o", **extra),
                                                     lambda: litellm.acompletion(**kwargs))
            prepared = await litellm.acompletion(**kwargs)

            async def instant(**_: object) -> object:
                return prepared

            alone = await timed(lambda: agent.arun(INPUTS, model="openai/gpt-4o", acomplete=instant, **extra))
            return rosetta_calls, bare_calls, alone

        rosetta_calls, bare_calls, alone = asyncio.run(measure())

    def p(samples: list[float], q: float) -> float:
        return statistics.quantiles(samples, n=100)[int(q) - 1] * 1e3

    overhead = statistics.median(rosetta_calls) - statistics.median(bare_calls)
    print(f"{args.calls} sequential calls each · python {sys.version.split()[0]}")
    print(f"{'measurement':<52} {'p50 ms':>8} {'p90 ms':>8}  target")
    rows = [
        ("arun against the local server", statistics.median(rosetta_calls) * 1e3, p(rosetta_calls, 90), ""),
        ("baseline: bare litellm.acompletion, same kwargs", statistics.median(bare_calls) * 1e3, p(bare_calls, 90), ""),
        ("overhead = arun - baseline (p50 difference)", overhead * 1e3, float("nan"),
         "< 2 ms " + ("ok" if overhead * 1e3 < 2 else "MISSED")),
        ("arun with an instant completion (rosetta alone)", statistics.median(alone) * 1e3, p(alone, 90),
         "< 2 ms " + ("ok" if statistics.median(alone) * 1e3 < 2 else "MISSED")),
    ]
    for name, p50, p90, target in rows:
        print(f"{name:<52} {p50:>8.3f} {p90:>8.3f}  {target}")


if __name__ == "__main__":
    main()
