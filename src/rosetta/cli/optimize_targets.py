"""The prompt search that both ``rosetta optimize`` and ``rosetta compile --optimize`` run: its
flags, the loop over (definition, model) targets, and a Rich progress display.

``compile --optimize`` hands over through two names: :meth:`SearchFlags.from_params` gathers the
search options from the command's parsed options (``ctx.params``), and :func:`optimize_paths`
runs the search over every definition found under the paths.
"""

from __future__ import annotations

import dataclasses

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any, Self

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from rosetta.cli.common import err, out, project_settings, relative
from rosetta.errors import Problem, UsageError


@dataclass(frozen=True)
class SearchFlags:
    """The search flags shared by ``compile --optimize`` and ``optimize``."""

    metric: str | None = None
    dataset: str | None = None
    trials: int | None = None
    max_calls: int | None = None
    max_cost: float | None = None
    timeout: float | None = None
    dry_run: bool = False
    seed: int = 0
    storage: str | None = None
    proposer: str | None = None
    proposals: int = 3
    optimizer: str = "rosetta"
    pruner: str = "halving"
    pareto: bool = False
    baseline: bool = False
    jobs: int = 1
    force: bool = False
    nearest_demos: bool = True
    repeats: int = 1
    activate: bool = False

    @classmethod
    def from_params(cls, params: Mapping[str, Any], **overrides: Any) -> SearchFlags:
        """The flags from a command's parsed options (``ctx.params``), each field from the option of
        its name unless ``overrides`` gives it; a field that neither gives is a bug in the command."""
        names = [field.name for field in fields(cls)]
        values = {name: params[name] for name in names if name in params} | overrides
        missing = [name for name in names if name not in values]
        if missing:
            raise TypeError(f"the command declares no option for {', '.join(missing)}")
        return cls(**values)

    def settings(self, model: str, worker: bool = False) -> Any:
        from rosetta.optimize.study import SearchSettings

        proposer = None if (self.proposer or "").lower() == "none" else (self.proposer or model)
        return SearchSettings(trials=self.trials, max_calls=self.max_calls, max_cost=self.max_cost,
                              timeout_s=self.timeout, seed=self.seed, pruner=self.pruner,
                              proposer=proposer, proposals=self.proposals, pareto=self.pareto, jobs=self.jobs,
                              storage=self.storage, worker=worker, baseline_test=self.baseline,
                              nearest_demos=self.nearest_demos, repeats=self.repeats)


MetricOpt = Annotated[str | None, typer.Option("--metric", help="exact | fields | schema_valid | numeric | judge | "
                                               "module:function. Default: the definition's evaluation metric.",
                                               show_default=False)]
DatasetOpt = Annotated[str | None, typer.Option("--dataset", help="Folder of train/dev/test JSONL or CSV, or "
                                                "hub:owner/name. Default: the agent's folder in datasets.",
                                                show_default=False)]
TrialsOpt = Annotated[int | None, typer.Option("--trials", min=1, help="Candidates to race (study-wide, across "
                                               "resumes and workers).", show_default="as many as --max-calls allows "
                                               "(at most 81; 24 without --max-calls)")]
MaxCallsOpt = Annotated[int | None, typer.Option("--max-calls", min=1, help="Most model calls for the search "
                                                 "(proposals, bootstrapping, the race; cached or not): it sizes the "
                                                 "race. The test pass comes on top, so that the winner's test score "
                                                 "covers every row; --dry-run says how many calls it takes.")]
MaxCostOpt = Annotated[float | None, typer.Option("--max-cost", min=0, help="Most USD for the search (litellm "
                                                  "prices); the test pass comes on top.")]
TimeoutOpt = Annotated[float | None, typer.Option("--timeout", min=1, help="Stop searching after this many "
                                                  "seconds.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print the most calls the search and the test pass will "
                                          "make, and their estimated cost, or refuse a budget as the search would; "
                                          "call nothing.")]
ActivateOpt = Annotated[bool, typer.Option("--activate", help="Make the new artifact active even when the active one "
                                           "scores better on the same dev rows (it is otherwise kept as a version); "
                                           "test never decides, it is scored after.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of the sampler, demo sets and dev order.")]
StorageOpt = Annotated[str | None, typer.Option("--storage", help="optuna storage URL (sqlite:///x.db, "
                                                "postgresql://...) shared by workers. Default: a journal file "
                                                "in .rosetta/studies.", show_default=False)]
ProposerOpt = Annotated[str | None, typer.Option("--proposer", help="Model that proposes instruction rewrites, "
                                                 "or 'none'.", show_default="the target model")]
ProposalsOpt = Annotated[int, typer.Option("--proposals", min=0, help="Instruction candidates to ask for.")]
OptimizerOpt = Annotated[str, typer.Option("--optimizer", help="rosetta | dspy-mipro | dspy-bootstrap.")]
PrunerOpt = Annotated[str, typer.Option("--pruner", help="halving (race candidates on shared dev rows, the best "
                                        "third going on) | none (every candidate answers all of dev).")]
ParetoOpt = Annotated[bool, typer.Option("--pareto", help="Score vs prompt tokens: take the shortest prompt "
                                         "within 0.02 of the best score.")]
BaselineOpt = Annotated[bool, typer.Option("--baseline", help="Also score the unoptimized render on test and "
                                           "record it.")]
NearestDemosOpt = Annotated[bool, typer.Option("--nearest-demos/--fixed-demos", help="Also try giving each "
                                               "request the train rows most similar to it as demos (chosen per "
                                               "request), or only fixed demo sets.")]
JobsOpt = Annotated[int, typer.Option("--jobs", "-j", min=1, help="Evaluation calls at once.")]
RepeatsOpt = Annotated[int, typer.Option("--repeats", min=1, help="Answers per test example for a model that cannot "
                                         "decode greedily (it takes no temperature): its score is then a mean "
                                         "with a 95% interval.")]


def optimize_paths(ctx: typer.Context, paths: list[Path], models: list[str] | None, flags: SearchFlags, *,
                   check: bool, out: Path | None = None) -> int:
    """``rosetta compile --optimize``: :func:`optimize_targets` over every definition under ``paths``,
    writing into ``out`` when given (``--out``) instead of the project's compiled directory."""
    from rosetta.definition.discovery import discover_many

    if not models:
        raise UsageError(Problem("--optimize needs --model: the model whose answers are scored", field="--model"))
    if check:
        raise UsageError(Problem("--check and --optimize do not mix", field="--check"))
    definitions = []
    for file, error in discover_many(paths):
        if error is not None:
            raise error
        definitions.append(file)
    return optimize_targets(ctx, definitions, list(models), flags, out=out)


def optimize_targets(ctx: typer.Context, definitions: list[Path], models: list[str], flags: SearchFlags, *,
                     worker: bool = False, out: Path | None = None) -> int:
    """Optimize every (definition, model) and print what happened; errors raise (exit code 2)."""
    from rosetta.optimize.target import OptimizeRequest, optimize

    from rosetta.datasets import NoDataset

    settings = project_settings(ctx)
    if out is not None:
        settings = dataclasses.replace(settings, compiled_dir=out.resolve())
    skipped: list[str] = []  # agents of a tree with no labeled data: listed, not fatal
    for definition in definitions:
        for model in models:
            request = OptimizeRequest(definition=definition, model=model, settings=flags.settings(model, worker),
                                      metric=flags.metric, dataset=flags.dataset, optimizer=flags.optimizer,
                                      force=flags.force, dry_run=flags.dry_run, activate=flags.activate)
            try:
                with _Progress(f"{definition.stem} → {model}", flags.trials) as show, InvalidAnswers():
                    report = optimize(request, settings=settings, on_status=show)
            except NoDataset:
                if len(definitions) == 1 or flags.dataset is not None:
                    raise
                skipped.append(relative(definition))
                break
            _print_report(report)
    if skipped:
        err.print(f"[yellow]skipped[/yellow] {len(skipped)} agent{'s' if len(skipped) != 1 else ''} without labeled "
                  f"data to learn from (no train / dev split under {escape(str(relative(settings.datasets_dir)))}"
                  "/<agent>/): "
                  + escape(", ".join(map(str, skipped))), highlight=False)
        if len(skipped) == len(definitions):
            raise UsageError(Problem("no agent under the given paths has labeled data to optimize on",
                                     hint="add datasets/<agent>/{train,dev,test}.jsonl, or pass --dataset"))
    return 0


class InvalidAnswers:
    """Counts the runtime's per-answer "does not validate" warnings while many answers are scored,
    and prints one line instead: the scores already charge those answers 0."""

    def __init__(self) -> None:
        self.count = 0
        self.first = ""
        self._lock = threading.Lock()  # --jobs answers from several threads

    def filter(self, record: logging.LogRecord) -> bool:
        from rosetta.runtime.runner import INVALID_ANSWER

        if getattr(record, "rosetta_event", None) != INVALID_ANSWER:
            return True
        with self._lock:
            self.count += 1
            self.first = self.first or record.getMessage()[:300]
        return False

    def __enter__(self) -> Self:
        logging.getLogger("rosetta.runtime").addFilter(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("rosetta.runtime").removeFilter(self)
        if self.count:
            err.print(f"[yellow]note[/yellow] {self.count} answer{'s' if self.count != 1 else ''} did not validate "
                      f"and scored 0; the first: {escape(self.first)}", highlight=False)


def _candidates(done: float, total: float | None) -> str:
    """"3/25 candidates", or what is known before the race has its candidates (while proposing)."""
    return f"{int(done)}/{int(total)} candidates" if total else "candidates not chosen yet"


class _CandidatesColumn(ProgressColumn):
    """The race's progress in candidates; no "0/None" before it has them."""

    def render(self, task: Any) -> Text:
        return Text(_candidates(task.completed, task.total))


class _Progress:
    """A Rich progress bar fed by :class:`~rosetta.optimize.study.SearchStatus` updates; where
    stderr is not a terminal (CI logs, pipes) a plain line per phase and trial instead, and at most one
    a minute as calls (or test answers) add up within a phase, so an hour-long search does not look stuck."""

    QUIET_S = 60.0

    def __init__(self, title: str, trials: int) -> None:
        self.title = title
        self.live = err.is_terminal
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), _CandidatesColumn(),
            TextColumn("best [cyan]{task.fields[best]}[/]"), TextColumn("{task.fields[calls]} calls"),
            TextColumn("{task.fields[pruned]} out"), TimeElapsedColumn(), TimeRemainingColumn(),
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
        self.progress.update(self.task, completed=min(status.trials_done, status.trials_total),
                             total=status.trials_total or None, best=best, calls=calls, pruned=status.pruned,
                             phase=escape(phase))
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
                race = _candidates(status.trials_done, status.trials_total)
                err.print(f"{escape(self.title)}: {escape(phase or 'working')} · {race} · best {best} · {spent} · "
                          f"{status.pruned} out · "
                          f"{now - self.began:.0f}s", highlight=False, soft_wrap=True)

    def __exit__(self, *exc: object) -> None:
        if self.started and self.live:
            self.progress.stop()


def _print_report(report: Any) -> None:
    label = f"{report.agent} → {report.model}"
    if report.status == "dry run":
        _print_plan(label, report)
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
    raced = f"{outcome.trials} candidates, {outcome.pruned} out" + (
        f", {outcome.cut_short} stopped by the budget" if outcome.cut_short else "")
    verb = "[green]optimized[/green]" if report.status == "written" else "[yellow]optimized, not activated[/yellow]"
    budget = report.plan.max_calls if report.plan is not None else None
    spend = (f"{outcome.calls} calls within --max-calls {budget} and {outcome.test_calls} test calls outside it"
             if budget is not None else f"{outcome.calls} search calls and {outcome.test_calls} test calls")
    out.print(f"{verb} {escape(label)}: {escape(_winner(outcome))}; dev {outcome.dev_score:.3f}{baseline}{test}; "
              f"{raced}; {spend} ({outcome.paid_calls} paid this run), {report.wall_s:.0f}s  "
              f"[dim]{escape(str(report.artifact))}[/dim]")
    out.print(f"           [dim]{escape(_honesty(outcome))}[/dim]")
    if outcome.race.get("confirmation", {}).get("rows"):
        out.print(f"           [dim]{escape(_decision(outcome.race))}[/dim]")
    if outcome.phases:
        spent = ", ".join(f"{calls} {phase}" for phase, calls in {**outcome.phases, "test": outcome.test_calls}.items()
                          if calls)
        out.print(f"           [dim]calls by phase: {escape(spent or 'none')}"
                  + (f"; rows scored by {escape(outcome.scoring)}" if outcome.scoring != "metric" else "")
                  + "[/dim]")
    if outcome.stopped:
        out.print(f"           [yellow]stopped early: {escape(outcome.stopped)}[/yellow]")
    if report.activation:
        style = "yellow" if report.status == "kept as a version" else "dim"
        out.print(f"           [{style}]{escape(report.activation)}[/{style}]")


def _winner(outcome: Any) -> str:
    """Which candidate won and what kind it is: seeded (there whatever the seed) or drawn."""
    from rosetta.optimize.space import origin

    number = outcome.race.get("winner") if outcome.race else None
    what = f"candidate {number}" if number is not None else "DSPy's choice"
    return f"winner {what}" + (f" ({outcome.kind}, {origin(outcome.kind)})" if outcome.kind else "")


def _decision(race: dict[str, Any]) -> str:
    """How the prior and the best challenger compared on the confirmation rows, and what it decided."""
    confirmation = race["confirmation"]
    prior = f"prior: candidate {race['prior']} ({race.get('prior_kind')})"
    if race.get("challenger") is None:
        return f"{prior}, with no challenger left to test it against"
    challenger = f"best challenger on the screening rows: candidate {race['challenger']} ({race.get('challenger_kind')})"
    if "p" not in confirmation:
        return f"{prior}; {challenger}, stopped before the {confirmation['rows']} confirmation rows: the prior stays"
    verdict = "it replaces the prior" if confirmation["replaced"] else "the prior stays"
    return (f"{prior}; {challenger}: on {confirmation['rows']} confirmation rows {confirmation['challenger']:.3f} "
            f"against {confirmation['prior']:.3f}, one-sided paired test p = {confirmation['p']:.3g} (replaces at "
            f"p ≤ {1 - confirmation['confidence']:g}): {verdict}")


def _honesty(outcome: Any) -> str:
    """What each score is worth: dev chose the winner, so its interval is optimistic; test, scored
    once after every choice, is the honest estimate."""
    from rosetta.optimize.evaluation import interval95

    def shown(interval: tuple[float, float] | None) -> str:
        return "" if interval is None else f", 95% interval [{interval[0]:.3f}, {interval[1]:.3f}]"

    dev = f"dev chose the winner on {outcome.dev_examples} rows{shown(outcome.dev_interval)}"
    dev += ": it ignores that selection, so it overstates" if outcome.dev_interval is not None else ""
    if outcome.test_score is None:
        return dev + "; no test rows: no unbiased estimate"
    rows = len(outcome.test_per_example)
    return dev + (f"; test, scored once after every choice on {rows} row{'s' if rows != 1 else ''}"
                  f"{shown(interval95(outcome.test_per_example))}, is the honest estimate")


def _print_plan(label: str, report: Any) -> None:
    """A dry run: the calls the search will make, from the same plan it runs; the test pass apart,
    since --max-calls does not bound it (the winner's test score covers every row)."""
    plan = report.plan
    each = f"each answer may take {plan.retries} validation retr{'y' if plan.retries == 1 else 'ies'}" + (
        f" and a judge's verdict of up to {plan.judge} calls" if plan.judge else "")
    search = plan.search_calls()
    tests = f"{plan.test} test answers" + (f" and up to {plan.baseline_dev} dev answers of the unoptimized render"
                                           if plan.baseline_dev else "")
    outside = ", outside --max-calls so that the winner's test score covers every row" if plan.max_calls else ""
    test_line = f"the test pass{outside}: {tests}, at most {plan.test_calls()} calls"
    if search is None:  # DSPy's optimizer: its own calls first, then rosetta scores its choice
        most = plan.dspy_dev * plan.per_answer + plan.test_calls() + report.rescoring * plan.per_answer
        head = f"DSPy's own calls (not counted ahead), then at most {most} calls"
        lines = [f"scoring DSPy's choice on dev: {plan.dspy_dev} answers, at most {plan.dspy_dev * plan.per_answer} "
                 "calls", test_line]
    else:
        most = search + plan.test_calls() + report.rescoring * plan.per_answer
        head = f"at most {most} calls"
        budget = f" (--max-calls {plan.max_calls})" if plan.max_calls is not None else ""
        lines = [f"the search: at most {search} calls{budget}: {plan.proposals} proposals, {plan.bootstrap} "
                 f"bootstrap answers, a race planned at {plan.race.calls()} answers", test_line]
    if report.rescoring:
        lines.append(f"before it may be replaced, the active artifact answers {report.rescoring} dev rows "
                     f"({report.rescoring_why}), at most {report.rescoring * plan.per_answer} calls")
    lines.append(each)
    out.print(f"[bold]dry run[/bold] {escape(label)}: {head}, about ${report.cost_usd:.4f} if all are made; "
              "nothing was called")
    for line in [*lines, *report.notes]:
        out.print(f"           [dim]{escape(line)}[/dim]")
