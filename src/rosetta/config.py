"""Project settings: ``[tool.rosetta]`` in the nearest ``pyproject.toml``, overridden by
``ROSETTA_*`` environment variables, overridden by CLI flags (or keyword arguments).

Relative directories are resolved against the project root (the directory of that
``pyproject.toml``), not the working directory, so ``rosetta`` behaves the same from any
sub-directory. Unknown keys are errors that name the line and the nearest valid key.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from rosetta.definition.models import RCCFRole
from rosetta.errors import ConfigError, Location, Problem
from rosetta.project import JSON_EXAMPLES, env_json_error

log = logging.getLogger(__name__)

ENV_PREFIX = "ROSETTA_"


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rosetta"


class RateLimitSettings(BaseModel):
    """``[tool.rosetta.rate_limits.<provider or model>]``."""

    model_config = ConfigDict(extra="forbid")
    requests_per_minute: PositiveFloat | None = None
    tokens_per_minute: PositiveFloat | None = None
    max_in_flight: PositiveInt = 64
    """Calls in flight at most per endpoint; more wait their turn (rosetta.project.Limit)."""


class HealthSettings(BaseModel):
    """``[tool.rosetta.health]`` (defaults: rosetta.runtime.health.HealthPolicy)."""

    model_config = ConfigDict(extra="forbid")
    window_s: PositiveFloat = 60.0
    min_calls: PositiveInt = 20
    error_rate: Annotated[float, Field(gt=0, le=1)] = 0.8
    cooldown_s: PositiveFloat = 30.0


class Settings(BaseSettings):
    """Everything a project can configure. Paths are absolute once loaded via :func:`load_settings`."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", use_attribute_docstrings=True)

    root: Path = Path(".")
    """Project root; relative paths below are resolved against it."""
    signatures_dir: Path = Path("signatures")
    """Where agent definitions live."""
    compiled_dir: Path = Path("compiled")
    """Where compiled artifacts are written."""
    datasets_dir: Path = Path("datasets")
    """Where labeled examples live."""
    cache_dir: Path = Field(default_factory=_default_cache_dir)
    """Downloads and models (e.g. the embedded local model)."""
    default_models: Annotated[list[str], NoDecode] = []
    """Compile targets for agents without portability.model_preferences (empty: the catalog's)."""
    adapter_dirs: Annotated[list[Path], NoDecode] = []
    """Extra directories of provider adapter YAML files that add to or override the bundled ones."""
    unlisted_models: Annotated[list[str], NoDecode] = ["*"]
    """Model ids outside the catalog the project accepts, as patterns: by default every id litellm
    routes ("*"); a team that wants the strict gate lists the ones it accepts (e.g. ["azure/*",
    "ollama_chat/*"]) or none ([]), and any other id is then an error naming the nearest catalog names."""
    strict: bool = False
    """Runtime strictness: raise instead of falling back to the uncompiled render."""
    section_roles: dict[str, RCCFRole] = {}
    """Project-wide heading → RCCF role overrides, e.g. {"House rules": "constraints"}."""
    local_models: dict[str, Path] = {}
    """Extra GGUF models for the local/ provider: name → file (`local/<name>` then runs it)."""
    local_threads: PositiveInt | None = None
    """CPU threads the embedded model computes with (default: all of them); lower it where other
    work shares the machine, e.g. a compile and an evaluate running side by side."""
    models: dict[str, dict[str, Any]] = {}
    """Your own models, by provider/model id: self-hosted or OpenAI-compatible endpoints and hosted
    models the catalog lacks, or changes to a built-in entry (merged field by field); see the README's
    "Your own models" and rosetta.providers.catalog.declared_model."""
    rate_limits: dict[str, RateLimitSettings] = {}
    """Client-side limits per API key, by provider ("openai") or model id: requests/tokens per minute."""
    health: HealthSettings = HealthSettings()
    """When a provider is skipped for failing too often: window, minimum calls, error rate, cool-down."""

    @field_validator("default_models", "adapter_dirs", "unlisted_models", mode="before")
    @classmethod
    def _split_lists(cls, value: Any) -> Any:
        # env vars hold text: accept a JSON list or a comma-separated one
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                import json

                return json.loads(text)
            return [part.strip() for part in text.split(",") if part.strip()]
        return value

    def resolved(self) -> Settings:
        """A copy whose directories are absolute, relative ones taken from :attr:`root`."""
        root = self.root.expanduser().resolve()

        def absolute(path: Path) -> Path:
            path = path.expanduser()
            return path if path.is_absolute() else root / path

        return self.model_copy(
            update={
                "root": root,
                "signatures_dir": absolute(self.signatures_dir),
                "compiled_dir": absolute(self.compiled_dir),
                "datasets_dir": absolute(self.datasets_dir),
                "cache_dir": absolute(self.cache_dir),
                "adapter_dirs": [absolute(p) for p in self.adapter_dirs],
                "local_models": {name: absolute(p) for name, p in self.local_models.items()},
            }
        )


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start``."""
    start = start.resolve()
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def read_tool_table(pyproject: Path) -> dict[str, Any]:
    """The ``[tool.rosetta]`` table; a TOML syntax error or unknown key is a :class:`ConfigError`."""
    text = pyproject.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+), column (\d+)", str(exc))
        line, column = (int(match.group(1)), int(match.group(2))) if match else (None, None)
        raise ConfigError.at(f"invalid TOML: {exc}", file=pyproject, line=line, column=column) from None
    table = data.get("tool", {}).get("rosetta", {})
    if not isinstance(table, dict):
        raise ConfigError.at("[tool.rosetta] must be a table", file=pyproject, line=_line_of(text, "rosetta"))
    known = list(Settings.model_fields)
    problems = []
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            problems.append(
                Problem(
                    f"unknown setting {key!r} in [tool.rosetta]",
                    Location(str(pyproject), _line_of(text, key)),
                    f"tool.rosetta.{key}",
                    hint=f"did you mean {close[0]!r}?" if close else f"known settings: {', '.join(known)}",
                )
            )
    if problems:
        raise ConfigError(problems)
    return table


def _line_of(text: str, key: str) -> int | None:
    match = re.search(rf"^[ \t]*{re.escape(key)}[ \t]*=", text, re.MULTILINE)
    return text.count("\n", 0, match.start()) + 1 if match else None


class _TableSource(PydanticBaseSettingsSource):
    """Settings from an already-read ``[tool.rosetta]`` table (lowest priority)."""

    def __init__(self, settings_cls: type[BaseSettings], table: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        self.table = table

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self.table.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.table)


def load_settings(project_dir: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Settings for the project containing ``project_dir`` (default: the working directory).

    ``overrides`` (CLI flags) win over ``ROSETTA_*`` variables, which win over ``[tool.rosetta]``.
    ``None`` overrides are ignored, so CLI options can pass their defaults through.
    """
    start = Path(project_dir or Path.cwd())
    pyproject = find_pyproject(start)
    table = read_tool_table(pyproject) if pyproject else {}
    overrides = {k: v for k, v in overrides.items() if v is not None}
    overrides.setdefault("root", os.environ.get(ENV_PREFIX + "ROOT") or (pyproject.parent if pyproject else start))
    _warn_unknown_env()

    class ProjectSettings(Settings):
        @classmethod
        def settings_customise_sources(cls, settings_cls, init_settings, env_settings, **_: Any):  # type: ignore[override]
            return init_settings, env_settings, _TableSource(settings_cls, table)

    try:
        loaded = ProjectSettings(**overrides)
    except SettingsError as exc:  # a table-valued ROSETTA_* variable that is not JSON
        raise _unparsed(exc) from None
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            key = str(error["loc"][0]) if error["loc"] else "?"
            source = "argument"
            location = Location()
            message = error["msg"].removeprefix("Value error, ")
            if ENV_PREFIX + key.upper() in os.environ and key in JSON_EXAMPLES:  # a table-valued variable
                inner = ".".join(map(str, error["loc"][1:]))
                problems += env_json_error(key, f"does not fit: {message}"
                                           + (f" (at {inner})" if inner else "")).problems
                continue
            if ENV_PREFIX + key.upper() in os.environ:
                source = "environment"
                location = Location(f"${ENV_PREFIX}{key.upper()}")
            elif key in table and pyproject:
                source = "[tool.rosetta]"
                location = Location(str(pyproject), _line_of(pyproject.read_text(encoding="utf-8"), key))
            problems.append(Problem(f"{message} (from {source})", location, key))
        raise ConfigError(problems) from None
    return Settings.model_validate(loaded.model_dump()).resolved()


def _unparsed(exc: SettingsError) -> ConfigError:
    """The located error for a ``ROSETTA_*`` variable pydantic-settings could not decode as JSON."""
    import json

    match = re.search(r'field "(\w+)"', str(exc))
    key = match.group(1) if match else "?"
    cause = exc.__cause__
    if isinstance(cause, json.JSONDecodeError):
        return env_json_error(key, f"is not valid JSON: {cause.msg}", cause.lineno, cause.colno)
    return env_json_error(key, "cannot be read as JSON")


def _warn_unknown_env() -> None:
    known = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    for name in os.environ:
        if name.startswith(ENV_PREFIX) and name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            log.warning("ignoring unknown environment variable %s%s", name,
                        f" (did you mean {close[0]}?)" if close else "")
