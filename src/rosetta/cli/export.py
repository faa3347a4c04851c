"""``rosetta export promptfoo``: an agent's compiled prompts as a suite another eval tool runs, a thin
command over :mod:`rosetta.export`.

Exit codes: 0 written; 2 bad usage (no artifact, an unknown model, an empty split).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from rosetta.cli.common import load_agent, out, project_settings, relative, reports_errors
from rosetta.errors import Problem, UsageError

export_app = typer.Typer(help="Write an agent's compiled prompts for another eval tool.", no_args_is_help=True)
"""``rosetta export``: its commands register here; :mod:`rosetta.cli` adds it to the app."""


@export_app.command("promptfoo")
@reports_errors
def promptfoo_command(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(help="Agent name or definition path.")],
    model: Annotated[list[str] | None, typer.Option(
        "--model", "-m", help="A model whose artifact to export (repeatable).", show_default="every compiled one")] = None,
    split: Annotated[str, typer.Option("--split", help="The labeled rows to test on: train | dev | test.")] = "test",
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most this many rows.",
                                              show_default="all")] = None,
    dataset: Annotated[str | None, typer.Option("--dataset", help="Labeled data to use instead of the agent's.")] = None,
    output: Annotated[Path | None, typer.Option("--out", "-o", help="Folder to write the suite into.",
                                                show_default="promptfoo/<agent> in the project")] = None,
) -> None:
    """Write a promptfoo suite: one prompt per compiled artifact, each bound to its own model, and the
    agent's labeled rows as tests scored by its output schema and metric.

    promptfoo then shows a column per model with the exact messages each got, pass/fail per row, and
    the agent's metric as the score; `npx promptfoo eval` in the folder runs it, through rosetta's
    runtime (the project's endpoints, embedded models, retries)."""
    from rosetta.export.promptfoo import export_promptfoo

    loaded = load_agent(ctx, agent)
    if loaded.definition_path is None:
        raise UsageError(Problem(f"{loaded.name}: no definition found", field="agent"))
    written = export_promptfoo(loaded.definition_path, output, settings=project_settings(ctx),
                               models=tuple(model or ()), split=split, limit=limit, dataset=dataset)
    out.print(f"wrote {escape(str(relative(written.config)))}: {len(written.models)} prompt(s) "
              f"({escape(', '.join(written.models))}) × {written.tests} {split} row(s)")
    out.print(f"[dim]run it: cd {escape(str(relative(written.folder)))} && npx promptfoo@latest eval, "
              "then npx promptfoo@latest view[/dim]")
