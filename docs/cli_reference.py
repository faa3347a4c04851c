"""Write docs/reference/cli.md: every `rosetta` command's help, as the command prints it (Typer's
click commands, plain text at 100 columns). tests/test_docs.py fails when the page is not current:
run `python docs/cli_reference.py` after changing a command."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

PAGE = Path(__file__).resolve().parent / "reference" / "cli.md"


def reference() -> str:
    import typer

    from rosetta.cli import app

    root = typer.main.get_command(app)
    parts = ["# Command line", "", "Every `rosetta` command with its options, as `--help` prints them.", ""]

    def walk(command: Any, path: list[str]) -> None:
        """``command``'s help (Typer's own click types: a command, or a group of them), then its subcommands'."""
        ctx = command.context_class(command, info_name=" ".join(path), terminal_width=100, max_content_width=100)
        text = command.get_help(ctx)
        parts.extend([f"## `{' '.join(path)}`", "", "```text", text.rstrip(), "```", ""])
        if hasattr(command, "list_commands"):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, [*path, name])

    walk(root, ["rosetta"])
    return "\n".join(parts)


if __name__ == "__main__":
    PAGE.write_text(reference(), encoding="utf-8")
    sys.stdout.write(f"wrote {PAGE}\n")
