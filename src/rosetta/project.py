"""Project directories for the runtime, read without pydantic-settings.

``rosetta.load("triage")`` sits on application start-up paths, where importing pydantic-settings
(~300 ms) is too slow. This reads the same sources with the same precedence as
:func:`rosetta.config.load_settings` — ``[tool.rosetta]`` < ``ROSETTA_*`` < arguments — for the
few keys the runtime needs; ``tests/runtime/test_project.py`` checks that both agree.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from rosetta.errors import ConfigError, Location, Problem


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
        from rosetta.errors import ConfigError

        unknown = set(data) - {"requests_per_minute", "tokens_per_minute", "max_in_flight"}
        if unknown:
            raise ConfigError.at(f"unknown rate limit key(s) {', '.join(sorted(unknown))} in {where}",
                                 hint="use requests_per_minute, tokens_per_minute and max_in_flight")
        values = {}
        for key in ("requests_per_minute", "tokens_per_minute", "max_in_flight"):
            value = data.get(key)
            if value is None:
                continue
            whole = key == "max_in_flight"
            if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)) or value <= 0:
                raise ConfigError.at(f"{where}.{key} must be a positive {'integer' if whole else 'number'}, "
                                     f"not {value!r}")
            values[key] = value
        return cls(**values)


@dataclass(frozen=True)
class HealthPolicy:
    """Defaults tuned for outages, not bad luck: 30% transient errors (handled by retries) never
    trip them — 16 failures in 20 calls at that rate has odds of about 1 in 180,000."""

    window_s: float = 60.0
    min_calls: int = 20
    error_rate: float = 0.8
    cooldown_s: float = 30.0




@dataclass(frozen=True)
class ProjectDirs:
    """Absolute directories and runtime options of one project."""

    root: Path
    signatures_dir: Path
    compiled_dir: Path
    strict: bool
    rate_limits: dict[str, Limit] = field(default_factory=dict)  # provider or model id → limit per API key
    health: HealthPolicy = HealthPolicy()
    cache_dir: Path = Path()  # downloads and assembled local models
    local_models: dict[str, Path] = field(default_factory=dict)  # local/<name> → GGUF file
    adapter_dirs: tuple[Path, ...] = ()  # project adapters beside the bundled ones
    section_roles: dict[str, str] = field(default_factory=dict)  # heading → RCCF role, project-wide
    unlisted_models: tuple[str, ...] = ("*",)  # ids outside the catalog the project accepts ("*": all)
    local_threads: int | None = None  # CPU threads of the embedded model (None: all)
    models: dict[str, Any] = field(default_factory=dict)  # declared models: id → its [tool.rosetta.models] table
    datasets_dir: Path = Path("datasets")  # labeled examples, datasets/<agent>/ (strict mode checks optimized prompts on them)


def project_dirs(start: str | os.PathLike[str] | None = None, **overrides: object) -> ProjectDirs:
    """The runtime's view of the project containing ``start`` (default: the working directory)."""
    origin = Path(start or Path.cwd()).resolve()
    pyproject = next((d / "pyproject.toml" for d in (origin, *origin.parents) if (d / "pyproject.toml").is_file()),
                     None)
    table: dict[str, object] = {}
    if pyproject is not None:
        try:
            table = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("rosetta", {})
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError.at(f"invalid TOML: {exc}", file=pyproject) from None
    root = Path(str(overrides.get("root") or os.environ.get("ROSETTA_ROOT") or
                    (pyproject.parent if pyproject else origin))).resolve()

    def setting(key: str, default: str) -> str:
        value = overrides.get(key)
        if value is None:
            value = os.environ.get("ROSETTA_" + key.upper())
        if value is None:
            value = table.get(key, default)
        return str(value)

    def directory(key: str, default: str) -> Path:
        path = Path(setting(key, default)).expanduser()
        return path if path.is_absolute() else root / path

    strict = setting("strict", "false").strip().lower() in ("1", "true", "yes", "on")
    where = str(pyproject) if pyproject else "[tool.rosetta]"
    limits = _table(table, "rate_limits", where)
    rate_limits = {name: Limit.from_mapping(_mapping(value, f"rate_limits.{name}", where), f"rate_limits.{name}")
                   for name, value in limits.items()}
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    local_models = {str(name): _absolute(Path(str(path)).expanduser(), root)
                    for name, path in _table(table, "local_models", where).items()}
    section_roles = {str(k): str(v) for k, v in _table(table, "section_roles", where).items()}
    return ProjectDirs(root, directory("signatures_dir", "signatures"), directory("compiled_dir", "compiled"), strict,
                       rate_limits, _health(_table(table, "health", where), where),
                       directory("cache_dir", str(Path(cache) / "rosetta")), local_models,
                       tuple(_absolute(Path(str(p)).expanduser(), root) for p in _list(overrides, table, "adapter_dirs")),
                       section_roles, tuple(str(p) for p in _list(overrides, table, "unlisted_models", ["*"])),
                       _positive_int(setting("local_threads", ""), "local_threads", where),
                       _table(table, "models", where), directory("datasets_dir", "datasets"))


def _positive_int(text: str, key: str, where: str) -> int | None:
    """An optional whole-number setting above zero ("" when unset)."""
    if not text.strip():
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0 or text.strip().lower() in ("true", "false"):
        raise ConfigError.at(f"{key} must be a positive integer, not {text!r}", file=where, field=key)
    return value


def _list(overrides: Mapping[str, object], table: dict[str, Any], key: str,
          default: list[Any] | None = None) -> list[Any]:
    """A list setting: argument, then ``ROSETTA_<KEY>`` (a JSON list or comma-separated text, as
    pydantic-settings reads it), then [tool.rosetta], then ``default``."""
    value = overrides.get(key) or os.environ.get("ROSETTA_" + key.upper()) or table.get(key, default or [])
    if isinstance(value, str):
        text = value.strip()
        value = json.loads(text) if text.startswith("[") else [p.strip() for p in text.split(",") if p.strip()]
    return list(value)  # type: ignore[call-overload]


def _absolute(path: Path, root: Path) -> Path:
    return path if path.is_absolute() else root / path


def _table(table: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """A sub-table of [tool.rosetta], deep-merged under ``ROSETTA_<KEY>`` holding JSON (as pydantic-settings does)."""
    merged = _mapping(table.get(key, {}), key, where)
    text = os.environ.get("ROSETTA_" + key.upper())
    if text is not None:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise env_json_error(key, f"is not valid JSON: {exc.msg}", exc.lineno, exc.colno) from None
        if not isinstance(value, dict):
            raise env_json_error(key, "is not a JSON object")
        merged = _merge(merged, value)
    return merged


JSON_EXAMPLES = {
    "models": '{"openai/my-model": {"api_base": "http://127.0.0.1:8000/v1", "api_key_env": "MY_SERVER_KEY"}}',
    "rate_limits": '{"openai": {"requests_per_minute": 500}}',
    "health": '{"cooldown_s": 60}',
    "section_roles": '{"House rules": "constraints"}',
    "local_models": '{"mine": "models/mine.gguf"}',
}
"""What each table-valued ``ROSETTA_<KEY>`` variable looks like, for the errors that refuse one."""


def env_json_error(key: str, message: str, line: int | None = None, column: int | None = None) -> ConfigError:
    """A table-valued ``ROSETTA_<KEY>`` variable that does not parse or is not an object: named, with
    what it must hold (its value is never quoted)."""
    variable = "ROSETTA_" + key.upper()
    return ConfigError(Problem(f"${variable} {message}", Location(f"${variable}", line, column), key,
                               f"a JSON object, merged over [tool.rosetta.{key}]",
                               f"fix it or unset it; e.g. export {variable}='{JSON_EXAMPLES.get(key, '{}')}'"))


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        merged[key] = _merge(merged[key], value) if isinstance(value, dict) and isinstance(
            merged.get(key), dict) else value
    return merged


def _mapping(value: Any, key: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError.at(f"{key} must be a table, not {type(value).__name__}", file=where, field=key)
    return value


def _health(values: dict[str, Any], where: str) -> HealthPolicy:
    known = {f.name: f.type for f in fields(HealthPolicy)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError.at(f"unknown health setting(s) {', '.join(unknown)}", file=where, field="health",
                             hint=f"known: {', '.join(known)}")
    for key, value in values.items():
        bad = isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 or (
            key == "error_rate" and value > 1) or (key == "min_calls" and not isinstance(value, int))
        if bad:
            raise ConfigError.at(f"health.{key} must be a positive {'integer' if key == 'min_calls' else 'number'}"
                                 f"{' at most 1' if key == 'error_rate' else ''}, not {value!r}", file=where,
                                 field=f"health.{key}")
    return HealthPolicy(**values)
