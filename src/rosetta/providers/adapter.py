"""Provider adapters: what differs between providers, as data.

Each adapter is a YAML file (``providers/adapters/*.yaml`` ships four) validated by
:class:`Adapter`. Renderers read these facts instead of branching on provider names; the few
behaviours that need code are named here (``schema_transforms``, ``tool_envelope``,
``structured_output``) and implemented once as small transforms. Users add or override adapters
with their own directories (``--adapters DIR`` / ``adapter_dirs`` in config): a file whose
``name`` matches a bundled adapter replaces it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rosetta.definition.vocabulary import RCCFRole
from rosetta.definition.yaml_source import parse_yaml
from rosetta.errors import ConfigError, Location, Problem
from rosetta.providers.adapter_files import BUNDLED, adapter_digest, adapter_paths  # noqa: F401 (BUNDLED re-exported)
from rosetta.providers.kinds import (  # noqa: F401  (re-exported: adapters are where people look)
    Delimiter,
    ModelClass,
    ReasoningMode,
    SchemaTransform,
    StructuredOutput,
    SystemPlacement,
    ToolEnvelope,
)

log = logging.getLogger(__name__)


class PerClass(BaseModel):
    """A value per model class."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    frontier: ReasoningMode | int
    mid: ReasoningMode | int
    open: ReasoningMode | int

    def __getitem__(self, model_class: ModelClass) -> ReasoningMode | int:
        value: ReasoningMode | int = getattr(self, model_class)
        return value


class PromptCache(BaseModel):
    """How the provider caches a prompt's prefix (issue 85): ``explicit`` hosts cache only up to a
    breakpoint the request marks (Anthropic's ``cache_control``; litellm writes Bedrock Converse's
    ``cachePoint`` from it), ``automatic`` ones any long identical prefix on their own."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    mode: Literal["explicit", "automatic"]
    """Whether the request must mark where the cached prefix ends."""
    breakpoints: int = Field(default=0, ge=0)
    """Most breakpoints one request may mark (explicit hosts)."""
    min_tokens: int = Field(ge=1)
    """The shortest prefix the host caches: a shorter one is sent unmarked."""


class Budget(BaseModel):
    """Shares of the context window; they must add up to 1."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    output_reserve: float = Field(ge=0, le=1)
    system: float = Field(ge=0, le=1)
    tools: float = Field(ge=0, le=1)
    history: float = Field(ge=0, le=1)

    @model_validator(mode="after")
    def _sums_to_one(self) -> Budget:
        total = self.output_reserve + self.system + self.tools + self.history
        if abs(total - 1) > 1e-6:
            raise ValueError(f"budget shares add up to {total:g}, expected 1")
        return self


DEFAULT_REASONING_INSTRUCTION = "Think through the problem step by step before you give your final answer."

RETIRED_FIELDS = ("roles", "strict_alternation")
"""Fields adapters once had and no code read (litellm maps roles and merges turns): still accepted
in a user's adapter file, with a warning, so that an older file keeps loading."""


class Adapter(BaseModel):
    """Everything the renderer needs to know about one provider family."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: str
    """Adapter id, referenced by the model catalog."""
    description: str = ""
    """One line for people."""
    providers: list[str] = []
    """litellm provider prefixes served by this adapter (used for models outside the catalog)."""
    system_prompt: SystemPlacement
    """Where the system prompt goes."""
    delimiter: Delimiter
    """Section delimiter style."""
    keep_xml_bodies: bool = False
    """Render XML-bodied agents with XML tags even if the preferred delimiter differs."""
    section_order: list[RCCFRole | Literal["tools"]]
    """RCCF order of the system text; `other` sections follow their nearest predecessor."""
    reasoning: PerClass
    """Under `adaptive`: omit or inject a reasoning instruction, per model class."""
    reasoning_instruction: str = DEFAULT_REASONING_INSTRUCTION
    """The instruction injected when reasoning is on."""
    few_shot: PerClass
    """Preferred demo count per model class, clamped to the agent's count_range."""
    tool_envelope: ToolEnvelope
    """Shape of tool definitions."""
    structured_output: StructuredOutput
    """Mechanism that enforces the output schema."""
    structured_output_with_tools: StructuredOutput | None = None
    """The mechanism for an agent with tools of its own, where the provider refuses the usual one
    beside function calling (Gemini: a JSON response type with function calling is a 400)."""
    schema_transforms: list[SchemaTransform] = []
    """Output-schema rewrites applied, in order, before sending."""
    budget: Budget
    """Context window shares."""
    prompt_cache: PromptCache | None = None
    """How its hosts cache a prompt's stable prefix (none: not known to)."""
    unknown_model_class: ModelClass = "mid"
    """Class assumed for a model of this adapter's providers that is not in the catalog."""
    sha256: str = Field(default="", exclude=True)
    """Hash of the adapter file (provenance for compiled artifacts)."""
    path: str = Field(default="", exclude=True)
    """Where the adapter was loaded from."""

    @model_validator(mode="before")
    @classmethod
    def _drop_retired_fields(cls, data: Any) -> Any:
        if isinstance(data, dict) and any(name in data for name in RETIRED_FIELDS):
            found = [name for name in RETIRED_FIELDS if name in data]
            log.warning("adapter %r: %s no longer used; delete %s", data.get("name"),
                        " and ".join(f"`{n}`" for n in found) + (" are" if len(found) > 1 else " is"),
                        "them" if len(found) > 1 else "it")
            data = {k: v for k, v in data.items() if k not in RETIRED_FIELDS}
        return data

    @model_validator(mode="after")
    def _check_tables(self) -> Adapter:
        for model_class in ("frontier", "mid", "open"):
            if not isinstance(self.reasoning[model_class], ReasoningMode):
                raise ValueError(f"reasoning.{model_class} must be omit or inject")
            count = self.few_shot[model_class]
            if not isinstance(count, int) or count < 0:
                raise ValueError(f"few_shot.{model_class} must be a non-negative integer")
        core = {RCCFRole.ROLE, RCCFRole.CONTEXT, RCCFRole.CONSTRAINTS, RCCFRole.FORMAT}
        if not core <= set(self.section_order) or len(set(self.section_order)) != len(self.section_order):
            raise ValueError("section_order must list role, context, constraints and format once each")
        return self



def read_adapter(path: Path) -> Adapter:
    """Load and validate one adapter file; errors name the file and line."""
    from rosetta.definition.frontmatter import read_text
    from rosetta.errors import DefinitionError

    try:
        text = read_text(path)
        data, source_map = parse_yaml(text, file=str(path))
    except DefinitionError as error:
        raise ConfigError(error.problems) from None
    if not isinstance(data, dict):
        raise ConfigError.at("adapter file must be a mapping", file=path, line=1)
    try:
        adapter = Adapter.model_validate(data)
    except ValidationError as exc:
        problems = []
        for found in exc.errors(include_url=False):
            location = source_map.locate(tuple(found["loc"]))
            field = ".".join(str(p) for p in found["loc"]) or None
            problems.append(Problem(found["msg"].removeprefix("Value error, "), location, field))
        raise ConfigError(problems) from None
    return adapter.model_copy(update={"sha256": adapter_digest(text), "path": str(path)})


def load_adapters(extra_dirs: Iterable[str | Path] = ()) -> dict[str, Adapter]:
    """The bundled adapters, then every ``*.yaml`` in ``extra_dirs`` (later ones override earlier)."""
    directories = [Path(d) for d in extra_dirs]
    for directory in directories:
        if not directory.is_dir():
            raise ConfigError(Problem("adapter directory not found", Location(str(directory)),
                                      hint="check --adapters / adapter_dirs"))
    adapters: dict[str, Adapter] = {}
    for path in adapter_paths(directories):
        adapter = read_adapter(path)
        adapters[adapter.name] = adapter
    return adapters


@cache
def _bundled() -> tuple[tuple[str, Adapter], ...]:
    return tuple(load_adapters().items())


def bundled_adapters() -> dict[str, Adapter]:
    """The four shipped adapters (read once per process)."""
    return dict(_bundled())


def no_adapter(model: Any, adapters: Mapping[str, Any]) -> Problem:
    """The problem of a model whose adapter is not among ``adapters``, said where it was chosen."""
    where = (f'adapter in [tool.rosetta.models."{model.id}"]' if model.source == "project"
             else "the catalog entry")
    return Problem(f"no adapter named {model.adapter!r} for {model.id}", field="adapter",
                   expected=f"one of {', '.join(sorted(adapters))}",
                   hint=f"fix {where}, or add an adapter file of that name to adapter_dirs")
