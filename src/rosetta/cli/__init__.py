"""The ``rosetta`` command: thin Typer commands over the library.

Exit codes: 0 success, 1 validation found errors, 2 bad input (a file that cannot be loaded, bad
configuration) or bad usage. Errors are printed as ``file:line:col: field: message`` plus a
hint, never as a traceback.

One module per group of commands, registered below in the order ``rosetta --help`` lists them:

- :mod:`~rosetta.cli.definitions`: validate, list, schema
- :mod:`~rosetta.cli.build`: compile
- :mod:`~rosetta.cli.prompts`: render, show, diff, models
- :mod:`~rosetta.cli.run`: run
- :mod:`~rosetta.cli.doctor`: doctor
- :mod:`~rosetta.cli.optimize`: optimize, evaluate
- :mod:`~rosetta.cli.trials`: trials
- :mod:`~rosetta.cli.verify`: verify
- :mod:`~rosetta.cli.rollout`: versions, experiment start|report|promote|stop
- :mod:`~rosetta.cli.export`: export promptfoo

and two shared ones that register nothing: :mod:`~rosetta.cli.common` (consoles, error reporting,
settings, agents) and :mod:`~rosetta.cli.optimize_targets` (the prompt search behind ``optimize`` and
``compile --optimize``).
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Annotated

import typer

from rosetta.__about__ import __version__
from rosetta.cli import (
    build,
    definitions,
    doctor,
    export,
    optimize,
    prompts,
    rollout,
    run,
    trials,
    verify,
)
from rosetta.cli.common import err, out

app = typer.Typer(
    name="rosetta",
    context_settings={"max_content_width": 200},  # help flows to the terminal's width (click stops at 80)
    help="Compile markdown agent definitions into the best prompt for each LLM.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)


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


app.command()(definitions.validate)
app.command("list")(definitions.list_agents)
app.command("compile")(build.compile_command)
app.command()(prompts.render)
app.command()(run.run)
app.command()(prompts.show)
app.command()(prompts.diff)
app.command()(doctor.doctor)
app.command()(prompts.models)
app.command()(definitions.schema)
app.command("optimize")(optimize.optimize_command)
app.command("evaluate")(optimize.evaluate_command)
app.command("trials")(trials.trials)
app.command("verify")(verify.verify_command)
app.command("versions")(rollout.versions_command)
app.add_typer(rollout.experiment_app, name="experiment")
app.add_typer(export.export_app, name="export")


def _first_sentence(doc: str | None) -> str | None:
    """A command's line in ``rosetta --help``: the first sentence of its help, whole (click would cut
    it at 45 characters)."""
    if not doc:
        return None
    text = " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())
    match = re.search(r"(?<=\.)\s", text)
    return (text[:match.start()] if match else text).rstrip(".") + "."


for _command in (*app.registered_commands, *rollout.experiment_app.registered_commands):
    _command.short_help = _command.short_help or _first_sentence(_command.help or _command.callback.__doc__)
for _group in app.registered_groups:
    _group.short_help = _group.short_help or _first_sentence(_group.typer_instance.info.help)


def main() -> None:
    """Console-script entry point."""
    app()
