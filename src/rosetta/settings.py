"""Project settings, read in one place: ``[tool.rosetta]`` in the nearest ``pyproject.toml``,
overridden by ``ROSETTA_*`` environment variables, overridden by arguments (CLI flags, or the
keywords of ``rosetta.load``).

The CLI, ``rosetta.load`` and the runtime all call :func:`load_settings`, so one precedence, one
set of defaults and one set of error messages hold everywhere. It imports no pydantic: loading an
agent sits on application start-up paths. Relative directories are resolved against the project
root (the directory of that ``pyproject.toml``), not the working directory, so ``rosetta`` behaves
the same from any sub-directory. An unknown key is an error naming its line and the nearest valid
key; a bad value names where it came from (the argument, ``$ROSETTA_<KEY>``, or its line).

:class:`ProjectState` owns ``<root>/.rosetta/``, what rosetta keeps between runs.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from rosetta.definition.vocabulary import RCCFRole
from rosetta.errors import ConfigError, Location, Problem

log = logging.getLogger(__name__)

ENV_PREFIX = "ROSETTA_"
TRUE, FALSE = ("1", "true", "yes", "on", "y", "t"), ("0", "false", "no", "off", "n", "f")


@dataclass(frozen=True)
class Limit:
    """A provider's (or one model's) budget per API key and endpoint; ``None`` means unmetered."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    max_in_flight: int = 64
    """Calls sent and not yet answered, at most, per endpoint (provider, API base, key; a model with
    its own entry counts alone): more wait in this process, first come first served, instead of
    crowding the connection pool, where they would time out before being sent. Every provider has
    this bound, listed or not; the wait does not count against a call's timeout."""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], where: str) -> Limit:
        unknown = set(data) - {"requests_per_minute", "tokens_per_minute", "max_in_flight"}
        if unknown:
            raise ValueError(f"unknown rate limit key(s) {', '.join(sorted(unknown))} in {where}; use "
                             "requests_per_minute, tokens_per_minute and max_in_flight")
        values: dict[str, Any] = {}
        for key in ("requests_per_minute", "tokens_per_minute", "max_in_flight"):
            value = data.get(key)
            if value is None:
                continue
            whole = key == "max_in_flight"
            if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)) or value <= 0:
                raise ValueError(f"{where}.{key} must be a positive {'integer' if whole else 'number'}, not {value!r}")
            values[key] = value
        return cls(**values)


@dataclass(frozen=True)
class HealthPolicy:
    """When a provider is skipped for failing too often. Defaults tuned for outages, not bad luck:
    30% transient errors (handled by retries) never trip them — 16 failures in 20 calls at that
    rate has odds of about 1 in 180,000."""

    window_s: float = 60.0
    min_calls: int = 20
    error_rate: float = 0.8
    cooldown_s: float = 30.0

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> HealthPolicy:
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"unknown health setting(s) {', '.join(unknown)}; known: {', '.join(known)}")
        for key, value in values.items():
            whole = key == "min_calls"
            if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)) or value <= 0 or (
                    key == "error_rate" and value > 1):
                raise ValueError(f"health.{key} must be a positive {'integer' if whole else 'number'}"
                                 f"{' at most 1' if key == 'error_rate' else ''}, not {value!r}")
        return cls(**values)


@dataclass(frozen=True)
class ProjectState:
    """``<root>/.rosetta/``: what rosetta keeps between runs (never committed). Every path in it is
    named here."""

    path: Path

    @classmethod
    def of(cls, root: str | os.PathLike[str]) -> ProjectState:
        """The state directory of the project rooted at ``root``."""
        return cls(Path(root) / ".rosetta")

    @property
    def eval_cache(self) -> Path:
        """Answers already paid for, keyed by prompt, example and model revision."""
        return self.path / "eval-cache.sqlite"

    @property
    def studies(self) -> Path:
        return self.path / "studies"

    def study(self, agent: str, model_id: str) -> Path:
        """The optuna journal of ``agent``'s search on ``model_id`` (resumed by the next run)."""
        return self.studies / agent / (model_id.replace("/", "__") + ".journal")

    @property
    def measured(self) -> Path:
        """The signed ids of the versions whose scores a search here measured (:mod:`rosetta.store.measured`)."""
        return self.path / "measured.jsonl"

    def outcomes(self, agent: str) -> Path:
        """``rosetta.record_outcome``'s log for ``agent`` (experiment reports read it)."""
        return self.path / "outcomes" / f"{agent}.jsonl"


def _default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rosetta"


def user_cache_dir() -> Path:
    """The user's cache folder, which no project setting can name: ``$ROSETTA_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/rosetta`` (``~/.cache/rosetta``). It holds what a project must not ship or
    reach: the keys that sign each project's cache, and the local models' weights by default."""
    given = os.environ.get(ENV_PREFIX + "CACHE_DIR", "").strip()
    return Path(given).expanduser().resolve() if given else _default_cache_dir()


PROJECT = "[tool.rosetta]"
"""The source of a value the project's pyproject.toml sets (the others are the user's)."""


@dataclass(frozen=True)
class Settings:
    """Everything a project configures; directories are absolute."""

    root: Path
    """Project root; relative paths below are resolved against it."""
    signatures_dir: Path
    """Where agent definitions live (default ``signatures``)."""
    compiled_dir: Path
    """Where compiled artifacts are written (default ``compiled``)."""
    datasets_dir: Path
    """Where labeled examples live (default ``datasets``)."""
    cache_dir: Path
    """Downloads and assembled local models (default ``$XDG_CACHE_HOME/rosetta``)."""
    default_models: tuple[str, ...] = ()
    """Compile targets for agents without portability.model_preferences (empty: the catalog's)."""
    adapter_dirs: tuple[Path, ...] = ()
    """Extra directories of provider adapter YAML files that add to or override the bundled ones."""
    unlisted_models: tuple[str, ...] = ("*",)
    """Model ids outside the catalog the project accepts, as patterns: by default every id litellm
    routes ("*"); a team that wants the strict gate lists the ones it accepts (e.g. ["azure/*",
    "ollama_chat/*"]) or none ([]), and any other id is then an error naming the nearest catalog names."""
    strict: bool = False
    """Runtime strictness: raise instead of falling back to the uncompiled render."""
    section_roles: dict[str, RCCFRole] = field(default_factory=dict)
    """Project-wide heading → RCCF role overrides, e.g. {"House rules": "constraints"}."""
    local_models: dict[str, Path] = field(default_factory=dict)
    """Extra GGUF models for the local/ provider: name → file (`local/<name>` then runs it)."""
    local_threads: int | None = None
    """CPU threads the embedded model computes with (default: the CPUs free now, by their use over
    a fifth of a second; see rosetta.local.threads.default_threads); lower it where other work shares
    the machine, e.g. a compile and an evaluate running side by side."""
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Your own models, by provider/model id: self-hosted or OpenAI-compatible endpoints and hosted
    models the catalog lacks, or changes to a built-in entry (merged field by field); see the
    README's "Your own models" and rosetta.providers.declared_models.declared_model."""
    rate_limits: dict[str, Limit] = field(default_factory=dict)
    """Client-side limits per API key, by provider ("openai") or model id: requests/tokens per minute."""
    health: HealthPolicy = HealthPolicy()
    """When a provider is skipped for failing too often: window, minimum calls, error rate, cool-down."""

    @property
    def state(self) -> ProjectState:
        """The project's ``.rosetta/`` directory."""
        return ProjectState.of(self.root)


KEYS = tuple(f.name for f in fields(Settings))

JSON_EXAMPLES = {
    "models": '{"openai/my-model": {"api_base": "http://127.0.0.1:8000/v1", "api_key_env": "MY_SERVER_KEY"}}',
    "rate_limits": '{"openai": {"requests_per_minute": 500}}',
    "health": '{"cooldown_s": 60}',
    "section_roles": '{"House rules": "constraints"}',
    "local_models": '{"mine": "models/mine.gguf"}',
}
"""The table-valued settings, and what their ``ROSETTA_<KEY>`` variable looks like (a JSON object
merged over the ``[tool.rosetta.<key>]`` table), for the errors that refuse one."""


def load_settings(start: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Settings for the project containing ``start`` (default: the working directory).

    ``overrides`` (CLI flags, ``rosetta.load`` keywords) win over ``ROSETTA_*`` variables, which win
    over ``[tool.rosetta]``; ``None`` overrides are ignored, so options can pass their defaults through.
    """
    unknown = sorted(set(overrides) - set(KEYS))
    if unknown:
        raise TypeError(f"load_settings() got unknown setting(s) {', '.join(unknown)}")
    origin = Path(start or Path.cwd()).expanduser().resolve()
    pyproject = find_pyproject(origin)
    text = pyproject.read_text(encoding="utf-8") if pyproject else ""
    table = read_tool_table(pyproject, text) if pyproject else {}
    _warn_unknown_env()
    read = _Reader(table, {k: v for k, v in overrides.items() if v is not None}, pyproject, text)
    # the root: an argument, else $ROSETTA_ROOT, else the pyproject.toml's folder (a `root` key in
    # that file would be relative to itself: it is not read)
    given = read.overrides.get("root") or os.environ.get(ENV_PREFIX + "ROOT")
    root = (_path(given) if given else pyproject.parent if pyproject else origin).resolve()

    def directory(key: str, default: Path | str) -> Path:
        path = _absolute(read.value(key, lambda v, _: _path(v), Path(default)), root)
        return read.confined(key, path, root) if read.source(key) in (None, PROJECT) else path

    return Settings(
        root=root,
        signatures_dir=directory("signatures_dir", "signatures"),
        compiled_dir=directory("compiled_dir", "compiled"),
        datasets_dir=directory("datasets_dir", "datasets"),
        cache_dir=directory("cache_dir", "") if read.source("cache_dir") == PROJECT else user_cache_dir(),
        default_models=tuple(read.value("default_models", _texts, ())),
        adapter_dirs=tuple(read.confined("adapter_dirs", _absolute(_path(p), root), root)
                           if read.source("adapter_dirs") == PROJECT else _absolute(_path(p), root)
                           for p in read.value("adapter_dirs", _texts, ())),
        unlisted_models=tuple(read.value("unlisted_models", _texts, ("*",))),
        strict=read.value("strict", _flag, False),
        section_roles=read.table("section_roles", _role),
        local_models={name: _absolute(path, root)  # read only, through the weights' checks: a shared folder is fine
                      for name, path in read.table("local_models", lambda value, _: _path(value)).items()},
        local_threads=read.value("local_threads", _positive_int, None),
        models=read.table("models", lambda entry, _: entry),  # each entry's shape: the catalog's to judge
        rate_limits=read.table("rate_limits",
                               lambda value, name: Limit.from_mapping(_mapping(value, name), f"rate_limits.{name}")),
        health=read.whole("health", HealthPolicy.from_mapping),
    )


class _Reader:
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
    for key in table:
        if key not in KEYS:
            close = difflib.get_close_matches(key, KEYS, n=1)
            problems.append(Problem(f"unknown setting {key!r} in [tool.rosetta]", Location(str(pyproject), _line_of(
                text, key)), f"tool.rosetta.{key}", hint=f"did you mean {close[0]!r}?" if close else
                                    f"known settings: {', '.join(KEYS)}"))
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

def _path(value: Any) -> Path:
    if isinstance(value, str | os.PathLike) and str(value).strip():
        return Path(value).expanduser()
    raise ValueError(f"expected a path, not {value!r}")


def _absolute(path: Path, root: Path) -> Path:
    return path if path.is_absolute() else root / path


def _texts(value: Any, key: str) -> list[Any]:
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


def _flag(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in TRUE + FALSE:
        return value.strip().lower() in TRUE
    raise ValueError(f"{key} must be true or false, not {value!r}")


def _positive_int(value: Any, key: str) -> int | None:
    if isinstance(value, str) and not value.strip():
        return None
    try:
        number = int(value) if not isinstance(value, bool | float) else 0
    except (TypeError, ValueError):
        number = 0
    if number <= 0:
        raise ValueError(f"{key} must be a positive integer, not {value!r}")
    return number


def _role(value: Any, heading: str) -> RCCFRole:
    try:
        return RCCFRole(value)
    except ValueError:
        raise ValueError(f"section_roles: {heading!r} maps to {value!r}, which is no RCCF role (expected one of "
                         f"{', '.join(r.value for r in RCCFRole)})") from None


def _mapping(value: Any, key: str) -> dict[str, Any]:
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


def _warn_unknown_env() -> None:
    known = {ENV_PREFIX + name.upper() for name in KEYS}
    for name in os.environ:
        if name.startswith(ENV_PREFIX) and name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            log.warning("ignoring unknown environment variable %s%s", name,
                        f" (did you mean {close[0]}?)" if close else "")

