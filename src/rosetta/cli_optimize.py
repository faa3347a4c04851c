"""``rosetta compile --optimize``, ``rosetta optimize`` and ``rosetta evaluate``: thin commands over
:mod:`rosetta.compile.optimize`, with a Rich progress display."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from rosetta.cli import _load_agent, _settings, app, err, out, reports_errors
from rosetta.cli_flags import (BaselineOpt, DatasetOpt, DryRunOpt, JobsOpt, MaxCallsOpt, MaxCostOpt, MetricOpt,
                               MinibatchOpt, NearestDemosOpt, OptimizerOpt, ParetoOpt, ProposalsOpt, ProposerOpt,
                               PrunerOpt, SearchFlags, SeedOpt, StorageOpt, TimeoutOpt, TrialsOpt)
from rosetta.errors import Problem, UsageError


def optimize_targets(ctx: typer.Context, definitions: list[Path], models: list[str], flags: SearchFlags, *,
                     worker: bool = False) -> int:
    """Optimize every (definition, model) and print what happened; errors raise (exit code 2)."""
    from rosetta.compile.optimize.target import OptimizeRequest, optimize

    settings = _settings(ctx)
    for definition in definitions:
        for model in models:
            request = OptimizeRequest(definition=definition, model=model, settings=flags.settings(model, worker),
                                      metric=flags.metric, dataset=flags.dataset, optimizer=flags.optimizer,
                                      force=flags.force, dry_run=flags.dry_run)
            with _progress(f"{definition.stem} → {model}", flags.trials) as show, _invalid_answers():
                report = optimize(request, settings=settings, on_status=show)
            _print_report(report)
    return 0


class _invalid_answers:
    """Counts the runtime's per-answer "does not validate" warnings while many answers are scored,
    and prints one line instead: the scores already charge those answers 0."""

    def __init__(self) -> None:
        self.count = 0
        self.first = ""
        self._lock = threading.Lock()  # --jobs answers from several threads

    def filter(self, record: logging.LogRecord) -> bool:
        from rosetta.runtime.agent import INVALID_ANSWER

        if getattr(record, "rosetta_event", None) != INVALID_ANSWER:
            return True
        with self._lock:
            self.count += 1
            self.first = self.first or record.getMessage()[:300]
        return False

    def __enter__(self) -> _invalid_answers:
        logging.getLogger("rosetta.runtime").addFilter(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("rosetta.runtime").removeFilter(self)
        if self.count:
            err.print(f"[yellow]note[/yellow] {self.count} answer{'s' if self.count != 1 else ''} did not validate "
                      f"and scored 0; the first: {escape(self.first)}", highlight=False)


class _progress:
    """A Rich progress bar fed by :class:`~rosetta.compile.optimize.study.SearchStatus` updates; where
    stderr is not a terminal (CI logs, pipes) a plain line per phase and trial instead, and at most one
    a minute as calls (or test answers) add up within a phase, so an hour-long search does not look stuck."""

    QUIET_S = 60.0

    def __init__(self, title: str, trials: int) -> None:
        self.title = title
        self.live = err.is_terminal
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total} trials"),
            TextColumn("best [cyan]{task.fields[best]}[/]"), TextColumn("{task.fields[calls]} calls"),
            TextColumn("{task.fields[pruned]} pruned"), TimeElapsedColumn(), TimeRemainingColumn(),
            TextColumn("[dim]{task.fields[phase]}[/]"), console=err, transient=False,
        )
        self.task = self.progress.add_task(title, total=trials, best="–", calls="0", pruned=0, phase="")
        self.note = ""
        self.started = False
        self.began = time.monotonic()
        self.line: tuple[Any, ...] = ()
        self.line_at = 0.0

    def __enter__(self) -> Any:
        return self

    def __call__(self, status: Any) -> None:
        if not self.started:  # shown only once there is work to show (not for up-to-date or dry runs)
            self.started = True
            if self.live:
                self.progress.start()
        calls = f"{status.calls}" + (f" (${status.cost:.4f})" if status.cost else "")
        best = "–" if status.best is None else f"{status.best:.3f}"
        phase = status.phase + (f" ({status.answered}/{status.to_answer})" if status.to_answer else "")
        self.progress.update(self.task, completed=min(status.trials_done, status.trials_total), best=best,
                             calls=calls, pruned=status.pruned, phase=escape(phase))
        if status.note and status.note != self.note:
            self.note = status.note
            self.progress.console.print(f"[yellow]note[/yellow] {escape(status.note)}")
        if not self.live:
            now = time.monotonic()
            key = (status.phase, status.trials_done)
            work = status.calls + status.answered
            if key != self.line[:2] or (work != self.line[2] and now - self.line_at >= self.QUIET_S):
                self.line, self.line_at = (*key, work), now
                spent = f"{status.calls} calls" + (f" (${status.cost:.4f})" if status.cost else "")
                err.print(f"{escape(self.title)}: {escape(phase or 'working')} · {status.trials_done}/"
                          f"{status.trials_total} trials · best {best} · {spent} · {status.pruned} pruned · "
                          f"{now - self.began:.0f}s", highlight=False, soft_wrap=True)

    def __exit__(self, *exc: object) -> None:
        if self.started and self.live:
            self.progress.stop()


def _print_report(report: Any) -> None:
    label = f"{report.agent} → {report.model}"
    if report.status == "dry run":
        estimate = report.estimate
        out.print(f"[bold]dry run[/bold] {escape(label)}: at most {estimate['total']} calls "
                  f"({estimate['proposals']} proposals, {estimate['bootstrap']} bootstrap, {estimate['search']} search, "
                  f"{estimate['test']} test" + (f", {estimate['judge']} judge" if estimate["judge"] else "")
                  + f"), about ${estimate['cost_usd']:.4f}; nothing was called")
        for note in report.notes:
            out.print(f"           [dim]{escape(note)}[/dim]")
        return
    if report.status == "up to date":
        out.print(f"[dim]up to date[/dim] {escape(label)}  [dim]{escape(str(report.artifact))} (same definition, "
                  "data and settings; --force to search again)[/dim]")
        return
    if report.status == "worker done":
        out.print(f"[green]worker done[/green] {escape(label)}")
        return
    outcome = report.outcome
    baseline = "" if outcome.baseline_dev is None else f" (unoptimized {outcome.baseline_dev:.3f})"
    test = "" if outcome.test_score is None else f", test {outcome.test_score:.3f}"
    if outcome.baseline_test is not None:
        test += f" (unoptimized {outcome.baseline_test:.3f})"
    out.print(f"[green]optimized[/green] {escape(label)}: dev {outcome.dev_score:.3f}{baseline}{test}; "
              f"{outcome.trials} trials, {outcome.pruned} pruned, {outcome.calls} calls "
              f"({outcome.paid_calls} paid this run), {report.wall_s:.0f}s  [dim]{escape(str(report.artifact))}[/dim]")
    if outcome.stopped:
        out.print(f"           [yellow]stopped early: {escape(outcome.stopped)}[/yellow]")


@app.command("optimize")
@reports_errors
def optimize_command(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(help="Agent name or definition path.")],
    model: Annotated[str, typer.Option("--model", "-m", help="Model to optimize for.")],
    worker: Annotated[bool, typer.Option("--worker", help="Join the study in --storage and run trials; the "
                                         "process that started it writes the artifact.")] = False,
    metric: MetricOpt = None, dataset: DatasetOpt = None, trials: TrialsOpt = 20, max_calls: MaxCallsOpt = None,
    max_cost: MaxCostOpt = None, timeout: TimeoutOpt = None, dry_run: DryRunOpt = False, seed: SeedOpt = 0,
    storage: StorageOpt = None, proposer: ProposerOpt = None, proposals: ProposalsOpt = 3,
    optimizer: OptimizerOpt = "rosetta", minibatch: MinibatchOpt = 10, pruner: PrunerOpt = "halving",
    pareto: ParetoOpt = False, baseline: BaselineOpt = False, jobs: JobsOpt = 1,
    nearest_demos: NearestDemosOpt = True,
    force: Annotated[bool, typer.Option("--force", help="Search again even if the artifact is up to date.")] = False,
) -> None:
    """Search prompt variants for one agent on one model against its labeled examples (optuna), and
    write the winner as its compiled artifact. Same as `rosetta compile AGENT --model M --optimize`.

    With --worker it joins a shared study (--storage postgresql://...) started by another process.
    """
    if worker and not storage:
        raise UsageError(Problem("--worker needs --storage: the study the workers share", field="--storage"))
    loaded = _load_agent(ctx, agent)
    if loaded.definition_path is None:
        raise UsageError(Problem(f"{loaded.name}: no definition to optimize", field="agent"))
    flags = SearchFlags(metric, dataset, trials, max_calls, max_cost, timeout, dry_run, seed, storage, proposer,
                        proposals, optimizer, minibatch, pruner, pareto, baseline, jobs, force, nearest_demos)
    raise typer.Exit(optimize_targets(ctx, [loaded.definition_path], [model], flags, worker=worker))


@app.command("evaluate")
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
) -> None:
    """Score what the runtime sends for MODEL (its compiled artifact, else the fallback render) on a
    labeled split, through the runtime's own call path; compare with the score the artifact recorded."""
    from rosetta.compile.optimize.target import evaluate

    loaded = _load_agent(ctx, agent)
    if loaded.definition_path is None:
        raise UsageError(Problem(f"{loaded.name}: no definition found", field="agent"))
    if format not in ("text", "json"):
        raise UsageError(Problem(f"unknown format {format!r}", field="--format", expected="text | json"))
    with Progress(TextColumn("[bold]evaluating"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=err, transient=True) as progress, \
            _invalid_answers():
        task = progress.add_task("evaluate", total=None)
        report = evaluate(loaded.definition_path, model, settings=_settings(ctx), split=split, metric=metric,
                          dataset=dataset, uncompiled=uncompiled, jobs=jobs,
                          on_progress=lambda done, total: progress.update(task, completed=done, total=total))
    if format == "json":
        sys.stdout.write(json.dumps({**vars(report), "reproduced": report.reproduced}, indent=2, ensure_ascii=False,
                                    default=str) + "\n")
        return
    out.print(f"{escape(report.agent)} → {escape(report.model)} on {report.split}: "
              f"[bold]{report.metric} {report.score:.4f}[/bold] over {report.examples} examples "
              f"({report.valid} valid, {report.calls} calls)")
    out.print(f"[dim]prompt: {escape(report.selection)}[/dim]")
    if report.recorded is not None:
        style = "green" if report.reproduced else "yellow"
        out.print(f"[{style}]recorded at compile time: {report.recorded:.4f} — "
                  f"{'reproduced exactly' if report.reproduced else 'differs'}[/{style}]")
        for reason in report.differences:
            out.print(f"  [yellow]•[/yellow] {escape(reason)}", highlight=False)
