"""Benchmark: ``rosetta verify --fast`` on the embedded model (target: under 2 minutes), against a
full ``verify --limit 1`` of the same agent measured in the same run (the baseline).

Each row is one ``rosetta verify`` process, timed from start to exit, so model load and imports
count as a user sees them:

- fast, one agent: ``verify signatures/vuln-triage.md --model local/gemma-3-270m --fast``;
- fast, every bundled agent: ``verify signatures/ --model local/gemma-3-270m --fast``;
- baseline: ``verify signatures/vuln-triage.md --model local/gemma-3-270m --limit 1`` (the judge,
  PV-016 and PV-018 included).

    python bench/verify_fast.py [--skip-baseline]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = "local/gemma-3-270m"
TARGET_S = 120.0


def timed(*args: str) -> tuple[float, int, str]:
    """Wall seconds, exit code and the last output line of ``rosetta verify ARGS``."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "rosetta.cli", "-C", str(ROOT), "verify", *args, "--model", MODEL],
                          capture_output=True, text=True, check=False)
    lines = (done.stdout.strip() or done.stderr.strip() or "-").splitlines()
    return time.monotonic() - started, done.returncode, lines[-1][:60]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-baseline", action="store_true", help="only the --fast rows")
    args = parser.parse_args()
    rows = [("fast, vuln-triage", *timed("signatures/vuln-triage.md", "--fast")),
            ("fast, every bundled agent", *timed("signatures/", "--fast"))]
    baseline = None if args.skip_baseline else timed("signatures/vuln-triage.md", "--limit", "1")
    if baseline is not None:
        rows.append(("baseline: --limit 1, vuln-triage", *baseline))
    print(f"rosetta verify on {MODEL} (target for --fast: under {TARGET_S:.0f} s)")
    print(f"{'run':<34} {'wall s':>8} {'vs target':>10} {'vs baseline':>12} {'exit':>5}  last line")
    for name, seconds, code, last in rows:
        versus = f"{seconds / baseline[0]:.2f}x" if baseline and not name.startswith("baseline") else "-"
        print(f"{name:<34} {seconds:>8.1f} {seconds / TARGET_S:>9.2f}x {versus:>12} {code:>5}  {last}")


if __name__ == "__main__":
    main()
