"""Load run: 500 concurrent calls on a faulty provider with a 2 s timeout, ten runs in a row on one
agent; every run must lose no call, swap no answer, hold nothing against the healthy fallback and
give back every in-flight slot (tests/load_spike.py plays the faults and checks each run; the test
suite runs two of these, tests/runtime/test_load.py). Prints one row per run.

    python bench/load_faults.py [--runs 10] [--calls 500]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from load_spike import HEADER, ROW, spike, spiking_agent  # noqa: E402  (shared with the test)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # each fallback is logged: a thousand lines per run
    os.environ.setdefault("OPENAI_API_KEY", "sk-test-not-a-real-key")
    os.environ.setdefault("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    with tempfile.TemporaryDirectory() as folder:
        tree = Path(folder)
        (tree / "signatures").mkdir()
        shutil.copy(HERE.parent / "signatures" / "vuln-triage.md", tree / "signatures")
        agent = spiking_agent(tree)
        print(HEADER, flush=True)
        for run in range(args.runs):
            print(ROW.format(*spike(agent, run, args.calls)), flush=True)
    print(f"{args.runs} runs of {args.calls} concurrent calls: none lost, none swapped, no healthy endpoint cooled")


if __name__ == "__main__":
    main()
