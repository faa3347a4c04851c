"""``rosetta compile``: build the sealed YAML artifacts, or with ``--optimize`` hand the search to
:func:`rosetta.cli.optimize_targets.optimize_paths`."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from rosetta.cli.common import err, out, paths_or_default, relative, reports_errors
from rosetta.cli.optimize_targets import (
    ActivateOpt,
    BaselineOpt,
    DatasetOpt,
    DryRunOpt,
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
    optimize_paths,
)


@reports_errors
def compile_command(
    ctx: typer.Context,
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Agent files or directories.", show_default="the configured signatures directory"),
    ] = None,
    models: Annotated[
        list[str] | None,
        typer.Option("--model", "-m", help="Target model (repeatable).",
                     show_default="each agent's model_preferences, else default_models"),
    ] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", "-o", help="Output directory.",
                                                 show_default="compiled_dir")] = None,
    check: Annotated[bool, typer.Option("--check", help="Write nothing; exit 1 if anything is missing or stale.")]
    = False,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even up-to-date artifacts.")] = False,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", min=1, help="Worker processes.",
                                             show_default="CPUs")] = None,
    adapters: Annotated[
        list[Path] | None, typer.Option("--adapters", help="Extra adapter directory (repeatable).")
    ] = None,
    optimize: Annotated[bool, typer.Option("--optimize", help="Search prompt variants against the agents' labeled "
                                           "examples (optuna) and write the best; needs --model.")] = False,
    # The search options of --optimize: declared here for the command line, read back from ctx.params
    # by SearchFlags.from_params, so they are not named again below.
    metric: MetricOpt = None, dataset: DatasetOpt = None, trials: TrialsOpt = None, max_calls: MaxCallsOpt = None,
    max_cost: MaxCostOpt = None, timeout: TimeoutOpt = None, dry_run: DryRunOpt = False, seed: SeedOpt = 0,
    storage: StorageOpt = None, proposer: ProposerOpt = None, proposals: ProposalsOpt = 3,
    optimizer: OptimizerOpt = "rosetta", pruner: PrunerOpt = "halving",
    pareto: ParetoOpt = False, baseline: BaselineOpt = False, nearest_demos: NearestDemosOpt = True,
    repeats: RepeatsOpt = 1, activate: ActivateOpt = False,
) -> None:
    """Compile agents into sealed YAML artifacts: compiled/<agent>/<provider>/<model>.yaml.

    Unchanged inputs are not rebuilt (an optimized artifact is kept while its definition, adapter
    and model are unchanged). With --optimize, each agent's prompt variants are searched against
    its labeled examples (datasets/<agent>/) and the best one is written; --jobs then sets how
    many evaluation calls run at once. Exit code 0: everything compiled or up to date;
    1: a target failed, or --check found missing, stale, invalid or orphaned artifacts; 2: bad usage.
    """
    from rosetta.compile.compiler import CompileOptions, compile_paths

    paths, settings = paths_or_default(ctx, paths)
    if optimize:
        flags = SearchFlags.from_params(ctx.params, jobs=jobs or 1)
        raise typer.Exit(optimize_paths(ctx, paths, models, flags, check=check, out=out_dir))
    options = CompileOptions.for_settings(settings, adapter_dirs=adapters or (),
                                          out=(out_dir or settings.compiled_dir).resolve(),
                                          models=tuple(models or ()), force=force, check=check)
    with err.status("compiling…") if not check else nullcontext():
        report = compile_paths(paths, options, jobs=jobs)
    _print_report(report, check=check)
    raise typer.Exit(report.exit_code())


def _print_report(report: Any, *, check: bool) -> None:
    from rosetta.compile.compiler import Status

    styles = {Status.WRITTEN: "green", Status.UP_TO_DATE: "dim", Status.FAILED: "red", Status.MISSING: "red",
              Status.STALE: "red", Status.INVALID: "red", Status.ORPHAN: "red"}
    for result in report.results:
        if result.status is Status.UP_TO_DATE and not check:
            continue
        style = styles[result.status]
        target = relative(Path(result.artifact)) if result.artifact else result.source
        label = f"{result.agent or result.source} → {result.model}" if result.model else (result.agent or result.source)
        out.print(f"[{style}]{result.status.value:<10}[/{style}] {escape(label)}  [dim]{escape(str(target))}[/dim]")
        for line in result.message.splitlines():
            out.print(f"           [dim]{escape(line)}[/dim]")
        for warning in result.warnings:
            out.print(f"           [yellow]warning:[/yellow] {escape(warning)}")
    counts = ", ".join(f"{report.count(s)} {s.value}" for s in Status if report.count(s))
    out.print(f"[{'red' if report.exit_code() else 'green'}]{len(report.results)} targets: {counts or 'none'}[/]")
