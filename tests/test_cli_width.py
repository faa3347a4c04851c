"""Issue 59: what a newcomer reads at 80 columns (and in a pipe, which is 80 columns) and at 160.
Tables pick a layout that fits; no line of ``models``, ``list`` or ``trials`` is wider than the
terminal; a model id is never split across lines; help text flows to the width; and text in
brackets (``[tool.rosetta.models]``) is never swallowed as markup, in help or in table titles."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer
from conftest import REPO

from rosetta.providers.catalog import load_catalog

WIDTHS = (80, 160)
IDS = {name for model in load_catalog().models for name in (model.id, *model.aliases) if "/" in name}


def _lines(text: str) -> list[str]:
    return text.rstrip("\n").split("\n")


def _assert_fits(text: str, width: int, what: str) -> None:
    long = [line for line in _lines(text) if len(line.rstrip()) > width]
    assert not long, f"{what} at {width} columns has {len(long)} longer line(s), e.g. {long[0]!r}"
    for line, following in zip(_lines(text), _lines(text)[1:], strict=False):
        words = line.split()
        nexts = following.split()
        if not words or not nexts:
            continue
        joined = words[-1].rstrip(",") + nexts[0]
        broken = [model_id for model_id in IDS if joined.startswith(model_id) and words[-1].rstrip(",") != model_id
                  and model_id.startswith(words[-1].rstrip(","))]
        assert not broken, f"{what} at {width} columns splits {broken[0]!r}:\n{line}\n{following}"


@pytest.fixture(params=WIDTHS)
def width(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setenv("COLUMNS", str(request.param))
    return int(request.param)


def test_models_and_list_fit_the_terminal_and_never_split_a_model_id(cli, width: int, monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    models = cli("models")
    assert models.exit_code == 0
    _assert_fits(models.stdout, width, "rosetta models")
    assert all(model_id in models.stdout for model_id in IDS if not model_id.startswith("local/"))
    listed = cli("list")
    assert listed.exit_code == 0
    _assert_fits(listed.stdout, width, "rosetta list")
    assert "anthropic/claude-sonnet-5-5" in listed.stdout


def test_doctor_and_versions_fit_and_keep_bracketed_names(cli, width: int, project, monkeypatch) -> None:
    (project / "pyproject.toml").write_text(
        "[tool.rosetta.models]\n'openai/house-model' = {api_base = 'http://127.0.0.1:9/v1', adapter = 'openai'}\n")
    monkeypatch.chdir(project)
    doctor = cli("doctor")
    assert "declared endpoints ([tool.rosetta.models])" in " ".join(doctor.stdout.split()), doctor.stdout
    monkeypatch.chdir(REPO)
    versions = cli("versions", "vuln-triage", "--model", "openai/gpt-5.6")
    assert versions.exit_code == 0, versions.output
    _assert_fits(versions.stdout, width, "rosetta versions")


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [prefix]
    for name, command in sorted(group.commands.items()):
        if hasattr(command, "commands"):  # a group (typer's click, vendored or not)
            found += _commands(command, (*prefix, name))
        else:
            found.append((*prefix, name))
    return found


def _help_texts(command: Any) -> list[str]:
    texts = [command.help or ""]
    texts += [getattr(param, "help", None) or "" for param in command.params]
    if hasattr(command, "commands"):
        texts += [sub.help or "" for sub in command.commands.values()]
    return texts


def test_every_help_keeps_its_bracketed_text_and_flows_to_the_width(cli, width: int) -> None:
    from rosetta.cli import app

    root = typer.main.get_command(app)
    for path in _commands(root):
        command: Any = root
        for name in path:
            command = command.commands[name]
        result = cli(*path, "--help")
        assert result.exit_code == 0, (path, result.output)
        flowed = " ".join(result.stdout.split())
        for text in _help_texts(command):
            for bracketed in re.findall(r"\[[A-Za-z_][\w.-]*\]", text):
                assert bracketed in flowed, f"`rosetta {' '.join(path)} --help` lost {bracketed!r}"
        _assert_fits(result.stdout, width, f"rosetta {' '.join(path)} --help")
        ragged = [line for line in _lines(result.stdout) if line.strip() and len(line) < width // 3
                  and line.startswith(" " * 20) and line.rstrip()[-1:] == ","]
        assert not ragged, f"`rosetta {' '.join(path)} --help` has hard-wrapped lines: {ragged[:2]}"


def test_compile_help_is_short_enough_to_read_at_80_columns(cli, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    lines = _lines(cli("compile", "--help").stdout)
    assert len(lines) < 120, f"`rosetta compile --help` is {len(lines)} lines at 80 columns"
    assert min(len(line) for line in lines if line.startswith("  -")) > 0


def test_search_progress_never_shows_none_candidates() -> None:
    from rosetta.cli.optimize_targets import _candidates

    assert _candidates(0, None) == "candidates not chosen yet" and _candidates(0, 0) == "candidates not chosen yet"
    assert _candidates(3, 25) == "3/25 candidates"


def test_every_table_title_and_caption_is_escaped() -> None:
    """A title is Rich markup: unescaped, ``[tool.rosetta.models]`` (or an id in brackets) vanishes.
    Every title and caption a command builds is a call to ``escape``, whatever it holds."""
    import ast

    unescaped = []
    for path in sorted((REPO / "src" / "rosetta" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Table":
                for keyword in node.keywords:
                    value = keyword.value
                    escaped = isinstance(value, ast.Call) and getattr(value.func, "id", None) == "escape"
                    if keyword.arg in ("title", "caption") and not escaped:
                        unescaped.append(f"{path.name}:{node.lineno} {keyword.arg}")
    assert not unescaped, f"table titles not escaped: {unescaped}"
