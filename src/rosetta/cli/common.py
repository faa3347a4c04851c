"""What several ``rosetta`` commands share: the consoles, error reporting, settings and agents
from the global options, and the default PATH."""

from __future__ import annotations

import functools
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from rosetta.errors import RosettaError, UsageError

out = Console(highlight=False, soft_wrap=True)
"""Standard output: results."""
err = Console(stderr=True, highlight=False, soft_wrap=True)
"""Standard error: problems, warnings, progress."""

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
    """Each problem of ``error`` as ``error file:line:col: field: message`` plus its dimmed hint."""
    for problem in error.problems:
        first, *rest = problem.format().split("\n")
        console.print(f"{indent}[red]error[/red] {escape(first)}")
        for line in rest:
            console.print(f"{indent}[dim]{escape(line)}[/dim]")


class ListFormat(StrEnum):
    text = "text"
    json = "json"


def project_settings(ctx: typer.Context) -> Any:
    """The project's settings: [tool.rosetta], ROSETTA_* variables, then the global options."""
    from rosetta.settings import load_settings

    options = ctx.obj or {}
    return load_settings(options.get("project"), signatures_dir=options.get("signatures_dir"))


def load_agent(ctx: typer.Context, agent: str) -> Any:
    """The runtime's agent (a name or a definition path) in the project the global options name."""
    from rosetta.runtime.agent import load

    options = ctx.obj or {}
    return load(agent, project=options.get("project"), signatures_dir=options.get("signatures_dir"))


def paths_or_default(ctx: typer.Context, paths: list[Path] | None) -> tuple[list[Path], Any]:
    """``paths``, or else the configured signatures directory; with the settings."""
    found = project_settings(ctx)
    if paths:
        return paths, found
    default = found.signatures_dir
    if not default.is_dir():
        raise UsageError.at(
            "no PATH given and the signatures directory does not exist", file=default,
            hint="pass a file or directory, or set signatures_dir in [tool.rosetta]",
        )
    return [relative(default)], found


def fits_table(width: int, console: Console = out) -> bool:
    """Whether ``console`` is wide enough for a table that needs ``width`` columns (a pipe is 80
    unless ``COLUMNS`` says otherwise); narrower, commands print one record per row, so that no
    word or model id is split across lines."""
    return console.width >= width


def print_record(heading: str, fields: list[tuple[str, str]], console: Console = out) -> None:
    """One row of a table as a block: ``heading`` (Rich markup, its own line), then each field as
    ``  label: value`` wrapped to the console's width under a hanging indent, breaking at spaces
    only (never inside a model id, even at its hyphens); empty values are left out. Values are
    plain text."""
    import textwrap

    console.print(heading, soft_wrap=True)
    for label, value in fields:
        if value:
            text = textwrap.fill(value, width=max(console.width, 40), initial_indent=f"  {label}: ",
                                 subsequent_indent="    ", break_long_words=False, break_on_hyphens=False)
            console.print(escape(text), soft_wrap=True)


def print_note(text: str, style: str = "dim", console: Console = out) -> None:
    """A line of plain text under a table, wrapped at spaces to the console's width (a hanging
    indent for its continuation), in ``style``."""
    import textwrap

    wrapped = textwrap.fill(text, max(console.width, 40), subsequent_indent="  ", break_on_hyphens=False)
    console.print(f"[{style}]{escape(wrapped)}[/{style}]" if style else escape(wrapped), soft_wrap=True)


def relative(path: Path) -> Path:
    """``path`` relative to the working directory where it lies under it, else as given."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def parse_inputs(pairs: list[str]) -> dict[str, str]:
    """``--input NAME=VALUE`` (or ``NAME=@file``, the file's text) as a dict."""
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
