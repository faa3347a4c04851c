"""Benchmark: PV-005's chain-of-thought detector against the old phrase regex, on a labeled table.

The table is `TABLE` in tests/lint/test_reasoning_instructions.py: sentences shaped like agent prompt
bodies, half instructions to the model to reason out loud, half domain prose ("step-by-step runbooks",
"help the user think through options", "chain-of-thought prompting research"). Target: precision and
recall of `rosetta.lint.reasoning.reasoning_instructions` both >= 0.95 (exit code 1 otherwise). The
baseline row is the phrase regex PV-005 used before, copied below.

    python bench/pv005.py
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TABLE_FILE = REPO / "tests" / "lint" / "test_reasoning_instructions.py"
TARGET = 0.95

COT_PHRASES = re.compile(
    r"step[- ]by[- ]step|think(?:ing)? through|chain[- ]of[- ]thought|let'?s think", re.IGNORECASE
)
"""The baseline: PV-005's phrase list before the detector."""


def load_table() -> list[tuple[str, bool]]:
    spec = importlib.util.spec_from_file_location("pv005_table", TABLE_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TABLE


def score(classify: Callable[[str], bool], table: list[tuple[str, bool]]) -> dict:
    counts = {"TP": 0, "FP": 0, "FN": 0, "TN": 0, "wrong": []}
    for sentence, label in table:
        predicted = classify(sentence)
        counts[("T" if predicted == label else "F") + ("P" if predicted else "N")] += 1
        if predicted != label:
            counts["wrong"].append((sentence, label))
    flagged, relevant = counts["TP"] + counts["FP"], counts["TP"] + counts["FN"]
    counts["precision"] = counts["TP"] / flagged if flagged else 0.0
    counts["recall"] = counts["TP"] / relevant if relevant else 0.0
    return counts


def main() -> int:
    sys.path.insert(0, str(REPO / "src"))
    from rosetta.lint.reasoning import reasoning_instructions

    table = load_table()
    rows = [
        ("reasoning_instructions (new)", score(lambda s: bool(reasoning_instructions(s)), table)),
        ("baseline: COT_PHRASES regex", score(lambda s: bool(COT_PHRASES.search(s)), table)),
    ]
    positives = sum(label for _, label in table)
    print(f"{len(table)} sentences ({positives} instructions, {len(table) - positives} domain prose) · "
          f"python {sys.version.split()[0]}")
    print("| method | sentences | TP | FP | FN | TN | precision | recall |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, c in rows:
        print(f"| {name} | {len(table)} | {c['TP']} | {c['FP']} | {c['FN']} | {c['TN']} | "
              f"{c['precision']:.3f} | {c['recall']:.3f} |")
    new, base = rows[0][1], rows[1][1]
    ratio = f"{new['precision'] / base['precision']:.2f}x" if base["precision"] else "n/a"
    print(f"precision, new vs baseline: {new['precision']:.3f} / {base['precision']:.3f} = {ratio}")
    for sentence, label in new["wrong"]:
        print(f"  new method {'missed' if label else 'flagged'}: {sentence}")
    ok = new["precision"] >= TARGET and new["recall"] >= TARGET
    print(f"target: precision and recall >= {TARGET} -> {'ok' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
