"""``rosetta validate``, ``rosetta list`` and ``rosetta schema``: the agent definitions themselves,
linted, listed, and the JSON Schema of their frontmatter."""

from __future__ import annotations

import json
import sys
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
    out,
    paths_or_default,
    print_problems,
    print_record,
    reports_errors,
)
from rosetta.errors import ConfigError, RosettaError, UsageError


class ReportFormat(StrEnum):
    text = "text"
    json = "json"
    sarif = "sarif"


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from rosetta.fileio import write_atomic

    write_atomic(output, text)
    err.print(f"[dim]wrote {escape(str(output))}[/dim]")


@reports_errors
def validate(
    ctx: typer.Context,
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Agent files or directories.", show_default="the configured signatures directory"),
    ] = None,
    format: Annotated[ReportFormat, typer.Option("--format", "-f", help="Report format.")] = ReportFormat.text,
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings as errors.")] = False,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the report to a file.")] = None,
    show_info: Annotated[bool, typer.Option("--show-info", help="List info findings too (text format).")] = False,
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", min=1, help="Worker processes for large trees.", show_default="CPUs")
    ] = None,
) -> None:
    """Lint agent definitions against the portability criteria PV-001…PV-010, and report everything
    `rosetta compile` would refuse: the project's settings, target models, shared agent names.

    Exit code 0: no errors (warnings allowed unless --strict); 1: findings with errors;
    2: a file (the project's settings included) could not be loaded, or bad usage.
    """
    from rosetta.lint.validation import ValidationReport, dumps, settings_report, to_json, to_sarif, validate_paths

    try:
        paths, settings = paths_or_default(ctx, paths)
        gate, unsettled = _compile_gate(settings)
    except ConfigError as error:  # reported with the rest; without settings, only PATHs given are linted
        settings, gate, unsettled = None, {}, error
    section_roles = settings.section_roles if settings is not None else {}
    report = validate_paths(paths, jobs=jobs, section_roles=section_roles, **gate) if paths else ValidationReport([])
    if unsettled is not None:
        report.files.insert(0, settings_report(unsettled))
    if not report.files:
        raise UsageError.at(
            "no agent definitions found", file=", ".join(str(p) for p in paths),
            hint="agents are .md files starting with '---', or name.agent.yaml files",
        )
    if format is ReportFormat.json:
        _emit(dumps(to_json(report)), output)
    elif format is ReportFormat.sarif:
        _emit(dumps(to_sarif(report)), output)
    else:
        _print_text_report(report, strict=strict, show_info=show_info)
    raise typer.Exit(report.exit_code(strict=strict))


def _compile_gate(settings: Any) -> tuple[dict[str, Any], RosettaError | None]:
    """The compiler's own checks for ``validate_paths`` (``refusals``, ``clashes``), with the options
    `rosetta compile` takes from these settings; and the error of a catalog (its [tool.rosetta.models]
    and $ROSETTA_MODELS) or adapter directory that does not load, when one does not."""
    from functools import partial

    from rosetta.compile.compiler import CompileOptions, name_clashes

    try:
        options = CompileOptions.for_settings(settings)
        options.catalog()
    except RosettaError as error:
        return {"clashes": name_clashes}, error
    return {"refusals": partial(_refused_targets, options), "clashes": name_clashes}, None


def _refused_targets(options: Any, definition: Any) -> list[tuple[str, RosettaError]]:
    """(model, why) for each model compile would build ``definition`` for and refuse, with the
    compiler's own check (so the same words); ("", why) alone when compile cannot lower it at all."""
    from rosetta.compile.compiler import resolve_target, targets
    from rosetta.signature import lower

    try:
        signature = lower(definition)
    except RosettaError as error:  # e.g. an examples file compile cannot read: no target is built
        return [("", error)]
    refused = []
    for name in targets(tuple(definition.spec.portability.model_preferences), options):
        try:
            resolve_target(name, options, signature)
        except RosettaError as error:
            refused.append((name, error))
    return refused


_STYLE = {"error": "red", "warning": "yellow", "info": "blue"}


def _print_text_report(report: Any, *, strict: bool, show_info: bool) -> None:
    for file in report.files:
        if not file.loaded:
            out.print(f"[red]✗[/red] [bold]{escape(file.path)}[/bold]  [red]could not be loaded[/red]")
            print_problems(file.error, indent="    ", console=out)
            continue
        shown = [f for f in file.findings if show_info or f.severity.value != "info"]
        worst = next((s for s in ("error", "warning") if any(f.severity.value == s for f in file.findings)), None)
        mark = {"error": "[red]✗[/red]", "warning": "[yellow]![/yellow]"}.get(worst or "", "[green]✓[/green]")
        out.print(f"{mark} [bold]{escape(file.path)}[/bold]  {escape(file.agent or '')} [dim]({file.format})[/dim]")
        for finding in shown:
            where = f"{finding.line}" if finding.line else "-"
            if finding.column:
                where += f":{finding.column}"
            style = _STYLE[finding.severity.value]
            location = "" if finding.file == file.path else f"{escape(finding.file)}:"
            out.print(f"    {location}{where:<7} [{style}]{finding.severity.value:<7}[/{style}] "
                      f"{finding.id}  {escape(finding.message)}")
            out.print(f"    {'':<7} {'':<7} [dim]{'':<6}  → {escape(finding.remediation)}[/dim]")
    summary = report.summary()
    line = (f"{summary['files']} files · {summary['loaded']} loaded · {summary['errors']} errors · "
            f"{summary['warnings']} warnings · {summary['info']} info")
    if summary["info"] and not show_info:
        line += " (--show-info lists them)"
    code = report.exit_code(strict=strict)
    style = "green" if code == 0 else "red"
    out.print(f"[{style}]{line}[/{style}]")


@reports_errors
def list_agents(
    ctx: typer.Context,
    path: Annotated[
        Path | None, typer.Argument(help="File or directory.", show_default="the configured signatures directory")
    ] = None,
    format: Annotated[ListFormat, typer.Option("--format", "-f", help="Output format.")] = ListFormat.text,
) -> None:
    """Show the agents found: name, format, portability status and model preferences."""
    from rosetta.definition.loader import load_many

    paths, settings = paths_or_default(ctx, [path] if path else None)
    results = load_many(paths, section_roles=settings.section_roles)
    agents = [r.definition for r in results if r.definition]
    if format is ListFormat.json:
        rows = [
            {
                "name": a.name,
                "path": a.source.path,
                "format": a.source.format.value,
                "portable": a.portable,
                "body_format": a.body_format.value,
                "model": a.spec.model,
                "model_preferences": a.spec.portability.model_preferences,
                "description": a.spec.description,
            }
            for a in agents
        ]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
    elif not fits_table(width=100):
        out.print(f"{len(agents)} agents\n", soft_wrap=True)
        for a in agents:
            models = a.spec.portability.model_preferences or ([a.spec.model] if a.spec.model else [])
            print_record(f"[bold]{escape(a.name)}[/bold]",
                         [("format", f"{a.source.format.value} · {a.body_format.value} body · "
                                     + ("portable" if a.portable else "single-provider")),
                          ("models", ", ".join(models) or "-")])
    else:
        table = Table(title=escape(f"{len(agents)} agents"), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        for column in ("Agent", "Format", "Portable", "Body", "Models"):  # model ids one per line, never broken
            table.add_column(column, no_wrap=True)
        for a in agents:
            models = a.spec.portability.model_preferences or ([a.spec.model] if a.spec.model else [])
            table.add_row(
                escape(a.name), a.source.format.value, "yes" if a.portable else "[dim]no[/dim]",
                a.body_format.value, escape("\n".join(models)) or "[dim]-[/dim]",
            )
        out.print(table)
    failed = [r for r in results if r.error]
    for result in failed:
        err.print(f"[red]✗[/red] {escape(str(result.path))} could not be loaded:")
        print_problems(result.error, indent="    ")
    if failed:
        raise typer.Exit(2)


@reports_errors
def schema(
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the schema to a file.")] = None,
) -> None:
    """Print the JSON Schema of the agent frontmatter, for editors.

    With the YAML language server, put the schema in your repo and start frontmatter with
    `# yaml-language-server: $schema=./agent.schema.json`.
    """
    from rosetta.definition.models import frontmatter_json_schema

    _emit(json.dumps(frontmatter_json_schema(), indent=2) + "\n", output)
