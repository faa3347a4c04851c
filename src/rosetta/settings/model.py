"""What a project configures: :class:`Settings`, with the tables in it (:class:`Limit`,
:class:`HealthPolicy`), and :class:`ProjectState`, what rosetta keeps between runs; with the names
each source spells a setting by (:data:`KEYS`, :data:`ENV_PREFIX`, :data:`PROJECT`). Read by
:func:`rosetta.settings.load_settings`; like it, this imports no pydantic.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from rosetta.definition.vocabulary import RCCFRole

ENV_PREFIX = "ROSETTA_"


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
