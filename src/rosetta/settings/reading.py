"""Reading settings from their sources: the ``[tool.rosetta]`` table of the nearest ``pyproject.toml``,
``ROSETTA_*`` environment variables and arguments, each value parsed, or refused by an error that
names where it came from (the argument, ``$ROSETTA_<KEY>``, or its line) and never quotes a value
the environment set, which may be a secret.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rosetta.definition.vocabulary import RCCFRole
from rosetta.errors import ConfigError, Location, Problem
from rosetta.settings.model import ENV_PREFIX, JSON_EXAMPLES, KEYS, PROJECT

log = logging.getLogger("rosetta.settings")  # the package's logger: one of those whose records are redacted

TRUE, FALSE = ("1", "true", "yes", "on", "y", "t"), ("0", "false", "no", "off", "n", "f")


class Reader:
    """Each setting's value from the first source that has it, parsed, or a located error."""

    def __init__(self, table: dict[str, Any], overrides: dict[str, Any], pyproject: Path | None, text: str) -> None:
        self.tool, self.overrides, self.pyproject, self.text = table, overrides, pyproject, text

    def source(self, key: str) -> str | None:
        """Where ``key``'s value comes from: the argument, the environment (the user's choices), the
        project's ``[tool.rosetta]`` (:data:`PROJECT`), or None for the default."""
        if key in self.overrides:
            return "argument"
        if ENV_PREFIX + key.upper() in os.environ:
            return "environment"
        return PROJECT if key in self.tool else None

    def confined(self, key: str, path: Path, root: Path) -> Path:
        """``path`` when it resolves (symlinks followed) inside the project; a located error
        otherwise: a folder the project names, or a default a planted symlink redirects, is the
        project's to choose only inside itself (the user chooses others through the environment)."""
        real, inside = path.resolve(), root.resolve()
        if real == inside or real.is_relative_to(inside):
            return path
        variable = f"{ENV_PREFIX}{key.upper()}"
        named = f"{key} {path} resolves to {real}" if self.source(key) == PROJECT \
            else f"the default {key} {path} is a symlink to {real}"
        location = Location(str(self.pyproject), _line_of(self.text, key)) \
            if self.pyproject is not None and self.source(key) == PROJECT else Location(str(path))
        raise ConfigError(Problem(
            f"{named}, outside the project {inside}: a project names folders only inside itself", location, key,
            expected="a folder inside the project",
            hint=f"move it inside the project, or choose it yourself with ${variable} (or the command's option)"))

    def value(self, key: str, parse: Callable[[Any, str], Any], default: Any) -> Any:
        variable = ENV_PREFIX + key.upper()
        if key in self.overrides:
            raw, source = self.overrides[key], "argument"
        elif variable in os.environ:
            raw, source = os.environ[variable], "environment"
        elif key in self.tool:
            raw, source = self.tool[key], PROJECT
        else:
            return default
        try:
            return parse(raw, key)
        except ValueError as error:
            raise self._error(key, source, _unquoted(str(error), raw, source)) from None

    def table(self, key: str, parse: Callable[[Any, str], Any]) -> dict[str, Any]:
        """A table-valued setting: ``[tool.rosetta.<key>]``, with ``$ROSETTA_<KEY>`` (a JSON object)
        deep-merged over it, then an argument's mapping over both; each entry parsed."""
        merged, sources = self._merged(key)
        parsed = {}
        for entry, value in merged.items():
            try:
                parsed[str(entry)] = parse(value, str(entry))
            except ValueError as error:
                raise self._error(key, sources[entry], _unquoted(str(error), value, sources[entry]), entry) from None
        return parsed

    def whole(self, key: str, parse: Callable[[dict[str, Any]], Any]) -> Any:
        """A table-valued setting parsed as one (its keys are fields, not entries)."""
        merged, sources = self._merged(key)
        try:
            return parse(merged)
        except ValueError as error:
            source = "environment" if "environment" in sources.values() else PROJECT
            raise self._error(key, source, _unquoted(str(error), merged, source)) from None

    def _merged(self, key: str) -> tuple[dict[str, Any], dict[str, str]]:
        merged: dict[str, Any] = {}
        sources: dict[str, str] = {}
        layers = [(PROJECT, self.tool.get(key)), ("environment", _env_json(key)),
                  ("argument", self.overrides.get(key))]
        for source, layer in layers:
            if layer is None:
                continue
            if not isinstance(layer, Mapping):
                raise self._error(key, source, f"{key} must be a table, not {type(layer).__name__}")
            merged = _merge(merged, dict(layer))
            sources.update(dict.fromkeys(layer, source))
        return merged, sources

    def _error(self, key: str, source: str, message: str, entry: str | None = None) -> ConfigError:
        if source == "environment" and key in JSON_EXAMPLES:
            return env_json_error(key, f"does not fit: {message}")
        if source == "environment":
            location = Location(f"${ENV_PREFIX}{key.upper()}")
        elif source == PROJECT and self.pyproject is not None:
            location = Location(str(self.pyproject), _line_of(self.text, entry if entry is not None else key))
        else:
            location = Location()
        return ConfigError(Problem(f"{message} (from {source})", location, key if entry is None else f"{key}.{entry}"))


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start``."""
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def read_tool_table(pyproject: Path, text: str | None = None) -> dict[str, Any]:
    """The ``[tool.rosetta]`` table; a TOML syntax error or an unknown key is a :class:`ConfigError`."""
    text = pyproject.read_text(encoding="utf-8") if text is None else text
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+), column (\d+)", str(exc))
        line, column = (int(match.group(1)), int(match.group(2))) if match else (None, None)
        raise ConfigError.at(f"invalid TOML: {exc}", file=pyproject, line=line, column=column) from None
    tool = data.get("tool", {})
    table = tool.get("rosetta", {}) if isinstance(tool, dict) else {}
    if not isinstance(table, dict):
        raise ConfigError.at("[tool.rosetta] must be a table", file=pyproject, line=_line_of(text, "rosetta"))
    problems = []
    settable = [key for key in KEYS if key != "root"]  # the root is where this file is
    for key in table:
        where = Location(str(pyproject), _line_of(text, key))
        if key == "root":
            problems.append(Problem("the project root cannot be set in [tool.rosetta]: it is the folder of this "
                                    "pyproject.toml", where, "tool.rosetta.root",
                                    hint="remove it; to work on another project, pass --project/-C or set "
                                         "$ROSETTA_ROOT"))
        elif key not in KEYS:
            close = difflib.get_close_matches(key, settable, n=1)
            problems.append(Problem(f"unknown setting {key!r} in [tool.rosetta]", where, f"tool.rosetta.{key}",
                                    hint=f"did you mean {close[0]!r}?" if close else
                                    f"known settings: {', '.join(settable)}"))
    if problems:
        raise ConfigError(problems)
    return table


def env_json_error(key: str, message: str, line: int | None = None, column: int | None = None) -> ConfigError:
    """A table-valued ``ROSETTA_<KEY>`` variable that does not parse or does not fit: named, with
    what it must hold (its value is never quoted)."""
    variable = ENV_PREFIX + key.upper()
    return ConfigError(Problem(f"${variable} {message}", Location(f"${variable}", line, column), key,
                               f"a JSON object, merged over [tool.rosetta.{key}]",
                               f"fix it or unset it; e.g. export {variable}='{JSON_EXAMPLES.get(key, '{}')}'"))


# -- parsing one value ---------------------------------------------------------------------------

def parse_path(value: Any) -> Path:
    """A path as written (``~`` expanded), not yet resolved against the project root."""
    if isinstance(value, str | os.PathLike) and str(value).strip():
        return Path(value).expanduser()
    raise ValueError(f"expected a path, not {value!r}")


def absolute(path: Path, root: Path) -> Path:
    """``path`` against the project root, not the working directory, so rosetta behaves the same from any folder."""
    return path if path.is_absolute() else root / path


def parse_texts(value: Any, key: str) -> list[Any]:
    """A list: given as one, or as text holding a JSON list or comma-separated items (how a
    ``ROSETTA_<KEY>`` variable writes it)."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{key} is not a valid JSON list: {exc.msg}") from None
        else:
            return [part.strip() for part in text.split(",") if part.strip()]
    if isinstance(value, list | tuple) and all(isinstance(item, str | os.PathLike) for item in value):
        return list(value)
    raise ValueError(f"{key} must be a list of strings, not {value!r}")


def parse_flag(value: Any, key: str) -> bool:
    """A boolean, or the words a ``ROSETTA_<KEY>`` variable writes one with (``1``, ``yes``, ``off``...)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in TRUE + FALSE:
        return value.strip().lower() in TRUE
    raise ValueError(f"{key} must be true or false, not {value!r}")


def parse_positive_int(value: Any, key: str) -> int | None:
    """A count above zero; an empty variable means unset (None)."""
    if isinstance(value, str) and not value.strip():
        return None
    try:
        number = int(value) if not isinstance(value, bool | float) else 0
    except (TypeError, ValueError):
        number = 0
    if number <= 0:
        raise ValueError(f"{key} must be a positive integer, not {value!r}")
    return number


def parse_role(value: Any, heading: str) -> RCCFRole:
    """The RCCF role a ``section_roles`` heading maps to, or an error listing the roles."""
    try:
        return RCCFRole(value)
    except ValueError:
        raise ValueError(f"section_roles: {heading!r} maps to {value!r}, which is no RCCF role (expected one of "
                         f"{', '.join(r.value for r in RCCFRole)})") from None


def parse_mapping(value: Any, key: str) -> dict[str, Any]:
    """A table (one ``rate_limits`` entry) as a dict, for the entry's own checks."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{key} must be a table, not {type(value).__name__}")
    return dict(value)


def _env_json(key: str) -> dict[str, Any] | None:
    text = os.environ.get(ENV_PREFIX + key.upper())
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise env_json_error(key, f"is not valid JSON: {exc.msg}", exc.lineno, exc.colno) from None
    if not isinstance(value, dict):
        raise env_json_error(key, "is not a JSON object")
    return value


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        merged[key] = _merge(merged[key], value) if isinstance(value, dict) and isinstance(
            merged.get(key), dict) else value
    return merged


def _unquoted(message: str, value: Any, source: str) -> str:
    """``message`` without the value it quotes when the value comes from the environment, where it
    may be a secret pasted into the wrong variable ("… not 'sk-…'" → "… not that value")."""
    if source != "environment":
        return message
    leaves, pending = [], [value]
    while pending:
        item = pending.pop()
        if isinstance(item, Mapping):
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
        else:
            leaves.append(item)
    for leaf in sorted(leaves, key=lambda leaf: -len(repr(leaf))):
        if isinstance(leaf, str) and leaf:
            message = message.replace(repr(leaf), "that value (not shown: it may be a secret)").replace(
                leaf, "(not shown)")
        else:
            message = re.sub(rf"\b(not|to) {re.escape(repr(leaf))}(?![\w.])", r"\1 that value (not shown)", message)
    return message


def _line_of(text: str, key: str) -> int | None:
    match = re.search(rf"^[ \t]*['\"]?{re.escape(key)}['\"]?[ \t]*=", text, re.MULTILINE)
    return text.count("\n", 0, match.start()) + 1 if match else None


def warn_unknown_env() -> None:
    """Log each ``ROSETTA_*`` variable that names no setting (a typo would otherwise be ignored silently)."""
    known = {ENV_PREFIX + name.upper() for name in KEYS}
    for name in os.environ:
        if name.startswith(ENV_PREFIX) and name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            log.warning("ignoring unknown environment variable %s%s", name,
                        f" (did you mean {close[0]}?)" if close else "")
