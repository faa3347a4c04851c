"""Benchmark: render every bundled agent for every catalog model, scaled to 1,000 agents x 12 models.

Target (issue #3): 12,000 renders in < 3 s on this 2-core machine, in one process. Lowering
(reading files) is done once per agent and reported separately; the baseline row formats the same
prompts with `str.format` of a fixed template (the floor of "putting text together").

    python bench/render.py [--agents 1000] [--models 12] [--repeat 3]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--models", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from rosetta.definition import load_many
    from rosetta.errors import RenderError
    from rosetta.providers.adapter import bundled_adapters
    from rosetta.providers.catalog import load_catalog
    from rosetta.render import render
    from rosetta.signature import lower

    start = time.perf_counter()
    bundled = [lower(r.definition) for r in load_many([REPO / "signatures"]) if r.definition]
    lowering = time.perf_counter() - start
    signatures = [s.model_copy(update={"name": f"{s.name}-{i}"})
                  for i, s in zip(range(args.agents), itertools.cycle(bundled), strict=False)]
    catalog = load_catalog()
    models = catalog.models[: args.models]
    adapters = bundled_adapters()

    def run() -> tuple[float, int, int]:
        ok = failed = 0
        began = time.perf_counter()
        for signature in signatures:
            for model in models:
                try:
                    render(signature, model, adapters=adapters)
                    ok += 1
                except RenderError:
                    failed += 1  # e.g. a window too small: also fully decided work
        return time.perf_counter() - began, ok, failed

    cold, ok, failed = run()
    warm = min(run()[0] for _ in range(args.repeat))

    template = "## Role\n{role}\n\n## Context\n{context}\n\n## Constraints\n{constraints}\n\n## Format\n{format}"
    began = time.perf_counter()
    for signature in signatures:
        text = "\n".join(s.content for s in signature.instructions)
        for _ in models:
            template.format(role=signature.role, context=text, constraints="", format="")
    baseline = time.perf_counter() - began

    total = len(signatures) * len(models)
    print(f"{len(signatures)} agents x {len(models)} models = {total:,} renders "
          f"({ok:,} rendered, {failed:,} refused, e.g. context window too small) · python {sys.version.split()[0]}")
    print(f"{'measurement':<40} {'seconds':>8}  {'detail':<24} {'target':<8} result")
    rows = [
        (f"lower {len(bundled)} bundled agents", lowering, "once per agent", "", ""),
        ("render all, first run", cold, f"{cold / total * 1e6:.0f} µs/render", "< 3 s", "ok" if cold < 3 else "MISSED"),
        (f"render all, best of {args.repeat}", warm, f"{warm / total * 1e6:.0f} µs/render", "< 3 s",
         "ok" if warm < 3 else "MISSED"),
        ("baseline: str.format of one template", baseline, f"ratio {warm / baseline:.0f}x", "", ""),
    ]
    for name, seconds, detail, target, result in rows:
        print(f"{name:<40} {seconds:>8.3f}  {detail:<24} {target:<8} {result}")


if __name__ == "__main__":
    main()
