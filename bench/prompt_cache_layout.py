"""Benchmark (issue 85): what laying a retrieval prompt out stable text first is worth on the embedded
model, whose llama.cpp contexts keep the KV cache of a shared prefix (rosetta.local.kv_cache).

For each bench agent whose compiled artifact for ``--model`` retrieves its demos per request, the
same test rows are asked twice, in one run, through ``litellm.completion`` (the runtime's path):

- *stable first*: the artifact as rosetta sends it — instructions, then this request's retrieved
  demos, then the request;
- *retrieved first*: the same text with the retrieved demos moved before the instructions — what a
  layout that put per-request parts first would send.

Each layout is warmed with one row first; then, per row: wall time of a 1-token answer (so prompt
evaluation dominates) and how many prompt tokens llama.cpp evaluated, the rest being reused from a
context's KV cache. Prompt-cache hosts (Anthropic, Bedrock, OpenAI, Gemini) price and speed up the
same shared prefix; this is the one place here where the effect can be measured.

    python bench/prompt_cache_layout.py [--rows 12] [--model local/gemma-3-270m]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
AGENTS = ("news-topic", "question-type", "vuln-triage", "leak-detector")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=12, help="test rows per agent and layout (after one warm-up)")
    parser.add_argument("--model", default="local/gemma-3-270m")
    args = parser.parse_args()

    import rosetta.local.decoder as decoder
    from rosetta.local.litellm_offline import import_litellm
    from rosetta.runtime.agent import load

    litellm = import_litellm()
    evaluated: list[tuple[int, int]] = []  # (prompt tokens, tokens reused) per call
    reuse = decoder.reuse

    def counting(context: Any, tokens: list[int]) -> int:
        kept = reuse(context, tokens)
        evaluated.append((len(tokens), kept))
        return kept

    decoder.reuse = counting
    print(f"{args.model}, {args.rows} warm rows per agent and layout (1-token answers)\n")
    print("| agent | layout | prompt tokens | evaluated per call | reused | warm latency ms (median) | ratio |")
    print("|---|---|---|---|---|---|---|")
    for name in AGENTS:
        prompt = load(name, project=REPO).explain(args.model).prompt
        if prompt.demo_pool is None:
            print(f"| {name} | (no retrieval artifact for {args.model}) | | | | | |")
            continue
        rows = [json.loads(line)["inputs"] for line in
                (REPO / "datasets" / name / "test.jsonl").read_text(encoding="utf-8").splitlines()[:args.rows + 1]]
        medians: dict[str, float] = {}
        for layout in ("stable first", "retrieved first"):
            times, counts = [], []
            for number, inputs in enumerate(rows):
                text = _text(prompt, inputs, stable_first=layout == "stable first")
                evaluated.clear()
                began = time.perf_counter()
                litellm.completion(model=args.model, messages=[{"role": "user", "content": text}], max_tokens=1,
                                   temperature=0)
                if number:  # the first row warms the layout
                    times.append(1000 * (time.perf_counter() - began))
                    counts.append(evaluated[-1])
            medians[layout] = statistics.median(times)
            total = statistics.mean(t for t, _ in counts)
            kept = statistics.mean(k for _, k in counts)
            ratio = medians[layout] / medians["stable first"]
            print(f"| {name} | {layout} | {total:.0f} | {total - kept:.0f} | {kept:.0f} | {medians[layout]:.0f} "
                  f"| {ratio:.2f}× |")
        sys.stdout.flush()


def _text(prompt: Any, inputs: dict[str, Any], *, stable_first: bool) -> str:
    """The completion text the artifact sends for ``inputs``, or the same parts with the retrieved
    demos first."""
    from rosetta.providers.kinds import ANSWER_CUE

    if stable_first:
        return str(prompt.messages(inputs)[0]["content"])
    demos = prompt.demos_for(inputs)
    shown = [f"{user.content}\n{ANSWER_CUE} {answer.content}" for user, answer in zip(demos[::2], demos[1::2])]
    return "\n\n".join([*shown, prompt.system or "", f"{prompt.user_message(inputs)}\n{ANSWER_CUE}"])


if __name__ == "__main__":
    main()
