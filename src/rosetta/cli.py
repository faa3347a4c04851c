"""The ``rosetta`` command: thin Typer commands over the library.

Exit codes: 0 success, 1 validation found errors, 2 bad input (a file that cannot be loaded, bad
configuration) or bad usage. Errors are printed as ``file:line:col: field: message`` plus a
hint, never as a traceback.
"""

from __future__ import annotations

import functools
import json
import sys
from dataclasses import asdict
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rosetta import cli_flags as cli_optimize_flags
from rosetta.__about__ import __version__
from rosetta.errors import Problem, RosettaError, UsageError

app = typer.Typer(
    name="rosetta",
    help="Compile markdown agent definitions into the best prompt for each LLM.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode="rich",
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

F = TypeVar("F", bound=Callable[..., Any])


def reports_errors(command: F) -> F:
    """Print a :class:`RosettaError` as its problems and exit with its code, never a traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except RosettaError as error:
            print_problems(error)
            raise typer.Exit(error.exit_code) from None

    return wrapper  # type: ignore[return-value]


def print_problems(error: RosettaError, indent: str = "", console: Console = err) -> None:
    for problem in error.problems:
        first, *rest = problem.format().split("\n")
        console.print(f"{indent}[red]error[/red] {escape(first)}")
        for line in rest:
            console.print(f"{indent}[dim]{escape(line)}[/dim]")


class ReportFormat(StrEnum):
    text = "text"
    json = "json"
    sarif = "sarif"


class ListFormat(StrEnum):
    text = "text"
    json = "json"


def _version(value: bool) -> None:
    if value:
        out.print(f"rosetta {__version__}")
        raise typer.Exit()


@app.callback()
def options(
    ctx: typer.Context,
    project: Annotated[
        Path | None,
        typer.Option("--project", "-C", help="Project directory (its pyproject.toml [tool.rosetta] is read).",
                     show_default="current directory"),
    ] = None,
    signatures_dir: Annotated[
        Path | None, typer.Option("--signatures-dir", help="Where agent definitions live (overrides config).")
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """Settings come from [tool.rosetta] in pyproject.toml, ROSETTA_* variables, then these flags."""
    import logging

    from rich.logging import RichHandler

    logging.basicConfig(level=logging.WARNING, format="%(message)s",
                        handlers=[RichHandler(console=err, show_time=False, show_path=False)])
    ctx.obj = {"project": project, "signatures_dir": signatures_dir}


def _settings(ctx: typer.Context) -> Any:
    from rosetta.config import load_settings

    options = ctx.obj or {}
    return load_settings(options.get("project"), signatures_dir=options.get("signatures_dir"))


def _paths_or_default(ctx: typer.Context, paths: list[Path] | None) -> tuple[list[Path], Any]:
    settings = _settings(ctx)
    if paths:
        return paths, settings
    default = settings.signatures_dir
    if not default.is_dir():
        raise UsageError.at(
            "no PATH given and the signatures directory does not exist", file=default,
            hint="pass a file or directory, or set signatures_dir in [tool.rosetta]",
        )
    return [_relative(default)], settings


def _relative(path: Path) -> Path:
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from rosetta.fileio import write_atomic

    write_atomic(output, text)
    err.print(f"[dim]wrote {escape(str(output))}[/dim]")


@app.command()
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
    """Lint agent definitions against the portability criteria PV-001…PV-010.

    Exit code 0: no errors (warnings allowed unless --strict); 1: findings with errors;
    2: a file could not be loaded, or bad usage.
    """
    from rosetta.lint.report import dumps, to_json, to_sarif, validate_paths

    paths, settings = _paths_or_default(ctx, paths)
    report = validate_paths(paths, jobs=jobs, section_roles=settings.section_roles)
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


@app.command("list")
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

    paths, settings = _paths_or_default(ctx, [path] if path else None)
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
    else:
        table = Table(title=f"{len(agents)} agents", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column("Agent", no_wrap=True)
        table.add_column("Format", no_wrap=True)
        table.add_column("Portable", no_wrap=True)
        table.add_column("Body", no_wrap=True)
        table.add_column("Models", overflow="fold", min_width=25)
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


@app.command("compile")
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
    metric: cli_optimize_flags.MetricOpt = None, dataset: cli_optimize_flags.DatasetOpt = None,
    trials: cli_optimize_flags.TrialsOpt = 20, max_calls: cli_optimize_flags.MaxCallsOpt = None,
    max_cost: cli_optimize_flags.MaxCostOpt = None, timeout: cli_optimize_flags.TimeoutOpt = None,
    dry_run: cli_optimize_flags.DryRunOpt = False, seed: cli_optimize_flags.SeedOpt = 0,
    storage: cli_optimize_flags.StorageOpt = None, proposer: cli_optimize_flags.ProposerOpt = None,
    proposals: cli_optimize_flags.ProposalsOpt = 3, optimizer: cli_optimize_flags.OptimizerOpt = "rosetta",
    minibatch: cli_optimize_flags.MinibatchOpt = 10, pruner: cli_optimize_flags.PrunerOpt = "halving",
    pareto: cli_optimize_flags.ParetoOpt = False, baseline: cli_optimize_flags.BaselineOpt = False,
    nearest_demos: cli_optimize_flags.NearestDemosOpt = True,
) -> None:
    """Compile agents into sealed YAML artifacts: compiled/<agent>/<provider>/<model>.yaml.

    Unchanged inputs are not rebuilt (an optimized artifact is kept while its definition, adapter
    and model are unchanged). With --optimize, each agent's prompt variants are searched against
    its labeled examples (datasets/<agent>/) and the best one is written; --jobs then sets how
    many evaluation calls run at once. Exit code 0: everything compiled or up to date;
    1: a target failed, or --check found missing, stale or invalid artifacts; 2: bad usage.
    """
    from rosetta.compile.compiler import CompileOptions, Status, compile_paths
    from rosetta.providers.adapter import load_adapters

    paths, settings = _paths_or_default(ctx, paths)
    if optimize:
        from rosetta.cli_optimize import SearchFlags, optimize_targets
        from rosetta.definition.loader import discover_many

        if not models:
            raise UsageError(Problem("--optimize needs --model: the model whose answers are scored", field="--model"))
        if check:
            raise UsageError(Problem("--check and --optimize do not mix", field="--check"))
        definitions = []
        for file, error in discover_many(paths):
            if error is not None:
                raise error
            definitions.append(file)
        flags = SearchFlags(metric, dataset, trials, max_calls, max_cost, timeout, dry_run, seed, storage, proposer,
                            proposals, optimizer, minibatch, pruner, pareto, baseline, jobs or 1, force,
                            nearest_demos)
        raise typer.Exit(optimize_targets(ctx, definitions, list(models), flags))
    options = CompileOptions(
        out=(out_dir or settings.compiled_dir).resolve(),
        root=settings.root,
        adapters=load_adapters([*settings.adapter_dirs, *(adapters or [])]),
        models=tuple(models or ()),
        default_models=tuple(settings.default_models),
        section_roles=dict(settings.section_roles),
        force=force,
        check=check,
    )
    with err.status("compiling…") if not check else _nothing():
        report = compile_paths(paths, options, jobs=jobs)
    styles = {Status.WRITTEN: "green", Status.UP_TO_DATE: "dim", Status.FAILED: "red", Status.MISSING: "red",
              Status.STALE: "red", Status.INVALID: "red"}
    for result in report.results:
        if result.status is Status.UP_TO_DATE and not check:
            continue
        style = styles[result.status]
        target = _relative(Path(result.artifact)) if result.artifact else result.source
        label = f"{result.agent or result.source} → {result.model}" if result.model else (result.agent or result.source)
        out.print(f"[{style}]{result.status.value:<10}[/{style}] {escape(label)}  [dim]{escape(str(target))}[/dim]")
        for line in result.message.splitlines():
            out.print(f"           [dim]{escape(line)}[/dim]")
        for warning in result.warnings:
            out.print(f"           [yellow]warning:[/yellow] {escape(warning)}")
    counts = ", ".join(f"{report.count(s)} {s.value}" for s in Status if report.count(s))
    out.print(f"[{'red' if report.exit_code() else 'green'}]{len(report.results)} targets: {counts or 'none'}[/]")
    raise typer.Exit(report.exit_code())


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


class RenderFormat(StrEnum):
    text = "text"
    json = "json"
    yaml = "yaml"


def _parse_inputs(pairs: list[str]) -> dict[str, str]:
    values = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError.at(f"--input {pair!r} is not NAME=VALUE", hint="e.g. --input report='SQLi in login'")
        if value.startswith("@"):
            try:
                value = Path(value[1:]).read_text(encoding="utf-8")
            except OSError as exc:
                raise UsageError.at(f"cannot read {value[1:]}: {exc.strerror}", file=value[1:]) from None
        values[name] = value
    return values


@app.command()
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

    settings = _settings(ctx)
    values = _parse_inputs(inputs or [])
    definition = load_definition(path, section_roles=settings.section_roles)
    prompt = render_prompt(lower(definition), model, adapters=load_adapters([*settings.adapter_dirs, *(adapters or [])]))
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


def _load_agent(ctx: typer.Context, agent: str) -> Any:
    from rosetta.runtime.agent import load

    options = ctx.obj or {}
    return load(agent, project=options.get("project"), signatures_dir=options.get("signatures_dir"))


@app.command()
@reports_errors
def run(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(help="Agent name or definition path.")],
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model (default: the first preference).")]
    = None,
    inputs: Annotated[
        list[str] | None, typer.Option("--input", "-i", help="An input: NAME=VALUE or NAME=@file.")
    ] = None,
    fallbacks: Annotated[
        list[str] | None, typer.Option("--fallback", help="Model to try next (repeatable; default: preferences).")
    ] = None,
    manual: Annotated[bool, typer.Option("--manual", help="Copy/paste mode: write the prompt, read the answer.")]
    = False,
    prompt_file: Annotated[Path, typer.Option("--prompt-file", help="Where --manual writes the prompt.")]
    = Path("rosetta-prompt.txt"),
    answer_file: Annotated[Path | None, typer.Option("--answer-file", help="--manual: read the answer here "
                                                     "instead of standard input.")] = None,
    record_dir: Annotated[Path | None, typer.Option("--record-dir", help="Write the prompt, raw answer and "
                                                    "conversation JSON of the call here.")] = None,
) -> None:
    """Run an agent once and print its answer (JSON for structured agents) and how it was obtained.

    `--model manual` (or `--manual`) writes the prompt for a person to paste into any chat and
    reads the answer back.
    """
    loaded = _load_agent(ctx, agent)
    values = _parse_inputs(inputs or [])
    if model == "manual":
        manual, model = True, (fallbacks or [None])[0]
    if manual:
        err.print(f"prompt written to {escape(str(prompt_file))}; paste it into any chat, then give the answer"
                  + (f" in {escape(str(answer_file))}" if answer_file else " on standard input (end with Ctrl-D)"))
        result = loaded.run_manual(values, prompt_file=prompt_file, answer_file=answer_file, model=model)
    else:
        with err.status(f"running {loaded.name}…"):
            result = loaded.run(values, model, fallbacks=fallbacks, record_dir=record_dir)
    answer = result.data if not isinstance(result.data, str) else None
    sys.stdout.write((json.dumps(answer, indent=2, ensure_ascii=False) if answer is not None else result.raw) + "\n")
    tries = escape("[" + ", ".join(f"{a.model}:{a.outcome}" for a in result.attempts) + "]")
    err.print(f"[dim]{escape(result.model)} · {len(result.attempts)} attempt(s) {tries} · "
              f"{result.usage.get('total_tokens', 0)} tokens · {result.latency_s:.2f}s[/dim]")
    if not result.valid:
        err.print("[yellow]warning[/yellow] the answer does not validate: "
                  + escape("; ".join(f"{i.path}: {i.message}" for i in result.issues)))
        raise typer.Exit(1)


@app.command()
@reports_errors
def show(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(help="Agent name or definition path.")],
    model: Annotated[str, typer.Option("--model", "-m", help="Model name or alias.")],
    prompt: Annotated[bool, typer.Option("--prompt", help="Also print the selected prompt.")] = False,
) -> None:
    """Show which artifact (or fallback) the runtime would use for a model, and why."""
    loaded = _load_agent(ctx, agent)
    selection = loaded.explain(model, strict=False)
    style = "green" if selection.kind == "artifact" else "yellow"
    out.print(f"[bold]{escape(loaded.name)}[/bold] on [bold]{escape(selection.model)}[/bold]: "
              f"[{style}]{selection.kind}[/{style}]")
    if selection.artifact:
        out.print(f"  artifact: {escape(str(_relative(Path(selection.artifact))))}")
    out.print(f"  why: {escape(selection.reason)}")
    if loaded.artifacts:
        out.print("  compiled for: " + escape(", ".join(sorted(loaded.artifacts))))
    if prompt:
        sys.stdout.write(selection.prompt.render_for_display())


@app.command()
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
    loaded = _load_agent(ctx, agent)
    first, second = (loaded.explain(m, strict=False) for m in models)
    lines = difflib.unified_diff(
        first.prompt.render_for_display().splitlines(keepends=True),
        second.prompt.render_for_display().splitlines(keepends=True),
        fromfile=f"{first.model} ({first.kind})", tofile=f"{second.model} ({second.kind})",
    )
    sys.stdout.writelines(lines)


KNOWN_BAD_LITELLM = {"1.82.7", "1.82.8"}
"""litellm releases that were malicious uploads."""


@app.command()
@reports_errors
def doctor() -> None:
    """Check the environment: provider credentials (never printed), local model, litellm version."""
    import importlib.metadata
    import importlib.util

    from rosetta.providers.catalog import load_catalog
    from rosetta.providers.litellm_offline import import_litellm

    litellm = import_litellm()
    table = Table(title="providers", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("Provider", "Example model", "Credentials"):
        table.add_column(column)
    seen: set[str] = set()
    for model in load_catalog().models:
        if model.provider in seen or model.provider == "local":
            continue
        seen.add(model.provider)
        try:
            check = litellm.validate_environment(model=model.id)
        except Exception as exc:  # an odd provider must not break the report
            check = {"keys_in_environment": False, "missing_keys": [type(exc).__name__]}
        missing = check.get("missing_keys") or []
        status = "[green]set[/green]" if check.get("keys_in_environment") else (
            f"[yellow]missing {escape(', '.join(missing))}[/yellow]" if missing else "[dim]none needed[/dim]")
        table.add_row(model.provider, model.id, status)
    out.print(table)
    local = importlib.util.find_spec("llama_cpp") is not None
    out.print(f"local model runtime (llama-cpp-python): {'[green]installed[/green]' if local else '[yellow]not installed[/yellow] (local/ models unavailable)'}")
    from rosetta.errors import RosettaError
    from rosetta.providers.local_weights import catalog_models, resolve

    for model in catalog_models():  # assembles the weights into the cache on first use, then checks them
        try:
            out.print(f"  {model.id}: [green]weights ok[/green] (sha256 pinned) {escape(str(resolve(model.id).path))}")
        except RosettaError as exc:
            out.print(f"  {model.id}: [yellow]weights unavailable[/yellow] {escape(str(exc))}")
    version = importlib.metadata.version("litellm")
    bad = version in KNOWN_BAD_LITELLM
    out.print(f"litellm {version}: " + ("[red]KNOWN-BAD RELEASE — reinstall from the lock file[/red]" if bad
                                        else "[green]ok[/green]"))
    if bad:
        raise typer.Exit(1)


@app.command()
@reports_errors
def models(
    format: Annotated[ListFormat, typer.Option("--format", "-f", help="Output format.")] = ListFormat.text,
) -> None:
    """List the model catalog: canonical ids, aliases, adapter, class, limits and capabilities."""
    from rosetta.providers.catalog import load_catalog

    catalog = load_catalog()
    if format is ListFormat.json:
        rows = []
        for m in catalog.models:
            row = asdict(m)
            row["class"] = row.pop("model_class")
            row.pop("known")
            rows.append(row)
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    table = Table(title=f"{len(catalog.models)} models", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("Model", "Aliases", "Adapter", "Class", "Context", "Capabilities"):
        table.add_column(column, overflow="fold")
    for m in catalog.models:
        flags = [name for name, on in asdict(m.capabilities).items() if on]
        table.add_row(escape(m.id), escape(", ".join(m.aliases)), m.adapter, m.model_class,
                      f"{m.context_window:,}", ", ".join(flags))
    out.print(table)


@app.command()
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


from rosetta import cli_optimize as _cli_optimize  # noqa: E402,F401  (registers optimize and evaluate)
from rosetta import cli_verify as _cli_verify  # noqa: E402,F401  (registers verify)
from rosetta import cli_rollout as _cli_rollout  # noqa: E402,F401  (registers versions and experiment)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
