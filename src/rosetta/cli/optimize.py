"""``rosetta optimize`` and ``rosetta evaluate``: search prompt variants for one agent on one
model, and score what the runtime sends on a labeled split; thin commands over
:mod:`rosetta.optimize`."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from rosetta.cli.common import err, load_agent, out, project_settings, relative, reports_errors
from rosetta.cli.optimize_targets import (
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
    write the winner as its compiled artifact (as `rosetta compile PATH --model M --optimize` does for
    the agent's file).

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
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model to evaluate on.")] = None,
    cross: Annotated[list[str] | None, typer.Option(
        "--cross", help="Score every model's prompt on every model (repeatable; with --model, that one too): "
                        "rows whose prompt, columns which model answered, plus each model's uncompiled render.",
    )] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="With --cross: also write the matrix as a heatmap "
                                              "(one HTML file).")] = None,
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
    labeled split, through the runtime's own call path; compare with the score the artifact recorded.

    With --cross: the cross-model matrix, each model's prompt sent as is to every model."""
    from rosetta.optimize.rescore import evaluate

    loaded = load_agent(ctx, agent)
    if loaded.definition_path is None:
        raise UsageError(Problem(f"{loaded.name}: no definition found", field="agent"))
    if format not in ("text", "json"):
        raise UsageError(Problem(f"unknown format {format!r}", field="--format", expected="text | json"))
    if cross:
        if uncompiled or repeats is not None:
            raise UsageError(Problem("--cross scores each model's own prompt and uncompiled render, greedily",
                                     field="--uncompiled" if uncompiled else "--repeats",
                                     hint="leave it out, or evaluate one --model without --cross"))
        if plot is not None:
            plotly_figures()  # a missing extra is said now, not after every model has answered
        _cross(ctx, loaded, [*([model] if model else []), *cross], split=split, metric=metric, dataset=dataset,
               jobs=jobs, format=format, plot=plot)
        return
    if model is None:
        raise UsageError(Problem("name the model to evaluate on", field="--model",
                                 hint=f"rosetta evaluate {loaded.name} --model local/gemma-3-270m, or --cross "
                                      "MODEL twice or more for the cross-model matrix"))
    if plot is not None:
        raise UsageError(Problem("--plot draws the cross-model matrix", field="--plot", hint="add --cross MODEL ..."))
    with _answer_progress("evaluating", f"evaluating {loaded.name} → {model}") as progressed:
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


def _cross(ctx: typer.Context, loaded: Any, models: list[str], *, split: str, metric: str | None,
           dataset: str | None, jobs: int, format: str, plot: Path | None) -> None:
    """``evaluate --cross``: the matrix as a table (each column's best marked), JSON, or a heatmap."""
    from rich.table import Table

    from rosetta.optimize.cross import cross_evaluate
    from rosetta.store.cross import UNCOMPILED

    settings = project_settings(ctx)
    with _answer_progress("cross-evaluating", f"cross-evaluating {loaded.name} on {len(models)} models") as progressed:
        matrix = cross_evaluate(loaded.definition_path, models, settings=settings, split=split, metric=metric,
                                dataset=dataset, jobs=jobs, on_progress=progressed, record=True)
    kept = Path(matrix.recorded)
    kept = kept.relative_to(settings.root) if kept.is_relative_to(settings.root) else kept
    err.print(f"recorded in {escape(str(kept))}" + (
        ": a model with no artifact of its own is not lent one that scored below its own uncompiled render there"
        if split == "dev" else f" for the report; the runtime's fallback reads only a matrix measured on dev "
                               f"(--split dev), never one on {split}"))
    if plot is not None:
        write_heatmap(matrix, plot)
        err.print(f"heatmap written to {escape(str(relative(plot)))}")
    if format == "json":
        sys.stdout.write(json.dumps(matrix.to_dict(), indent=2, ensure_ascii=False) + "\n")
        return
    table = Table(title=escape(f"{matrix.agent} on {split}: {matrix.metric} over {matrix.examples} examples "
                               "(rows: whose prompt; columns: which model answered; * best in its column)"),
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("Prompt of", overflow="fold")
    for column in matrix.models:
        table.add_column(escape(column), justify="right", overflow="fold")
    for row in [*matrix.models, UNCOMPILED]:
        cells = []
        for column in matrix.models:
            score, best = matrix.scores[row][column], row in matrix.best(column)
            cells.append(f"[bold]{score:.3f} *[/bold]" if best else f"{score:.3f}")
        table.add_row(escape(row if row != UNCOMPILED else "uncompiled render (each model its own)"), *cells)
    out.print(table)
    for row in matrix.models:
        out.print(f"[dim]{escape(row)}'s prompt: {escape(matrix.prompts[row])}[/dim]", highlight=False)
    for column in matrix.models:
        if not matrix.own_prompt_wins(column):
            out.print(f"[yellow]{escape(column)} scores higher with another model's prompt than with its own[/yellow]")


def plotly_figures() -> Any:
    """``plotly.graph_objects``, or a UsageError naming the extra that installs it."""
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise UsageError(Problem("drawing the heatmap needs plotly, which is not installed", field="--plot",
                                 hint="pip install 'rosetta-prompts[plots]'")) from None
    return go


def write_heatmap(matrix: Any, path: Path) -> None:
    """The matrix as a plotly heatmap in one self-contained HTML file, written atomically."""
    go = plotly_figures()
    from rosetta.fileio import write_atomic
    from rosetta.store.cross import UNCOMPILED

    rows = [*matrix.models, UNCOMPILED]
    values = [[matrix.scores[row][column] for column in matrix.models] for row in rows]
    marks = [[f"{value:.3f}" + (" *" if row in matrix.best(column) else "") for value, column in
              zip(line, matrix.models)] for line, row in zip(values, rows)]
    figure = go.Figure(go.Heatmap(z=values, x=matrix.models, y=[f"prompt of {row}" if row != UNCOMPILED else
                                                                   "uncompiled render (own)" for row in rows],
                                  text=marks, texttemplate="%{text}", colorscale="Viridis", zmin=0, zmax=1,
                                  colorbar={"title": matrix.metric}))
    figure.update_layout(title=f"{matrix.agent}: {matrix.metric} on {matrix.split} ({matrix.examples} examples); "
                               "* best in its column", xaxis_title="answered by", yaxis_autorange="reversed")
    try:
        write_atomic(path, figure.to_html(full_html=True, include_plotlyjs=True))
    except OSError as exc:
        raise UsageError(Problem(f"cannot write {path}: {exc.strerror or exc}", field="--plot")) from None


@contextlib.contextmanager
def _answer_progress(verb: str, title: str) -> Iterator[Callable[[int, int], None]]:
    """A bar counting answers on a terminal (plain lines elsewhere), with invalid answers counted
    rather than each logged; yields the ``on_progress(done, total)`` callback."""
    with Progress(TextColumn(f"[bold]{verb}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=err, transient=True,
                  disable=not err.is_terminal) as progress, InvalidAnswers():
        task = progress.add_task(verb, total=None)
        lines = _PlainProgress(title)

        def progressed(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)
            if not err.is_terminal:
                lines.update(done, total)

        yield progressed


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
