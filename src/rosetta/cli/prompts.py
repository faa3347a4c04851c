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
    fits_table,
    load_agent,
    out,
    parse_inputs,
    print_record,
    project_settings,
    relative,
    reports_errors,
)
from rosetta.errors import Location, RenderError, UsageError


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
) -> None:
    """Show the exact request a model receives for an agent — its messages, tools and parameters, as
    litellm is called at run time: the model's compiled artifact when it is up to date, else what
    the runtime falls back to (inputs not given with -i are shown as {{name}} placeholders)."""
    from rosetta.definition.loader import load_definition

    values = parse_inputs(inputs or [])
    loaded = load_agent(ctx, str(path))
    try:
        selection = loaded.explain(model, strict=False)
    except RenderError as error:
        raise _located(error, load_definition(path, section_roles=project_settings(ctx).section_roles)) from None
    prompt = selection.prompt
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
        source = {"artifact": "its compiled artifact", "uncompiled": "the definition, uncompiled"}.get(
            selection.kind, f"the {selection.kind} artifact {Path(selection.artifact or '').name}, re-fitted")
        out.print(f"[bold]{escape(prompt.agent)}[/bold] on [bold]{escape(prompt.model)}[/bold] "
                  f"[dim](adapter {prompt.adapter}, {prompt.model_class}; ~{prompt.tokens['total']:,} tokens; "
                  f"from {escape(source)})[/dim]")
        if prompt.cache_prefix is not None:
            out.print(f"[dim]{escape(prompt.cache_prefix.describe())}[/dim]")
        sys.stdout.write(prompt.request_text(values))


def _located(error: RenderError, definition: Any) -> RenderError:
    """``error`` with each problem that names a definition field placed at that field's file and line."""
    import dataclasses
    import re

    problems = []
    for problem in error.problems:
        if problem.location.file is None and problem.field:
            path = [int(part) if part.isdigit() else part for part in re.split(r"\.|\[(\d+)\]", problem.field) if part]
            problem = dataclasses.replace(problem, location=Location(*definition.locate(*path)))
        problems.append(problem)
    return type(error)(problems)


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
        sys.stdout.write(selection.prompt.request_text())


@reports_errors
def diff(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(help="Agent name or definition path.")],
    models: Annotated[list[str], typer.Option("--model", "-m", help="Two models to compare.")],
) -> None:
    """Unified diff of the requests the runtime would send to two models (messages, tools,
    structured output, generation parameters; inputs shown as {{name}} placeholders)."""
    import difflib

    if len(models) != 2:
        raise UsageError.at("give exactly two --model options", hint="e.g. --model sonnet --model openai/gpt-4o")
    loaded = load_agent(ctx, agent)
    first, second = (loaded.explain(m, strict=False) for m in models)
    lines = difflib.unified_diff(
        first.prompt.request_text().splitlines(keepends=True),
        second.prompt.request_text().splitlines(keepends=True),
        fromfile=f"{first.model} ({first.kind})", tofile=f"{second.model} ({second.kind})",
    )
    sys.stdout.writelines(lines)


@reports_errors
def models(
    ctx: typer.Context,
    format: Annotated[ListFormat, typer.Option("--format", "-f", help="Output format.")] = ListFormat.text,
    check: Annotated[str | None, typer.Option(
        "--check", metavar="MODEL", help="Render an agent for MODEL and report what its entry implies: "
                                          "mechanism, budget, endpoint, what is dropped.")] = None,
    agent: Annotated[str | None, typer.Option(
        "--agent", "-a", help="With --check: the agent to render (default: the project's first with an output "
                              "schema).")] = None,
    host: Annotated[str | None, typer.Option(
        "--host", metavar="PROVIDER", help="List the catalog's models as this host serves them (azure, azure_ai, "
                                           "bedrock, vertex_ai, groq and other litellm providers): their ids "
                                           "there, the rules they keep and the host's structured-output form.")] = None,
) -> None:
    """List the model catalog, with the models the project declares in [tool.rosetta.models]:
    canonical ids, aliases, status (deprecated and retired models with their replacement), adapter,
    class, limits and capabilities. The same model on another host (azure/o3,
    bedrock/us.anthropic.claude-sonnet-4-6, openrouter/openai/o3) follows its catalog entry; --host
    lists them."""
    from rosetta.providers.catalog import catalog_for

    settings = project_settings(ctx)
    catalog = catalog_for(settings.root, settings.models)
    if check is not None:
        _check_model(ctx, settings, catalog, check, agent, format)
        return
    if host is not None:
        _host_models(catalog, host, format)
        return
    if format is ListFormat.json:
        rows = []
        for m in catalog.models:
            row = asdict(m)
            row["class"] = row.pop("model_class")
            row.pop("known")
            row["source"] = m.source or "catalog"
            status = catalog.status(m)
            row["status"] = status.state
            if status.state != "current":
                row["retires"], row["replacement"] = str(status.date or "unknown"), status.replacement
                row["retirement_source"] = status.source
            rows.append(row)
        sys.stdout.write(json.dumps(rows, indent=2, default=str) + "\n")
        return
    reviewed = catalog.reviewed
    declared = sum(m.source == "project" for m in catalog.models)
    title = (f"{len(catalog.models)} models (catalog reviewed {reviewed.get('date')} against litellm "
             f"{reviewed.get('litellm')}" + (f"; {declared} declared by this project" if declared else "") + ")")
    if not fits_table(width=150):
        out.print(title + "\n", soft_wrap=True)
        for m in catalog.models:
            status = catalog.status(m)
            state = status.state if status.state == "current" else f"{status.label} → {status.replacement}"
            heading = f"[bold]{escape(m.id)}[/bold]" + (" [cyan](declared)[/cyan]" if m.source == "project" else "")
            print_record(heading, [("status", state), ("aliases", ", ".join(m.aliases)),
                                   ("adapter", f"{m.adapter} · {m.model_class} · {m.context_window:,}-token window"),
                                   ("capabilities", ", ".join(n for n, on in asdict(m.capabilities).items() if on))])
        return
    table = Table(title=escape(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("Model", "Aliases", "Status", "Adapter", "Class", "Context"):  # ids one per line, never broken
        table.add_column(column, no_wrap=True)
    table.add_column("Capabilities", min_width=18)
    for m in catalog.models:
        flags = [name for name, on in asdict(m.capabilities).items() if on]
        name = escape(m.id) + ("\n[cyan](declared)[/cyan]" if m.source == "project" else "")
        table.add_row(name, escape("\n".join(m.aliases)), _status_cell(catalog.status(m)), m.adapter,
                      m.model_class, f"{m.context_window:,}", ", ".join(flags))
    out.print(table)


def _host_models(catalog: Any, host: str, format: ListFormat) -> None:
    """``rosetta models --host``: each catalog model the host serves, its ids there (litellm's map),
    the rules it keeps everywhere and the form the host gives its structured output."""
    from rosetta.providers.adapter import bundled_adapters

    adapters = bundled_adapters()
    groups: dict[str, list[Any]] = {}
    for model in catalog.served_on(host):
        groups.setdefault(model.underlying, []).append(model)
    rows = []
    for underlying, served in groups.items():
        model, status = served[0], catalog.status(served[0])
        form = model.structured_output or adapters[model.adapter].structured_output
        ids = sorted((m.id for m in served), key=lambda name: (name.count("/"), len(name), name))  # plainest first
        rows.append({"model": underlying, "ids": ids, "status": status.state,
                     "class": model.model_class, "context_window": model.context_window,
                     "max_output": model.max_output, "thinking_reserve": model.thinking_reserve,
                     "sampling_params": model.capabilities.sampling_params,
                     "structured_output": form.value if model.capabilities.structured_output else "prompt_schema"})
    if format is ListFormat.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    if not rows:
        out.print(f"litellm's model map lists no id on {escape(host)} that names a catalog model; an id there that "
                  f"does (e.g. {escape(host)}/<vendor>/<model>) still gets that model's rules: `rosetta models "
                  "--check ID` shows one", soft_wrap=True)
        return
    table = Table(title=escape(f"{len(rows)} catalog models on {host} (ids from litellm's model map; the rules are "
                               "the model's, the structured-output form the host's)"),
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("Model", "Status", "Class", "Context", "Output", "Sampling", "Thinking", "Structured output"):
        table.add_column(column, no_wrap=True)
    table.add_column("Ids on the host", overflow="fold")
    for row in rows:
        ids = row["ids"][:3] + ([f"+{len(row['ids']) - 3} more"] if len(row["ids"]) > 3 else [])
        table.add_row(escape(row["model"]), row["status"], row["class"], f"{row['context_window']:,}",
                      f"{row['max_output']:,}", "yes" if row["sampling_params"] else "no",
                      f"{row['thinking_reserve']:,}" if row["thinking_reserve"] else "-", row["structured_output"],
                      escape("\n".join(ids)))
    out.print(table)
    out.print(escape('A deployment with a name of its own: declare base_model = "<provider>/<model>" under '
                     f'[tool.rosetta.models."{host}/<deployment>"] to give it that model\'s rules.'), soft_wrap=True)


def _check_model(ctx: typer.Context, settings: Any, catalog: Any, name: str, agent: str | None,
                 format: ListFormat) -> None:
    """``rosetta models --check``: one agent rendered for ``name``, and what the entry implies."""
    from rosetta.definition.loader import load_definition
    from rosetta.providers.adapter import load_adapters
    from rosetta.render.mechanisms import MECHANISMS
    from rosetta.render.prompt import placeholder
    from rosetta.render.renderer import prompt_budget
    from rosetta.render.renderer import render as render_prompt
    from rosetta.signature import lower

    adapters = load_adapters(settings.adapter_dirs)
    model = catalog.resolve(name, adapters, unlisted=settings.unlisted_models)
    signature = lower(load_definition(_agent_to_check(ctx, settings, agent), root=settings.root,
                                      section_roles=settings.section_roles))
    prompt = render_prompt(signature, model, adapters=adapters)
    endpoint = model.endpoint
    mechanism = prompt.structured_output
    placeholders = {field.name: placeholder(field.name) for field in prompt.inputs}
    request = {key: value for key, value in prompt.to_litellm(placeholders).items()
               if key in ("response_format", "tool_choice", "output_config")}
    report = {
        "model": model.id, "source": model.source or ("catalog" if model.known else "litellm's model map"),
        "agent": signature.name, "adapter": model.adapter, "class": model.model_class,
        "prompt_style": model.prompt_style, "context_window": model.context_window, "max_output": model.max_output,
        "api_base": (endpoint.api_base_env and f"${endpoint.api_base_env}") or endpoint.api_base if endpoint else None,
        "api_key": (f"${endpoint.api_key_env}" if endpoint.api_key_env else "none sent") if endpoint else None,
        "structured_output": mechanism.value if mechanism else None,
        "schema_in": ("prompt" if mechanism and not MECHANISMS[mechanism].schema_in_request else "request")
        if mechanism else None,
        "request": {key: _schema_elided(value) for key, value in request.items()},
        "prompt_tokens": prompt.tokens["total"],
        "prompt_budget": prompt_budget(signature, adapters[model.adapter], model, prompt.generation),
        "demos": len(prompt.demo_ids), "warnings": list(prompt.warnings),
    }
    if format is ListFormat.json:
        sys.stdout.write(json.dumps(report, indent=2, default=str) + "\n")
        return
    out.print(f"[bold]{escape(model.id)}[/bold] ({report['source']}): adapter {model.adapter}, class "
              f"{model.model_class}, {model.prompt_style} prompts, {model.context_window:,}-token window, "
              f"{model.max_output:,} out")
    if endpoint is not None:
        out.print(f"  endpoint: {escape(str(report['api_base'] or 'the provider default'))}, key: "
                  f"{escape(str(report['api_key']))}")
    if mechanism is None:
        out.print(f"  {signature.name} answers in plain text (no output schema)")
    else:
        out.print(f"  structured output: {mechanism.value} (schema in the {report['schema_in']}); request carries "
                  + escape(json.dumps(report["request"], ensure_ascii=False)))
    out.print(f"  {signature.name}: ~{prompt.tokens['total']:,} of a {report['prompt_budget']:,}-token prompt budget, "
              f"{len(prompt.demo_ids)} demo(s)")
    for warning in prompt.warnings:
        out.print(f"  [yellow]dropped or changed[/yellow]: {escape(warning)}")
    if not prompt.warnings:
        out.print("  nothing dropped")


def _agent_to_check(ctx: typer.Context, settings: Any, agent: str | None) -> Path:
    """The definition ``models --check`` renders: ``agent`` (a path or name), else the project's
    first agent with an output schema, else its first agent."""
    from rosetta.definition.discovery import discover_definitions

    if agent is not None and Path(agent).is_file():
        return Path(agent)
    if agent is not None:
        return load_agent(ctx, agent).definition_path
    found = discover_definitions(settings.signatures_dir) if settings.signatures_dir.is_dir() else []
    if not found:
        raise UsageError.at("no agent to render: the signatures directory has none", file=settings.signatures_dir,
                            hint="pass --agent PATH")
    return next((path for path in found if "output:" in path.read_text(encoding="utf-8", errors="replace")),
                found[0])


def _schema_elided(value: Any) -> Any:
    """A request parameter with its schema shown as ``{…}`` (the schema is long; `render` shows it)."""
    if isinstance(value, dict):
        return {key: "{…}" if key in ("schema", "parameters") else _schema_elided(item)
                for key, item in value.items()}
    return value


def _status_cell(status: Any) -> str:
    if status.state == "retired":
        return f"[red]{status.label}[/red]\n→ {escape(status.replacement)}"
    if status.state == "deprecated":
        return f"[yellow]{status.label}[/yellow]\n→ {escape(status.replacement)}"
    return "current"
