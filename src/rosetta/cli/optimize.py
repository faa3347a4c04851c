"""``rosetta optimize`` and ``rosetta evaluate``: search prompt variants for one agent on one
model, and score what the runtime sends on a labeled split; thin commands over
:mod:`rosetta.optimize`."""

from __future__ import annotations

import json
import sys
import time
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from rosetta.cli.common import err, load_agent, out, project_settings, reports_errors
from rosetta.cli.search import (
    ActivateOpt,
    BaselineOpt,
    DatasetOpt,
    DryRunOpt,
    InvalidAnswers,
    JobsOpt,
    MaxCallsOpt,
    MaxCostOpt,
    MetricOpt,
    NearestDemosOpt,
    OptimizerOpt,
    ParetoOpt,
    ProposalsOpt,
    ProposerOpt,
    PrunerOpt,
    RepeatsOpt,
    SearchFlags,
    SeedOpt,
    StorageOpt,
    TimeoutOpt,
    TrialsOpt,
    optimize_targets,
)
from rosetta.errors import Problem, UsageError


@reports_errors
def optimize_command(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(help="Agent name or definition path.")],
    model: Annotated[str, typer.Option("--model", "-m", help="Model to optimize for.")],
    worker: Annotated[bool, typer.Option("--worker", help="Join the study in --storage and run trials; the "
                                         "process that started it writes the artifact.")] = False,
    # The search options: read back from ctx.params by SearchFlags.from_params.
    metric: MetricOpt = None, dataset: DatasetOpt = None, trials: TrialsOpt = None, max_calls: MaxCallsOpt = None,
    max_cost: MaxCostOpt = None, timeout: TimeoutOpt = None, dry_run: DryRunOpt = False, seed: SeedOpt = 0,
    storage: StorageOpt = None, proposer: ProposerOpt = None, proposals: ProposalsOpt = 3,
    optimizer: OptimizerOpt = "rosetta", pruner: PrunerOpt = "halving",
    pareto: ParetoOpt = False, baseline: BaselineOpt = False, jobs: JobsOpt = 1,
    nearest_demos: NearestDemosOpt = True, repeats: RepeatsOpt = 1, activate: ActivateOpt = False,
    force: Annotated[bool, typer.Option("--force", help="Search again even if the artifact is up to date.")] = False,
) -> None:
    """Search prompt variants for one agent on one model against its labeled examples (optuna), and
    write the winner as its compiled artifact. Same as `rosetta compile AGENT --model M --optimize`.

    With --worker it joins a shared study (--storage postgresql://...) started by another process.
    """
    if worker and not storage:
        raise UsageError(Problem("--worker needs --storage: the study the workers share", field="--storage"))
    loaded = load_agent(ctx, agent)
    if loaded.definition_path is None:
        raise UsageError(Problem(f"{loaded.name}: no definition to optimize", field="agent"))
    flags = SearchFlags.from_params(ctx.params)
    raise typer.Exit(optimize_targets(ctx, [loaded.definition_path], [model], flags, worker=worker))


@reports_errors
def evaluate_command(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(help="Agent name or definition path.")],
    model: Annotated[str, typer.Option("--model", "-m", help="Model to evaluate on.")],
    split: Annotated[str, typer.Option("--split", help="train | dev | test.")] = "test",
    metric: MetricOpt = None, dataset: DatasetOpt = None, jobs: JobsOpt = 1,
    uncompiled: Annotated[bool, typer.Option("--uncompiled", help="Score the unoptimized render instead of the "
                                             "compiled artifact.")] = False,
    format: Annotated[str, typer.Option("--format", "-f", help="text | json (json: one row per example).")] = "text",
    repeats: Annotated[int | None, typer.Option("--repeats", min=1, help="Answers per example for a model that "
                                                "cannot decode greedily.", show_default="as many as the artifact's "
                                                "score was measured with")] = None,
) -> None:
    """Score what the runtime sends for MODEL (its compiled artifact, else the fallback render) on a
    labeled split, through the runtime's own call path; compare with the score the artifact recorded."""
    from rosetta.optimize.target import evaluate

    loaded = load_agent(ctx, agent)
    if loaded.definition_path is None:
        raise UsageError(Problem(f"{loaded.name}: no definition found", field="agent"))
    if format not in ("text", "json"):
        raise UsageError(Problem(f"unknown format {format!r}", field="--format", expected="text | json"))
    with Progress(TextColumn("[bold]evaluating"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=err, transient=True,
                  disable=not err.is_terminal) as progress, InvalidAnswers():
        task = progress.add_task("evaluate", total=None)
        lines = _PlainProgress(f"evaluating {loaded.name} → {model}")

        def progressed(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)
            if not err.is_terminal:
                lines.update(done, total)

        report = evaluate(loaded.definition_path, model, settings=project_settings(ctx), split=split, metric=metric,
                          dataset=dataset, uncompiled=uncompiled, jobs=jobs, repeats=repeats, on_progress=progressed)
    if format == "json":
        sys.stdout.write(json.dumps({**vars(report), "reproduced": report.reproduced}, indent=2, ensure_ascii=False,
                                    default=str) + "\n")
        return
    out.print(f"{escape(report.agent)} → {escape(report.model)} on {report.split}: "
              f"[bold]{report.metric} {report.score:.4f}[/bold] over {report.examples} examples "
              f"({report.valid} valid, {report.calls} calls)")
    out.print(f"[dim]prompt: {escape(report.selection)}[/dim]")
    if report.draws > 1:
        out.print(f"[dim]{report.model} samples its answers: each example answered {report.draws} times[/dim]")
    if report.recorded is not None:
        style = "green" if report.reproduced else "yellow"
        if report.interval is not None:
            low, high = report.interval
            verdict = f"{'within' if report.reproduced else 'outside'} its 95% interval [{low:.4f}, {high:.4f}]"
        else:
            verdict = "reproduced exactly" if report.reproduced else "differs"
        out.print(f"[{style}]recorded at compile time: {report.recorded:.4f} — {verdict}[/{style}]")
        for reason in report.differences:
            out.print(f"  [yellow]•[/yellow] {escape(reason)}", highlight=False)


class _PlainProgress:
    """Where stderr is not a terminal (CI logs, pipes): a line at the first answer, then at most one a
    minute, and one at the last, so a long evaluation does not look stuck."""

    QUIET_S = 60.0

    def __init__(self, title: str) -> None:
        self.title, self.began, self.said_at = title, time.monotonic(), None

    def update(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self.said_at is None or done == total or now - self.said_at >= self.QUIET_S:
            self.said_at = now
            err.print(f"{escape(self.title)}: {done}/{total} answers · {now - self.began:.0f}s", highlight=False,
                      soft_wrap=True)
