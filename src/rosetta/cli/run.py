"""``rosetta run``: run an agent once through the runtime, or by hand (copy/paste) with ``--manual``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from rosetta.cli.common import err, load_agent, parse_inputs, reports_errors


@reports_errors
def run(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(help="Agent name or definition path.")],
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model (default: the first preference).")]
    = None,
    inputs: Annotated[
        list[str] | None, typer.Option("--input", "-i", help="An input: NAME=VALUE or NAME=@file.")
    ] = None,
    fallbacks: Annotated[
        list[str] | None, typer.Option("--fallback", help="Model to try next (repeatable; default: preferences).")
    ] = None,
    manual: Annotated[bool, typer.Option("--manual", help="Copy/paste mode: write the prompt, read the answer.")]
    = False,
    prompt_file: Annotated[Path | None, typer.Option("--prompt-file", help="Where --manual writes the prompt "
                                                     "(default: <agent>-prompt.md, as in Python).")] = None,
    answer_file: Annotated[Path | None, typer.Option("--answer-file", help="--manual: read the answer here "
                                                     "instead of standard input.")] = None,
    record_dir: Annotated[Path | None, typer.Option("--record-dir", help="Write the prompt, raw answer and "
                                                    "conversation JSON of the call here.")] = None,
) -> None:
    """Run an agent once and print its answer (JSON for structured agents) and how it was obtained.

    `--model manual` (or `--manual`) writes the prompt for a person to paste into any chat and
    reads the answer back.
    """
    loaded = load_agent(ctx, agent)
    values = parse_inputs(inputs or [])
    if manual or model == "manual":
        chosen = None if model == "manual" else model
        prompt_file = prompt_file or Path(f"{loaded.name}-prompt.md")  # the Python API's name too
        # what can refuse comes first (the input rules, then the prompt's render), so that nothing is
        # said to be written, and nothing is written, for inputs a rule rejects
        chain = loaded.runner.chain(values, chosen, fallbacks)
        shown = loaded.prompt_for(chain[0])
        shown.render_for_display(values)
        err.print(f"prompt written to {escape(str(prompt_file))}; paste it into any chat, then give the answer"
                  + (f" in {escape(str(answer_file))}" if answer_file else " on standard input (end with Ctrl-D)"))
        if shown.tool_specs:
            from rosetta.runtime.tools import manual_hint

            err.print(escape(manual_hint([spec.name for spec in shown.tool_specs])))
        result = loaded.run_manual(values, prompt_file=prompt_file, answer_file=answer_file, model=chosen,
                                   fallbacks=fallbacks)
    else:
        with err.status(f"running {loaded.name}…"):
            result = loaded.run(values, model, fallbacks=fallbacks, record_dir=record_dir)
    answer = result.data if not isinstance(result.data, str) else None
    sys.stdout.write((json.dumps(answer, indent=2, ensure_ascii=False) if answer is not None else result.raw) + "\n")
    tries = escape("[" + ", ".join(f"{a.model}:{a.outcome}" for a in result.attempts) + "]")
    err.print(f"[dim]{escape(result.model)} · {len(result.attempts)} attempt(s) {tries} · "
              f"{result.usage.get('total_tokens', 0)} tokens · {result.latency_s:.2f}s[/dim]")
    if not result.valid:
        err.print("[yellow]warning[/yellow] the answer does not validate: "
                  + escape("; ".join(f"{i.path}: {i.message}" for i in result.issues)))
        raise typer.Exit(1)
