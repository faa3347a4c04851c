"""Benchmark: load + validate 1,000 varied agent definitions, and the cost of `import rosetta`.

Targets (issue #2): load+validate of 1,000 definitions < 2 s on a 2-core machine; `import rosetta`
< 150 ms. A quarter of the portable definitions are written in an older collection's shapes (issue
58: input rules as a mapping, output rules as mappings, inputs as lists of names, a persona as text,
a template found nowhere), which load by setting values aside and are reported. The baseline row parses the same frontmatter with PyYAML's C loader (no positions, no
safety limits, no schema), to show what our safe parser and the checks cost on top.

    python bench/load_validate.py [--count 1000] [--repeat 3] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOOLS = """\
tools:
  - name: search_logs
    description: Search the log index.
    parameters:
      type: object
      properties:
        query: {{type: string, minLength: 1}}
        limit: {{type: integer, minimum: 1, maximum: 500}}
        window: {{type: object, properties: {{start: {{type: string, format: date-time}}, end: {{type: string}}}}}}
      required: [query]
  - name: open_ticket_{n}
    description: Open a ticket.
    parameters:
      type: object
      properties:
        title: {{type: string}}
        severity: {{type: string, enum: [sev1, sev2, sev3]}}
      required: [title, severity]
"""

OUTPUT = """\
output:
  required: true
  schema:
    type: object
    additionalProperties: false
    properties:
      label: {{type: string, enum: [{labels}]}}
      score: {{type: number, minimum: 0, maximum: 1}}
      items:
        type: array
        maxItems: 5
        items: {{type: object, properties: {{name: {{type: string}}, count: {{type: integer}}}}, required: [name]}}
    required: [label]
"""

BODIES = {
    "markdown": "## Role\nYou are agent {n}. {filler}\n\n## Context\n{filler}\n\n## Constraints\n- {filler}\n- Never guess.\n\n"
                "## Output format\nReturn JSON.\n",
    "rccf": "ROLE:\nYou are agent {n}.\nCONSTRAINTS:\n- {filler}\nCONTEXT:\n{filler}\nFORMAT:\nJSON only.\n",
    "xml": "<agent>\n<identity>\nAgent {n}. {filler}\n</identity>\n<guardrails>\n- {filler}\n</guardrails>\n"
           "<output>\nJSON.\n</output>\n</agent>\n",
}

WORDS = "triage severity exploit advisory package version range vector impact scope report evidence".split()


def _filler(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 60)))


def _portable(n: int, rng: random.Random) -> str:
    body_format = rng.choice(list(BODIES))
    parts = [
        "---",
        f"name: agent-{n}",
        f'version: "1.{n % 10}.0"',
        f"description: Benchmark agent {n}.",
        "identity:",
        f"  role: Analyst {n}",
        f"  expertise: [{', '.join(rng.sample(WORDS, 3))}]",
        "  cognitive_mode: systematic",
        "capabilities:",
        "  required_features: [tool_use, structured_output]",
        "  forbidden_actions: [never leak secrets, never run commands]",
        "guardrails:",
        "  input_validation:",
        "    - {field: report, pattern: '\\S{10,}'}",
        "  fallback_behavior: warn_and_retry",
    ]
    if rng.random() < 0.25:  # issue 58: an older collection's shapes, read or set aside at load
        parts[parts.index("guardrails:"):] = [
            "inputs: {required: [report, project_id], optional: [since]}",
            "persona: Terse and exact.",
            "guardrails:",
            "  input_validation:",
            "    project_id:",
            "      format: '^PROJ-\\d{3}$'",
            "      on_invalid: {action: reject, message: project_id must look like PROJ-123}",
            "    report: {max_length: 20000, required: true}",
            "  output_filtering:",
            "    - no_secrets_in_output",
            "    - {pattern: 'AKIA[0-9A-Z]{16}', action: redact}",
            "output:",
            f"  template: templates/report-{n}.md",
        ]
    text = "\n".join(parts) + "\n"
    if rng.random() < 0.6:
        text += TOOLS.format(n=n)
    if rng.random() < 0.7 and "\noutput:" not in text:
        text += OUTPUT.format(labels=", ".join(rng.sample(WORDS, rng.randint(2, 6))))
    if body_format != "xml" or rng.random() < 0.5:
        text += (
            "portability:\n  enabled: true\n  minimum_context_window: 16000\n"
            "  model_preferences: [anthropic/claude-sonnet-4, openai/gpt-4o, ollama/llama3.1]\n"
            f"  reasoning_strategy: {rng.choice(['adaptive', 'explicit_cot', 'none'])}\n"
            f"  few_shot: {{enabled: true, count_range: {{min: 1, max: {rng.randint(1, 5)}}}}}\n"
            f"  body_format: {body_format}\n"
        )
    text += "---\n" + BODIES[body_format].format(n=n, filler=_filler(rng))
    return text


def generate(directory: Path, count: int, seed: int) -> None:
    """Write ``count`` definitions: ~70% portable/legacy, 15% Claude Code (+sidecar), 15% pairs."""
    rng = random.Random(seed)
    for n in range(count):
        kind = rng.random()
        if kind < 0.15:
            (directory / f"cc-{n}.md").write_text(
                f"---\nname: cc-{n}\ndescription: Use after changes.\ntools: Read, Grep, Bash\nmodel: sonnet\n---\n"
                f"You are reviewer {n}. {_filler(rng)}\n\n## Checklist\n- {_filler(rng)}\n"
            )
            if rng.random() < 0.7:
                (directory / f"cc-{n}.governance.yaml").write_text(
                    "identity: {role: Reviewer}\ncapabilities: {required_features: [tool_use]}\n"
                    "portability: {enabled: true, minimum_context_window: 32000, body_format: markdown}\n"
                )
        elif kind < 0.30:
            text = _portable(n, rng)
            frontmatter, body = text[4:].split("\n---\n", 1)
            (directory / f"pair-{n}.agent.yaml").write_text(frontmatter + "\n")
            (directory / f"pair-{n}.prompt.md").write_text(body)
        else:
            (directory / f"agent-{n}.md").write_text(_portable(n, rng))


def run_once(directory: Path, jobs: int | None = None) -> tuple[float, int, int]:
    from rosetta.lint.validation import validate_paths

    start = time.perf_counter()
    report = validate_paths([directory], jobs=jobs)
    elapsed = time.perf_counter() - start
    summary = report.summary()
    return elapsed, summary["loaded"], summary["errors"]


def baseline_once(directory: Path) -> float:
    import yaml

    start = time.perf_counter()
    for path in sorted(directory.iterdir()):
        text = path.read_text()
        if path.suffix == ".md" and text.startswith("---"):
            yaml.load(text[4:].split("\n---\n", 1)[0], Loader=yaml.CSafeLoader)
        elif path.name.endswith(".yaml"):
            yaml.load(text, Loader=yaml.CSafeLoader)
    return time.perf_counter() - start


def import_time_ms(statement: str, repeat: int) -> float:
    """Median wall time of a fresh interpreter's import, from ``-X importtime`` (cumulative µs)."""
    samples = []
    for _ in range(repeat):
        stderr = subprocess.run([sys.executable, "-X", "importtime", "-c", statement],
                                capture_output=True, text=True, check=True).stderr
        module = statement.split()[-1]
        line = next(line for line in reversed(stderr.splitlines()) if line.rstrip().endswith(f"| {module}"))
        samples.append(int(line.split("|")[1]) / 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON instead of a table")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        generate(directory, args.count, args.seed)
        files = sum(1 for p in directory.iterdir() if not p.name.endswith((".governance.yaml", ".prompt.md")))
        cold, loaded, errors = run_once(directory)  # includes first-use imports (pydantic, jsonschema)
        warm = min(run_once(directory)[0] for _ in range(args.repeat))
        serial = min(run_once(directory, jobs=1)[0] for _ in range(args.repeat))
        baseline = min(baseline_once(directory) for _ in range(args.repeat))

    import_rosetta = import_time_ms("import rosetta", 5)
    import_loader = import_time_ms("import rosetta.definition.loader", 5)
    rows = [
        ("load+validate, first run (incl. imports)", cold, f"{cold / files * 1000:.2f} ms/def", "< 2 s",
         "ok" if cold < 2 else "MISSED"),
        ("load+validate, warm (best of %d)" % args.repeat, warm, f"{warm / files * 1000:.2f} ms/def", "< 2 s",
         "ok" if warm < 2 else "MISSED"),
        ("load+validate, one process (--jobs 1)", serial, f"{serial / files * 1000:.2f} ms/def", "(info)", ""),
        ("baseline: yaml CSafeLoader parse only", baseline, f"ratio {serial / baseline:.1f}x (1 proc)", "", ""),
        ("import rosetta (median of 5)", import_rosetta / 1000, f"{import_rosetta:.1f} ms", "< 150 ms",
         "ok" if import_rosetta < 150 else "MISSED"),
        ("import rosetta.definition.loader", import_loader / 1000, f"{import_loader:.1f} ms", "(info)", ""),
    ]
    if args.json:
        print(json.dumps({name: seconds for name, seconds, *_ in rows}, indent=2))
        return
    print(f"{files} definitions ({loaded} loaded, {errors} errors) · python {sys.version.split()[0]} · "
          f"{os.cpu_count()} CPUs")
    print(f"{'measurement':<44} {'seconds':>8}  {'detail':<22} {'target':<9} result")
    for name, seconds, detail, target, result in rows:
        print(f"{name:<44} {seconds:>8.3f}  {detail:<22} {target:<9} {result}")


if __name__ == "__main__":
    main()
