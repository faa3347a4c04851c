"""``rosetta verify``: behavioral portability (PV-011…PV-019) across models, as a CI gate.

Exit codes: 0 every criterion passed (or is indeterminate / not applicable), 1 a criterion
failed (or an agent or model could not be verified, such as a model this environment has no
credentials for: it is listed apart, "not run: no credentials", not as a criterion's failure), 2 bad usage.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from rosetta.cli.common import err, out, paths_or_default, reports_errors
from rosetta.errors import Problem, UsageError

_STYLE = {"pass": "green", "fail": "bold red", "indeterminate": "yellow", "n/a": "dim"}


@reports_errors
def verify_command(
    ctx: typer.Context,
    paths: Annotated[list[Path] | None, typer.Argument(help="Agent files or directories.",
                                                       show_default="the signatures directory")] = None,
    models: Annotated[list[str] | None, typer.Option("--model", "-m", help="Model to verify on (repeat the flag; "
                                                     "the first is the primary model for PV-015).")] = None,
    dataset: Annotated[str | None, typer.Option("--dataset", help="Folder of labeled examples (its test split), "
                                                "or hub:owner/name. Default: the agent's folder in datasets, "
                                                "else the definition's examples.", show_default=False)] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="Model for the rubric-reviewer judge.",
                                              show_default="the first --model")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Examples (and adversarial probes) per "
                                              "agent.", show_default="all")] = None,
    report: Annotated[Path | None, typer.Option("--report", help="Write the self-contained HTML report here.")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the JSON report here ('-' for "
                                                  "stdout).")] = None,
    fast: Annotated[bool, typer.Option("--fast", help="Smoke mode: one example and one probe per agent and "
                                       "model, rule checks only (no judge; PV-015, PV-016 and PV-018 n/a).")] = False,
) -> None:
    """Run each agent on each model over its test examples and adversarial probes, and score the
    behavioral criteria PV-011…PV-019 (the judge is the project's rubric-reviewer agent). Exits 1
    when a criterion fails."""
    from rosetta.definition.discovery import discover_definitions
    from rosetta.fileio import write_atomic
    from rosetta.verify.html import render_html
    from rosetta.verify.runner import VerifyOptions, verify

    if not models:
        raise UsageError(Problem("name at least one model", field="--model",
                                 hint="rosetta verify signatures/ --model local/gemma-3-270m"))
    roots, settings = paths_or_default(ctx, paths)
    definitions = [file for root in roots for file in discover_definitions(root)]
    if not definitions:
        raise UsageError(Problem("no agent definitions found", field="PATH", hint=", ".join(map(str, roots))))
    options = VerifyOptions.smoke(tuple(models), judge=judge, dataset=dataset) if fast else \
        VerifyOptions(models=tuple(models), judge=judge, dataset=dataset, limit=limit)
    pairs = len(definitions) * len(models)
    with Progress(SpinnerColumn(), TextColumn("[bold]verifying[/bold] {task.completed}/{task.total} agent × model"),
                  TextColumn("{task.description}"), TimeElapsedColumn(), console=err,
                  transient=err.is_terminal) as progress:
        task = progress.add_task("", total=pairs)
        seen: list[str] = []

        def show(text: str) -> None:
            pair = text.split(":", 1)[0]
            if pair not in seen:
                if seen:
                    progress.advance(task)
                seen.append(pair)
            progress.update(task, description=escape(text))
            if not err.is_terminal:  # a CI log gets one line per step instead of a live bar
                err.print(f"verifying {len(seen)}/{pairs}: {escape(text)}", highlight=False)

        result = verify(definitions, options, settings=settings, on_progress=show)
        progress.update(task, completed=pairs)
    if json_out is not None:
        text = result.model_dump_json(indent=2) + "\n"
        if str(json_out) == "-":
            sys.stdout.write(text)
        else:
            write_atomic(json_out, text)
            err.print(f"[dim]wrote {escape(str(json_out))}[/dim]")
    if report is not None:
        write_atomic(report, render_html(result))
        err.print(f"[dim]wrote {escape(str(report))}[/dim]")
    if str(json_out) != "-":
        _print_summary(result)
    raise typer.Exit(1 if result.failed or result.not_run else 0)


_MARK = {"pass": "[green]✓[/green]", "fail": "[bold red]✗[/bold red]", "indeterminate": "[yellow]?[/yellow]",
         "n/a": "[dim]·[/dim]"}


def _print_summary(report: Any) -> None:
    """The matrix, compact enough for 80 columns: one mark per criterion (the HTML and JSON reports
    have each criterion's detail), then every failure and undecided criterion in words."""
    from rosetta.verify.findings import CRITERIA

    table = Table(title=escape(f"rosetta verify (judge {report.judge})"), title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    table.add_column("agent", overflow="fold")
    table.add_column("model", overflow="fold")
    ids = list(CRITERIA)
    table.add_column(f"{ids[0]}..{ids[-1][-3:]}", no_wrap=True)  # one mark per criterion, in order
    table.add_column("quality", justify="right")
    table.add_column("compl.", justify="right")
    for agent in report.agents:
        if agent.error:
            table.add_row(escape(agent.agent), "—", "[red]error[/red]", "", "")
        if agent.skipped:
            table.add_row(escape(agent.agent), "—", "[dim]skipped[/dim]", "", "")
        for model in agent.models:
            if model.not_run:
                table.add_row(escape(agent.agent), escape(model.model), "[yellow]not run[/yellow]", "", "")
                continue
            marks = [_MARK.get(found.status, "—") if (found := model.criterion(c)) else "—" for c in CRITERIA]
            table.add_row(escape(agent.agent), escape(model.model), " ".join(marks), _number(model.quality),
                          _percent(model.compliance))
    out.print(table)
    out.print(f"[dim]marks in order {', '.join(c[3:] for c in CRITERIA)}: ✓ pass  ✗ fail  ? undecided  · n/a; "
              "details, retries and latency are in --json and --report[/dim]")
    for agent in report.agents:
        if agent.error:
            out.print(f"[red]error[/red] {escape(agent.agent)}: {escape(agent.error)}")
        if agent.skipped:
            out.print(f"[dim]skipped {escape(agent.skipped)} (add datasets/{escape(agent.agent)}/test.jsonl or "
                      "examples in the definition)[/dim]")
        for model in agent.models:
            if model.error:
                out.print(f"[red]error[/red] {escape(agent.agent)} × {escape(model.model)}: {escape(model.error)}")
            for criterion in model.criteria:
                if criterion.status in ("fail", "indeterminate"):
                    out.print(f"[{_STYLE[criterion.status]}]{criterion.status}[/] {escape(agent.agent)} × "
                              f"{escape(model.model)} {criterion.id} {escape(criterion.title)}: "
                              f"{escape(criterion.detail)}")
    for line in report.not_run:
        out.print(f"[yellow]not run[/yellow] {escape(line)}")
    out.print(_verdict(report))


def _verdict(report: Any) -> str:
    """The last line: failures, else whether every criterion holds; pairs not run are counted apart."""
    failed, not_run = report.failed, report.not_run
    ran = any(not model.not_run for agent in report.agents for model in agent.models)
    if failed:
        verdict = f"[bold red]{len(failed)} failure(s)[/bold red]"
    elif not_run and not ran:
        verdict = "[yellow]nothing was run[/yellow]"
    else:
        verdict = "[bold green]all criteria hold[/]" + (" on the models that ran" if not_run else "")
    return verdict + (f"; [yellow]{len(not_run)} agent × model pair(s) not run: no credentials (export the "
                      "variables named above; `rosetta doctor` lists them)[/yellow]" if not_run else "")


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"

