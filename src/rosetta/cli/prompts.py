"""``rosetta render``, ``rosetta show``, ``rosetta diff`` and ``rosetta models``: the prompt a
model receives for an agent, which artifact the runtime picks, and the models one can name."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from rosetta.cli.common import (
    ListFormat,
    err,
    load_agent,
    out,
    parse_inputs,
    project_settings,
    relative,
    reports_errors,
)
from rosetta.errors import UsageError


class RenderFormat(StrEnum):
    text = "text"
    json = "json"
    yaml = "yaml"


@reports_errors
def render(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="Agent definition file.")],
    model: Annotated[str, typer.Option("--model", "-m", help="Model name or alias, e.g. gemini/2.5-pro.")],
    format: Annotated[RenderFormat, typer.Option("--format", "-f", help="Output format.")] = RenderFormat.text,
    manual: Annotated[bool, typer.Option("--manual", help="One copy/paste block (manual mode).")] = False,
    inputs: Annotated[
        list[str] | None, typer.Option("--input", "-i", help="Fill an input: NAME=VALUE or NAME=@file.")
    ] = None,
    adapters: Annotated[
        list[Path] | None, typer.Option("--adapters", help="Extra adapter directory (repeatable).")
    ] = None,
) -> None:
    """Show the exact prompt a model receives for an agent."""
    from rosetta.definition.loader import load_definition
    from rosetta.providers.adapter import load_adapters
    from rosetta.render.render import render as render_prompt  # not the package: its `render` may be the module
    from rosetta.signature import lower

    settings = project_settings(ctx)
    values = parse_inputs(inputs or [])
    definition = load_definition(path, section_roles=settings.section_roles)
    adapter_set = load_adapters([*settings.adapter_dirs, *(adapters or [])])
    prompt = render_prompt(lower(definition), model, adapters=adapter_set, unlisted=settings.unlisted_models)
    for warning in prompt.warnings:
        err.print(f"[yellow]warning[/yellow] {escape(warning)}")
    if manual:
        sys.stdout.write(prompt.render_for_display(values or None))
    elif format is RenderFormat.json:
        sys.stdout.write(json.dumps(prompt.to_dict(), indent=2, ensure_ascii=False) + "\n")
    elif format is RenderFormat.yaml:
        from rosetta.yaml_text import dump_yaml

        sys.stdout.write(dump_yaml(prompt.to_dict()))
    else:
        out.print(f"[bold]{escape(prompt.agent)}[/bold] on [bold]{escape(prompt.model)}[/bold] "
                  f"[dim](adapter {prompt.adapter}, {prompt.model_class}; ~{prompt.tokens['total']:,} tokens)[/dim]")
        messages = prompt.messages(values) if values else None
        if messages is None:
            sys.stdout.write(prompt.render_for_display())
        else:
            for message in messages:
                sys.stdout.write(f"--- {message['role']} ---\n{message['content']}\n")
        params = {**prompt.generation, **prompt.request_params}
        sys.stdout.write("--- request parameters ---\n" + json.dumps(params, indent=2) + "\n")


@reports_errors
def show(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(help="Agent name or definition path.")],
    model: Annotated[str, typer.Option("--model", "-m", help="Model name or alias.")],
    prompt: Annotated[bool, typer.Option("--prompt", help="Also print the selected prompt.")] = False,
) -> None:
    """Show which artifact (or fallback) the runtime would use for a model, and why."""
    loaded = load_agent(ctx, agent)
    selection = loaded.explain(model, strict=False)
    style = "green" if selection.kind == "artifact" else "yellow"
    out.print(f"[bold]{escape(loaded.name)}[/bold] on [bold]{escape(selection.model)}[/bold]: "
              f"[{style}]{selection.kind}[/{style}]")
    if selection.artifact:
        out.print(f"  artifact: {escape(str(relative(Path(selection.artifact))))}")
    out.print(f"  why: {escape(selection.reason)}")
    if loaded.artifacts:
        out.print("  compiled for: " + escape(", ".join(sorted(loaded.artifacts))))
    if prompt:
        sys.stdout.write(selection.prompt.render_for_display())


@reports_errors
def diff(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(help="Agent name or definition path.")],
    models: Annotated[list[str], typer.Option("--model", "-m", help="Two models to compare.")],
) -> None:
    """Unified diff of the prompts the runtime would send to two models."""
    import difflib

    if len(models) != 2:
        raise UsageError.at("give exactly two --model options", hint="e.g. --model sonnet --model openai/gpt-4o")
    loaded = load_agent(ctx, agent)
    first, second = (loaded.explain(m, strict=False) for m in models)
    lines = difflib.unified_diff(
        first.prompt.render_for_display().splitlines(keepends=True),
        second.prompt.render_for_display().splitlines(keepends=True),
        fromfile=f"{first.model} ({first.kind})", tofile=f"{second.model} ({second.kind})",
    )
    sys.stdout.writelines(lines)


@reports_errors
def models(
    format: Annotated[ListFormat, typer.Option("--format", "-f", help="Output format.")] = ListFormat.text,
) -> None:
    """List the model catalog: canonical ids, aliases, status (deprecated and retired models with
    their replacement), adapter, class, limits and capabilities."""
    from rosetta.providers.catalog import load_catalog

    catalog = load_catalog()
    if format is ListFormat.json:
        rows = []
        for m in catalog.models:
            row = asdict(m)
            row["class"] = row.pop("model_class")
            row.pop("known")
            status = catalog.status(m)
            row["status"] = status.state
            if status.state != "current":
                row["retires"], row["replacement"] = str(status.date), status.replacement
            rows.append(row)
        sys.stdout.write(json.dumps(rows, indent=2, default=str) + "\n")
        return
    reviewed = catalog.reviewed
    table = Table(title=f"{len(catalog.models)} models (catalog reviewed {reviewed.get('date')} against litellm "
                        f"{reviewed.get('litellm')})", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("Model", "Aliases", "Status", "Adapter", "Class", "Context", "Capabilities"):
        table.add_column(column, overflow="fold")
    for m in catalog.models:
        flags = [name for name, on in asdict(m.capabilities).items() if on]
        table.add_row(escape(m.id), escape(", ".join(m.aliases)), _status_cell(catalog.status(m)), m.adapter,
                      m.model_class, f"{m.context_window:,}", ", ".join(flags))
    out.print(table)


def _status_cell(status: Any) -> str:
    if status.state == "retired":
        return f"[red]retired {status.date}[/red] → {escape(status.replacement)}"
    if status.state == "deprecated":
        return f"[yellow]retires {status.date}[/yellow] → {escape(status.replacement)}"
    return "current"
