"""Benchmark: streamed redaction (`no_secrets_in_output`) stays linear in the answer's length.

`agent.stream` against the local test server (the OpenAI streaming format, 8 characters per
chunk), the same agent with and without `no_secrets_in_output` in its guardrails, for answers of
10k, 100k and 1M characters of two kinds: ordinary text (words and spaces) and one unbroken token
(letters and digits, no space: the case that was quadratic). Each row also times the redactor
alone, streamed (`SecretStream` fed the same chunks) and whole (`redact`, as error messages, log
records and transcripts are): with gitleaks' ~220 rules beside rosetta's own, this is where the
cost of more rules shows. Target (issue 53): with / without ≤ 2× at 1M.

    python bench/redaction.py [--sizes 10000,100000,1000000] [--alone]   # --alone: the redactor only
"""

from __future__ import annotations

import argparse
import random
import shutil
import string
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from fault_server import FaultServer  # noqa: E402  (the same server the tests use)

INPUTS = {"report": "SQL injection in the login form lets an unauthenticated attacker bypass authentication."}
WORDS = ("the model answer severity high login form attacker bypass authentication session token server "
         "request header secret value bearer sk key AKIA ey of a to in").split()
CHUNK = 8  # FaultServer streams 8 characters per event


def texts(size: int) -> dict[str, str]:
    rnd = random.Random(size)
    ordinary = " ".join(rnd.choice(WORDS) for _ in range(size // 3))[:size]
    token = "".join(rnd.choice(string.ascii_letters + string.digits) for _ in range(size))
    return {"ordinary text": ordinary, "unbroken token": token}


def project(root: Path, redacts: bool) -> Path:
    (root / "signatures").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[tool.rosetta]\n")
    text = (HERE.parent / "signatures" / "vuln-triage.md").read_text()
    if not redacts:
        text = text.replace("    - no_secrets_in_output\n", "")
    (root / "signatures" / "vuln-triage.md").write_text(text)
    return root


def streamed(agent, server, answer: str) -> float:
    server.script[:] = [("ok", answer)]
    began = time.perf_counter()
    stream = agent.stream(INPUTS, "openai/gpt-4o", api_base=server.url, api_key="sk-bench", validation_retries=0)
    chunks, result = list(stream), stream.result()
    elapsed = time.perf_counter() - began
    assert "".join(chunks) == result.raw == answer, "the bench answers carry no credential"
    return elapsed


def redactor_alone(answer: str) -> float:
    from rosetta.runtime.secrets import SecretStream

    began = time.perf_counter()
    stream = SecretStream()
    sent = "".join(stream.feed(answer[i:i + CHUNK]) for i in range(0, len(answer), CHUNK)) + stream.flush()
    elapsed = time.perf_counter() - began
    assert sent == answer
    return elapsed


def whole_alone(answer: str) -> float:
    from rosetta.runtime.secrets import redact

    began = time.perf_counter()
    assert redact(answer) == answer
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--alone", action="store_true", help="time the redactor alone, not the agent's stream")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]

    import logging

    import rosetta
    from rosetta.runtime.secrets import rules

    first = whole_alone("warm up")  # compiles the rules
    print(f"{len(rules())} rules; the first redaction (it compiles them) took {first:.3f} s\n")
    if args.alone:
        print("| answer | characters | redactor alone, streamed s | µs per character | whole text s | "
              "µs per character |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |", flush=True)
        for size in sizes:
            for kind, answer in texts(size).items():
                alone, whole = min(redactor_alone(answer) for _ in range(2)), min(whole_alone(answer) for _ in range(2))
                print(f"| {kind} | {size:,} | {alone:.2f} | {alone / size * 1e6:.2f} | {whole:.3f} | "
                      f"{whole / size * 1e6:.2f} |", flush=True)
        return
    logging.getLogger("rosetta").setLevel(logging.ERROR)  # the long answers are "invalid" (warned per run)
    rows = []
    print("| answer | characters | stream without rule s | stream with rule s | with / without | "
          "redactor alone s | µs per character | whole text s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |", flush=True)
    with tempfile.TemporaryDirectory() as tmp, FaultServer() as server:
        with_rule = rosetta.load("vuln-triage", project=project(Path(tmp) / "with", True))
        without = rosetta.load("vuln-triage", project=project(Path(tmp) / "without", False))
        assert with_rule.spec.guardrails.output_filtering != without.spec.guardrails.output_filtering
        streamed(with_rule, server, "warm up"), streamed(without, server, "warm up")
        for size in sizes:
            for kind, answer in texts(size).items():
                off, on = streamed(without, server, answer), streamed(with_rule, server, answer)
                rows.append((kind, size, off, on, on / off, redactor_alone(answer)))
                kind, size, off, on, ratio, alone = rows[-1]
                print(f"| {kind} | {size:,} | {off:.2f} | {on:.2f} | {ratio:.2f}× | {alone:.2f} | "
                      f"{alone / size * 1e6:.2f} | {whole_alone(answer):.3f} |", flush=True)
    worst = max(ratio for kind, size, off, on, ratio, alone in rows if size == max(sizes))
    print(f"\ntarget: with / without ≤ 2× at {max(sizes):,} characters: {'met' if worst <= 2 else 'MISSED'} "
          f"(worst {worst:.2f}×)")


if __name__ == "__main__":
    main()
