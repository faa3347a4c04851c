"""``rosetta versions`` and ``rosetta experiment start|report|promote|stop``: thin commands over
:mod:`rosetta.rollout`.

Exit codes: 0 done; 1 ``promote --auto`` found the rule does not hold (nothing changed); 2 bad
usage, an unknown version id, or a rollout file that cannot be read.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from rosetta.cli.common import ListFormat, err, load_agent, out, print_note, reports_errors
from rosetta.errors import Location, Problem, UsageError

experiment_app = typer.Typer(help="A/B test two versions of a compiled prompt, and promote the better one.",
                             no_args_is_help=True)
"""``rosetta experiment``: its commands register here; :mod:`rosetta.cli` adds it to the app."""

AgentArg = Annotated[str, typer.Argument(help="Agent name or definition path.")]
ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Model whose artifact is versioned, e.g. "
                                       "local/gemma-3-270m.")]
LogOpt = Annotated[Path | None, typer.Option("--log", help="Outcome log to read.",
                                             show_default=".rosetta/outcomes/<agent>.jsonl")]


class Metric(StrEnum):
    success = "success"
    valid = "valid"
    score = "score"
    latency_s = "latency_s"
    cost_usd = "cost_usd"


class Test(StrEnum):
    z = "z"
    welch = "welch"


@dataclass(frozen=True)
class _Target:
    """One agent's artifact on one model: where its versions and rollout file live."""

    agent: str
    model: str
    artifact: Path
    out: Path
    root: Path


def _target(ctx: typer.Context, agent: str, model: str) -> _Target:
    from rosetta.providers.catalog import catalog_for
    from rosetta.store.artifact import artifact_path
    from rosetta.store.versions import known_ids

    loaded = load_agent(ctx, agent)
    model_id = catalog_for(loaded.dirs.root, loaded.dirs.models).resolve(model, unlisted=loaded.dirs.unlisted_models).id
    artifact = artifact_path(loaded.dirs.compiled_dir, loaded.name, model_id)
    if not known_ids(artifact):
        raise UsageError(Problem(f"{loaded.name} has no compiled versions for {model_id}", Location(str(artifact)),
                                 "--model", hint=f"run `rosetta compile --model {model_id}` first"))
    return _Target(loaded.name, model_id, artifact, loaded.dirs.compiled_dir, loaded.dirs.root)


def _warn(problems: list[Problem]) -> None:
    for problem in problems:
        first, *rest = problem.format().split("\n")
        err.print(f"[yellow]warning[/yellow] {escape(first)}")
        for line in rest:
            err.print(f"[dim]{escape(line)}[/dim]")


@reports_errors
def versions_command(
    ctx: typer.Context,
    agent: AgentArg,
    model: ModelOpt,
    format: Annotated[ListFormat, typer.Option("--format", "-f", help="Output format.")] = ListFormat.text,
) -> None:
    """List the versions of an agent's compiled prompt for one model.

    Each version is an artifact's content_sha256 (shown as 12 hex digits): which one is active or
    the treatment, when it was compiled, and the scores an optimized one recorded.
    """
    from rosetta.errors import RolloutError
    from rosetta.store.pins import load_rollout
    from rosetta.store.versions import list_versions, resolve_id, rollout_path, short_id, versions_dir

    target = _target(ctx, agent, model)
    versions = list_versions(target.artifact, root=target.root)
    rollout, problems = load_rollout(rollout_path(target.artifact)) or (None, [])
    active = next((v.id for v in versions if v.current and v.problem is None), None)
    treatment, share = None, None
    if rollout is not None:
        try:
            active = resolve_id(target.artifact, rollout.active)[0]
            if rollout.experiment is not None:
                treatment = resolve_id(target.artifact, rollout.experiment.treatment)[0]
                share = rollout.experiment.share
        except RolloutError as error:
            problems = [*problems, *error.problems]
    _warn(problems)
    if format is ListFormat.json:
        rows = [{"id": v.id, "short": v.short, "active": v.id == active, "treatment": v.id == treatment,
                 "current": v.current, "written": v.written.isoformat(timespec="seconds"),
                 "agent_version": v.agent_version, "scores": v.scores if v.measured_here else {},
                 "recorded_scores": v.scores, "measured_here": v.measured_here, "optimizer": v.optimizer,
                 "dataset_sha256": v.dataset,
                 "path": str(v.path), "problem": v.problem} for v in versions]
        sys.stdout.write(json.dumps({"agent": target.agent, "model": target.model,
                                     "rollout": rollout.to_dict() if rollout else None, "versions": rows},
                                    indent=2, ensure_ascii=False) + "\n")
        return
    table = Table(title=escape(f"{target.agent} on {target.model}: {len(versions)} versions"), title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("Version", "Status", "Written (UTC)", "Data", "Scores (rows)", "By"):
        table.add_column(column, overflow="fold", no_wrap=column in ("Version", "Written (UTC)", "Data"))
    for v in versions:
        status = []
        if v.id == active:
            status.append("[green]active[/green]")
        if v.id == treatment:
            status.append(f"[cyan]treatment {share:.0%}[/cyan]")
        if v.problem:
            status.append(f"[red]unusable: {escape(v.problem)}[/red]")
        table.add_row(short_id(v.id) + ("*" if v.current else ""), ", ".join(status), f"{v.written:%Y-%m-%d %H:%M}",
                      v.dataset[:8] if v.dataset else "-",
                      escape(_scores(v.scores)) if v.measured_here or not v.scores else "[dim]not measured here[/dim]",
                      escape(v.optimizer or "-"))
    out.print(table)
    print_note("Data: the labeled dataset's sha256 the scores were measured on; By: the optimizer")
    if any(v.scores and not v.measured_here for v in versions):
        print_note("not measured here: the version records scores no search on this machine measured (shipped with "
                   "the project, or from another machine), so they are not shown; `--format json` has them as "
                   "recorded_scores, `rosetta evaluate` measures the serving version")
    print_note("* the compiled artifact (what `rosetta compile` wrote last); the others are kept in "
               f"{versions_dir(target.artifact).name}/")
    if len({v.dataset for v in versions if v.dataset}) > 1:
        out.print("[yellow]scores measured on different datasets (the Dataset column) are not comparable[/yellow]; "
                  "`rosetta evaluate` scores a version on the data you choose")


def _scores(scores: dict[str, Any]) -> str:
    if not scores:
        return "-"
    rows = {"dev": scores.get("dev_examples"), "test": scores.get("test_examples")}
    shown = [f"{key} {value:.3f}" + (f" ({rows[key.removeprefix('baseline_')]})"
                                     if rows.get(key.removeprefix("baseline_")) else "")
             for key, value in scores.items()
             if key in ("dev", "test", "baseline_dev", "baseline_test") and isinstance(value, (int, float))]
    return (f"{scores['metric']}: " if scores.get("metric") else "") + ", ".join(shown)


@experiment_app.command("start")
@reports_errors
def start_command(
    ctx: typer.Context,
    agent: AgentArg,
    model: ModelOpt,
    treatment: Annotated[str, typer.Option("--treatment", "-t", help="Version id the treatment arm gets "
                                           "(`rosetta versions` lists them; 7+ hex digits).")],
    share: Annotated[float, typer.Option("--share", help="Share of users in the treatment arm, 0.0-1.0.")],
    experiment_id: Annotated[str | None, typer.Option("--id", help="Experiment name; it seeds the assignment.",
                                                      show_default="exp-<UTC date and time>")] = None,
    control: Annotated[str | None, typer.Option("--control", help="Version id of the control arm.",
                                                show_default="the active version")] = None,
    metric: Annotated[Metric, typer.Option("--metric", help="What decides the experiment.")] = Metric.success,
    test: Annotated[Test | None, typer.Option("--test", help="z (rates) or welch.",
                                              show_default="z for success/valid, welch otherwise")] = None,
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level.")] = 0.05,
    min_samples: Annotated[int, typer.Option("--min-samples", help="Samples per arm before deciding.")] = 100,
    auto_promote: Annotated[bool, typer.Option("--auto-promote", help="Let `experiment report` promote the "
                                               "treatment once the rule holds.")] = False,
) -> None:
    """Start an A/B test of a version against the active one.

    A share of users, picked by a hash of the experiment id and their user_id, get the treatment;
    the rest get the active version, always the same arm per user. Calls without a user_id stay on
    the active version and are not counted.
    """
    from rosetta.rollout.promotion import start_experiment
    from rosetta.store.versions import rollout_path, short_id

    target = _target(ctx, agent, model)
    rollout = start_experiment(target.artifact, target.out, agent=target.agent, model=target.model,
                               treatment=treatment, share=share, experiment_id=experiment_id, control=control,
                               metric=metric.value, test=test.value if test else None, alpha=alpha,
                               min_samples=min_samples, auto_promote=auto_promote)
    experiment = rollout.experiment
    assert experiment is not None
    out.print(f"[green]started[/green] experiment [bold]{escape(experiment.id)}[/bold] for {escape(target.agent)} "
              f"on {escape(target.model)}: treatment {short_id(experiment.treatment)} for {experiment.share:.0%} of "
              f"users, control {short_id(rollout.active)} for the rest")
    if experiment.restore:
        out.print(f"[yellow]the control is not what served before ({short_id(experiment.restore)})[/yellow]: it now "
                  f"serves {1 - experiment.share:.0%} of users; `rosetta experiment stop` brings "
                  f"{short_id(experiment.restore)} back")
    out.print(f"[dim]decided on {experiment.metric} ({experiment.test}, alpha {experiment.alpha:g}, "
              f"≥ {experiment.min_samples} per arm); {escape(str(rollout_path(target.artifact)))}[/dim]")


def _experiment_report(target: _Target, log: Path | None) -> Any:
    """The report of the experiment running on ``target``, or a UsageError saying none runs."""
    from rosetta.rollout.outcomes import default_path, read_outcomes
    from rosetta.rollout.report import build_report
    from rosetta.store.pins import read_rollout
    from rosetta.store.versions import resolve_id, rollout_path

    file = rollout_path(target.artifact)
    rollout = read_rollout(file)
    if rollout is None or rollout.experiment is None:
        raise UsageError(Problem(f"no experiment is running for {target.agent} on {target.model}", Location(str(file)),
                                 hint=f"start one with `rosetta experiment start {target.agent} --model {target.model} "
                                      "--treatment ID --share 0.2`"))
    where = Location(str(file))
    versions = {"control": resolve_id(target.artifact, rollout.active, where=where, field_name="active")[0],
                "treatment": resolve_id(target.artifact, rollout.experiment.treatment, where=where,
                                        field_name="experiment.treatment")[0]}
    outcomes, skipped = read_outcomes(log) if log else read_outcomes(default_path(target.agent, target.root),
                                                                      root=target.root)
    if skipped:
        err.print(f"[yellow]warning[/yellow] {skipped} line(s) in the outcome log skipped (unreadable, holding "
                  "impossible values, or not signed on this machine: a line shipped with the project or edited by "
                  "hand counts for nothing)")
    return build_report(target.agent, target.model, rollout.experiment, versions, outcomes, skipped)


def _running(ctx: typer.Context, agent: str) -> list[_Target]:
    """Every model of ``agent`` with a rollout file that runs an experiment."""
    from rosetta.store.pins import load_rollout
    from rosetta.store.versions import rollout_path

    loaded = load_agent(ctx, agent)
    found = []
    for model_id, path in sorted(loaded.artifacts.items()):
        state = load_rollout(rollout_path(path))
        if state is not None and (state[0] is None or state[0].experiment is not None or state[1]):
            found.append(_Target(loaded.name, model_id, path, loaded.dirs.compiled_dir, loaded.dirs.root))
    if not found:
        raise UsageError(Problem(f"no experiment is running for {loaded.name}", Location(str(loaded.dirs.compiled_dir)),
                                 hint=f"start one with `rosetta experiment start {loaded.name} --model M "
                                      "--treatment ID --share 0.2`"))
    return found


@experiment_app.command("report")
@reports_errors
def report_command(
    ctx: typer.Context,
    agent: AgentArg,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Only this model.",
                                              show_default="every model running an experiment")] = None,
    format: Annotated[ListFormat, typer.Option("--format", "-f", help="Output format.")] = ListFormat.text,
    log: LogOpt = None,
) -> None:
    """Compare the arms of running experiments and say whether one can be decided.

    Per-arm counts, rates and means from the outcome log; each metric tested (two-proportion
    z-test for rates, Welch's t-test for means). With auto_promote set on the experiment, a
    treatment that passes the rule is promoted.
    """
    from rosetta.rollout.promotion import promote

    targets = [_target(ctx, agent, model)] if model else _running(ctx, agent)
    reports = []
    for target in targets:
        report = _experiment_report(target, log)
        promoted = None
        if report.experiment.auto_promote and report.decision.promote:
            promote(target.artifact, target.out, agent=target.agent, model=target.model,
                    experiment_id=report.experiment.id)
            promoted = report.experiment.treatment
        reports.append((target, report, promoted))
    if format is ListFormat.json:
        rows = [{**report.to_dict(), "promoted": promoted} for _, report, promoted in reports]
        sys.stdout.write(json.dumps(rows if model is None else rows[0], indent=2, ensure_ascii=False) + "\n")
        return
    for target, report, promoted in reports:
        _print_report(target, report, promoted)


def _print_report(target: _Target, report: Any, promoted: str | None) -> None:
    from rosetta.store.pins import METRICS
    from rosetta.store.versions import short_id

    experiment, control, treatment = report.experiment, report.arms["control"], report.arms["treatment"]
    out.print(f"[bold]{escape(target.agent)}[/bold] on [bold]{escape(target.model)}[/bold]: experiment "
              f"[bold]{escape(experiment.id)}[/bold], treatment {short_id(treatment.version)} "
              f"({experiment.share:.0%} of users) vs control {short_id(control.version)}")
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, caption=escape("◂ the metric that decides the experiment"),
                  caption_justify="left")
    for column in ("Metric", "Control", "Treatment", "Effect", "Test", "p-value"):
        table.add_column(column, justify="left" if column in ("Metric", "Test") else "right")
    table.add_row("calls", str(control.calls), str(treatment.calls), "", "", "")
    for metric in METRICS:
        result = report.tests.get(metric)
        label = metric + (" ◂" if metric == experiment.metric else "")
        cells = [_value(metric, *control.metrics[metric]), _value(metric, *treatment.metrics[metric])]
        if result is None:
            table.add_row(label, *cells, "", "", "")
            continue
        effect = "" if math.isnan(result.effect) else (
            f"{100 * result.effect:+.1f} pts" if result.test == "z" else f"{result.effect:+.4g}")
        p_value = "-" if result.p_value is None else f"{result.p_value:.3g}"
        table.add_row(label, *cells, effect, "z-test" if result.test == "z" else "Welch t", p_value)
    table.add_row("retries/call", _mean(control.retries_mean), _mean(treatment.retries_mean), "", "", "")
    out.print(table)
    style = "green" if report.decision.promote else "yellow"
    out.print(f"[{style}]{escape(report.decision.reason)}[/{style}]")
    if promoted:
        out.print(f"[green]auto_promote: promoted {short_id(promoted)}[/green]; it is now active and the "
                  "experiment has ended")
    elif report.decision.promote:
        out.print(f"[dim]promote it with `rosetta experiment promote {escape(target.agent)} --model "
                  f"{escape(target.model)}`[/dim]")


def _value(metric: str, samples: int, value: float) -> str:
    from rosetta.store.pins import METRICS

    if not samples:
        return "[dim]-[/dim]"
    shown = f"{100 * value:.1f}%" if METRICS[metric] == "rate" else f"{value:.4g}"
    return f"{shown} [dim](n={samples})[/dim]"


def _mean(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


@experiment_app.command("promote")
@reports_errors
def promote_command(
    ctx: typer.Context,
    agent: AgentArg,
    model: ModelOpt,
    auto: Annotated[bool, typer.Option("--auto", help="Kept for scripts: promoting always checks the "
                                       "experiment's rule now (see --force).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Promote the treatment even when the report says it is "
                                        "worse, or cannot yet tell.")] = False,
    version: Annotated[str | None, typer.Option("--version", help="Make this version active instead (e.g. to "
                                                "roll back); ends any experiment.")] = None,
    log: LogOpt = None,
) -> None:
    """Make the experiment's treatment the active version and end the experiment, if its report says
    the treatment is better (its test passes at alpha with min_samples per arm); --force promotes it
    anyway. --version makes any version active instead (a rollback), ending any experiment."""
    from rosetta.rollout.promotion import promote
    from rosetta.store.versions import short_id

    if (auto or force) and version:
        raise UsageError(Problem("--auto/--force and --version do not mix", field="--version",
                                 hint="--version makes a version active without looking at an experiment"))
    target = _target(ctx, agent, model)
    experiment_id = None
    if version is None:
        report = _experiment_report(target, log)
        if not report.decision.promote and not force:
            out.print(f"[yellow]not promoted[/yellow]: {escape(report.decision.reason)}; nothing changed")
            err.print("[dim]`rosetta experiment report` shows the arms; --force promotes anyway[/dim]")
            raise typer.Exit(1)
        experiment_id = report.experiment.id
        style = "green" if report.decision.promote else "yellow"
        out.print(f"[{style}]{escape(report.decision.reason)}[/{style}]"
                  + ("" if report.decision.promote else " (--force)"))
    rollout = promote(target.artifact, target.out, agent=target.agent, model=target.model, version=version,
                      experiment_id=experiment_id)
    out.print(f"[green]promoted[/green] {short_id(rollout.active)}: now the active version of "
              f"{escape(target.agent)} on {escape(target.model)}; no experiment runs")


@experiment_app.command("stop")
@reports_errors
def stop_command(ctx: typer.Context, agent: AgentArg, model: ModelOpt) -> None:
    """End the running experiment without promoting: everyone gets the active version again."""
    from rosetta.rollout.promotion import stop
    from rosetta.store.versions import short_id

    target = _target(ctx, agent, model)
    ended = stop(target.artifact, target.out, agent=target.agent, model=target.model)
    assert ended.experiment is not None
    serving = ended.experiment.restore or ended.active
    out.print(f"[green]stopped[/green] experiment {escape(ended.experiment.id)}: {short_id(serving)} "
              + ("serves again, as before the experiment" if ended.experiment.restore else "stays the active version")
              + f" of {escape(target.agent)} on {escape(target.model)}")
