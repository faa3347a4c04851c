"""The portable agent schema (ADR-003, 38 fields) as frozen pydantic models.

:class:`AgentSpec` is exactly the frontmatter a user writes; ``rosetta schema`` publishes its JSON
Schema for editors. What the loader returns, the spec with its body and provenance, is
:class:`~rosetta.definition.document.AgentDefinition`. Types are checked here; portability rules
(PV-001…PV-010) are judged by ``rosetta.lint`` so that a definition can load and still be
reported on, with line numbers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import date, time
from enum import StrEnum
from functools import cached_property
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from rosetta.definition.input_rules import InputRule, rules_by_input
from rosetta.definition.patterns import PatternError, compile_pattern, shown
from rosetta.definition.spec_base import SpecSection
from rosetta.definition.vocabulary import (
    BodyFormat,
    CognitiveMode,
    FallbackBehavior,
    Feature,
    OutputLevel,
    RCCFRole,
    ReasoningStrategy,
)

PROVIDER_API_PARAMS = (
    "response_format",
    "tool_choice",
    "function_calling_config",
    "extended_thinking",
    "reasoning_effort",
    "system_instruction",
)
"""Provider request parameters that must never appear in a definition (PV-001). They load like any
unknown field, so that lint can report them with a line number instead of failing the load."""


DEFAULT_INPUT = "request"
"""The single text input of an agent that declares none."""


def json_values(value: Any) -> Any:
    """``value`` with YAML's dates and times as ISO 8601 text (``2024-01-01``): JSON Schemas are
    JSON, and every provider, hash and validator downstream serialises them as such."""
    if isinstance(value, dict):
        return {key: json_values(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_values(item) for item in value]
    if isinstance(value, (date, time)):
        return value.isoformat()
    return value


def _also(schema: dict[str, Any], other: dict[str, Any]) -> None:
    """Publish a second shape the loader reads for a field (editors then accept it too)."""
    main = {key: schema.pop(key) for key in ("type", "items", "additionalProperties") if key in schema}
    schema["anyOf"] = [main, other]


class Identity(SpecSection):
    """Who the agent is."""

    role: str | None = None
    """Human-readable role title, e.g. "Vulnerability Triage Analyst"."""
    expertise: list[str] = []
    """Domain expertise areas."""
    cognitive_mode: str | None = Field(default=None, json_schema_extra={"examples": list(CognitiveMode)})
    """How the agent approaches problems: divergent, convergent, integrative, systematic, strategic,
    forensic, or a mode of your own (rendered as written)."""


class Persona(SpecSection):
    """How the agent speaks."""

    tone: str | None = None
    """Communication tone, e.g. professional, analytical."""
    communication_style: str | None = None
    """Interaction style, e.g. consultative, direct."""
    audience_level: str | None = None
    """Target audience: L0, L1, L2 or adaptive."""


class Capabilities(SpecSection):
    """What the agent may do and what it needs from a provider."""

    allowed_tools: list[str] = []
    """Tool identifiers the agent may call (e.g. Read, Grep, or names from `tools`)."""
    output_formats: list[str] = []
    """Supported output formats: markdown, yaml, json."""
    forbidden_actions: list[str] = []
    """Prohibitions in natural language; rendered into the Constraints section."""
    required_features: list[Feature] = []
    """Provider features the agent depends on (tool_use, structured_output, vision, streaming)."""


_OUTPUT_ACTIONS = {**dict.fromkeys(("redact", "mask", "remove", "strip", "replace", "sanitize"), "redact"),
                   **dict.fromkeys(("block", "reject", "deny", "refuse", "fail", "error", "halt"), "block"),
                   **dict.fromkeys(("flag", "warn", "log", "report", "audit"), "flag")}
"""``output_filtering`` actions by meaning; any other is kept as written and only flags."""


class OutputRule(SpecSection):
    """One ``guardrails.output_filtering`` entry written as a mapping: a named rule
    (``{rule: no_pii, action: block}``) or an expression the answer must not contain
    (``{pattern: "AKIA[0-9A-Z]{16}", action: redact}``)."""

    rule: str | None = Field(default=None, validation_alias=AliasChoices("rule", "name", "id"))
    """The rule's name, as in the text shape (e.g. no_secrets_in_output)."""
    pattern: str | None = None
    """An expression the answer must not contain (searched with a time limit)."""
    action: str = "flag"
    """What to do when the answer breaks the rule: redact (replace each match), block (discard the
    answer), or flag (record it on the Result's post-checks: the default)."""
    description: str | None = None
    """The rule in a sentence, rendered into the prompt's constraints."""
    message: str | None = None
    """What to tell the caller when a blocked answer is discarded."""

    @field_validator("action", mode="before")
    @classmethod
    def _action_by_meaning(cls, value: Any) -> Any:
        # collections write the same three actions under other names: mask, reject, warn...
        return _OUTPUT_ACTIONS.get(str(value).lower(), value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _check_pattern(self) -> OutputRule:
        if self.pattern is not None:
            try:
                compile_pattern(self.pattern)
            except PatternError as exc:
                raise ValueError(f"invalid regular expression {shown(self.pattern)}: {exc}") from None
        elif self.rule is None and self.description is None:
            raise ValueError("an output rule needs a 'rule' name, a 'pattern' or a 'description'")
        return self

    @property
    def text(self) -> str:
        """The rule as the prompt states it."""
        if self.description:
            return self.description
        if self.rule:
            return self.rule
        return f"never write text matching `{self.pattern}`"


class Guardrails(SpecSection):
    """Checks applied around every model call, the same on every provider."""

    input_validation: list[InputRule] = Field(default=[], json_schema_extra=lambda schema: _also(
        schema, {"type": "object", "description": "input name → rule", "additionalProperties": True}))
    """Input rules checked before the call (regular expressions; preconditions are kept, not checked).
    Also read as a mapping of input name to rule: ``project_id: {format: ..., on_invalid: {message}}``."""
    output_filtering: list[str | OutputRule] = []
    """Output rules: names or sentences (e.g. no_secrets_in_output), or mappings with a ``pattern``
    the answer must not contain and an ``action`` (redact, block, flag)."""
    fallback_behavior: FallbackBehavior = FallbackBehavior.WARN_AND_RETRY
    """What to do when output stays invalid after retries."""

    @field_validator("input_validation", mode="before")
    @classmethod
    def _rules_by_input(cls, value: Any) -> Any:
        return rules_by_input(value) if isinstance(value, dict) else value

    @cached_property
    def output_rules(self) -> tuple[OutputRule, ...]:
        """Every output rule in the mapping shape (a text rule is a rule by that name); built once, as
        every run reads them."""
        return tuple(OutputRule(rule=r) if isinstance(r, str) else r for r in self.output_filtering)

    def output_rule_texts(self) -> tuple[str, ...]:
        """The rules as the prompt states them, in order."""
        return tuple(rule.text for rule in self.output_rules)


class Tool(SpecSection):
    """A function the agent can call; parameters are JSON Schema."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
    """Function name (letters, digits, _ and -, at most 64: the strictest provider's rule)."""
    description: str = ""
    """What the tool does and when to use it."""
    parameters: dict[str, Any] = {"type": "object", "properties": {}}
    """JSON Schema of the arguments (an object schema)."""
    required: list[str] = []
    """Required argument names, in addition to any `required` inside `parameters`."""

    @field_validator("parameters", mode="before")
    @classmethod
    def _parameters_as_json(cls, value: Any) -> Any:
        return json_values(value)


class Output(SpecSection):
    """What the agent produces."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    """JSON Schema of the structured answer."""
    required: bool = False
    """Whether the agent must produce its output: with ``schema``, a structured answer; without, the
    persisted-output pattern (free text at ``levels``, saved at ``location``)."""
    location: str | None = None
    """Repository path template where results are persisted."""
    template: str | None = None
    """Path of an output template file, relative to the definition."""
    levels: list[str] = Field(default=[], json_schema_extra={"examples": [list(OutputLevel)]})
    """Output levels to produce: L0, L1, L2, or levels of your own (rendered as written)."""

    @field_validator("schema_", mode="before")
    @classmethod
    def _schema_as_json(cls, value: Any) -> Any:
        return json_values(value)


class CountRange(SpecSection):
    """How many few-shot demos a renderer may pick."""

    min: int = Field(default=1, ge=0)
    """Fewest demos."""
    max: int = Field(default=3, ge=0)
    """Most demos."""

    @model_validator(mode="after")
    def _check_order(self) -> CountRange:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        return self


class FewShot(SpecSection):
    """Few-shot demonstrations."""

    enabled: bool = False
    """Whether demos are used."""
    examples_ref: str | None = None
    """Path of an examples file, relative to the definition."""
    count_range: CountRange = CountRange()
    """How many demos the renderer may pick per model."""


class InputSpec(SpecSection):
    """One named input the agent receives at run time (a placeholder in the user message)."""

    type: Literal["string", "integer", "number", "boolean", "object", "array"] = "string"
    """JSON type of the value."""
    description: str = ""
    """What the caller passes here."""
    required: bool = True
    """Whether every call must supply it."""


def _named(item: Any) -> bool:
    return isinstance(item, str) or (isinstance(item, dict) and len(item) == 1 and isinstance(next(iter(item)), str)
                                     and isinstance(next(iter(item.values())), (str, type(None))))


def inputs_by_name(value: Any) -> Any:
    """``inputs`` in the shapes written in the wild, as the mapping of name to spec: lists of names
    (or of ``{name: description}``) under ``required`` / ``optional``
    (``{required: [repo, branch], optional: [since]}``), a list of
    names or of ``{name, type, description}`` mappings, and a description alone as an input's value.
    Anything else is returned as written, for the schema to judge."""
    if isinstance(value, list):
        named = [item if isinstance(item, dict) else {"name": item} for item in value]
        if all(isinstance(item.get("name"), str) for item in named):
            return {item["name"]: {k: v for k, v in item.items() if k != "name"} for item in named}
        return value
    if not isinstance(value, dict):
        return value
    found: dict[Any, Any] = {}
    for key, spec in value.items():
        if key in ("required", "optional") and isinstance(spec, list) and all(_named(n) for n in spec):
            for item in spec:  # a name, or {name: description}
                name, description = (item, None) if isinstance(item, str) else next(iter(item.items()))
                found[name] = {"required": key == "required", **({"description": description} if description else {})}
        else:
            found[key] = {"description": spec} if isinstance(spec, str) else spec
    return found


class GenerationParams(SpecSection):
    """What the definition asks of the model; rendering clamps it to the model's limits."""

    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sampling temperature."""
    top_p: float | None = Field(default=None, gt=0, le=1)
    """Nucleus sampling mass."""
    max_output_tokens: int | None = Field(default=None, gt=0)
    """Longest answer wanted."""
    max_input_tokens: int | None = Field(default=None, gt=0)
    """Largest prompt the agent should send (a budget below the model's window)."""
    stop: list[str] = []
    """Stop sequences."""
    seed: int | None = None
    """Sampling seed where the provider supports one."""


class Portability(SpecSection):
    """Opt-in settings for multi-provider use."""

    enabled: bool = False
    """Whether the definition is meant (and validated) for multiple providers."""
    minimum_context_window: int | None = None
    """Smallest context window, in tokens, the agent needs."""
    model_preferences: list[str] = []
    """Ordered provider/model list; later entries are fallbacks."""
    reasoning_strategy: ReasoningStrategy = ReasoningStrategy.ADAPTIVE
    """adaptive (renderer decides per model), explicit_cot, or none."""
    few_shot: FewShot = FewShot()
    """Few-shot demonstration settings."""
    body_format: BodyFormat | None = None
    """Format of the body: xml, markdown or rccf (detected when omitted)."""
    section_roles: dict[str, RCCFRole] = {}
    """Overrides of the heading → RCCF role mapping, e.g. {"House rules": constraints}."""


class WeightedCriterion(SpecSection):
    """A rubric criterion that counts more (or less) than the others."""

    criterion: str = Field(min_length=1)
    """One binary criterion, in a sentence."""
    weight: float = Field(default=1.0, gt=0)
    """Its weight in the rubric score."""


class Evaluation(SpecSection):
    """How answers are scored against labeled examples (`rosetta compile --optimize`, `rosetta evaluate`)."""

    metric: str | None = None
    """exact, fields, schema_valid, numeric, judge, or module:function; default fields (JSON) / exact (text)."""
    fields: dict[str, float] = {}
    """For `fields`: weight per top-level output key (unlisted keys are not scored); empty = all keys equally."""
    tolerance: float = Field(default=0.0, ge=0)
    """Relative tolerance for numbers (0.1 = within 10%); used by `numeric` and by `fields` on numbers."""
    rubric: list[str | WeightedCriterion] = []
    """For `judge` and `rosetta verify`: binary criteria, one sentence each (or {criterion, weight}),
    that a good answer meets."""
    judge: str | None = None
    """For `judge`: the model that grades (default: the model being optimized)."""
    dataset: str | None = None
    """Where the labeled examples are: a folder (relative to the project root) or `hub:owner/name`."""


class AgentSpec(BaseModel):
    """The frontmatter of a portable agent definition. Unknown top-level sections are kept."""

    model_config = ConfigDict(
        extra="allow", frozen=True, use_attribute_docstrings=True, title="rosetta agent definition"
    )

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=128)
    """Agent identifier, e.g. vuln-triage."""
    version: str | None = None
    """Version of the definition (semantic versioning recommended)."""
    description: str = ""
    """One line: what the agent does and when to use it."""
    identity: Identity = Identity()
    """Who the agent is."""
    persona: Persona = Persona()
    """How the agent speaks."""
    capabilities: Capabilities = Capabilities()
    """What the agent may do and needs."""
    model: str | None = None
    """Preferred model as provider/model, e.g. anthropic/claude-sonnet-4."""
    guardrails: Guardrails = Guardrails()
    """Checks applied around every call."""
    tools: list[Tool] = []
    """Functions the agent can call."""
    output: Output = Output()
    """What the agent produces."""
    portability: Portability = Portability()
    """Multi-provider settings; absent means a single-provider (Anthropic) legacy agent."""
    inputs: dict[str, InputSpec] = Field(default={}, json_schema_extra=lambda schema: _also(
        schema, {"type": "array", "description": "names, or {name, type, description} mappings"}))
    """Named run-time inputs; none declared means a single text input called `request`."""
    generation_params: dict[str, GenerationParams] = {}
    """Generation parameters per phase (`default`, `review`, ...)."""
    evaluation: Evaluation = Evaluation()
    """How answers are scored against labeled examples when optimizing or evaluating."""

    @field_validator("identity", mode="before")
    @classmethod
    def _identity_as_role(cls, value: Any) -> Any:
        # `identity: "Release captain"` names the role (older agents and Claude Code collections)
        return {"role": value} if isinstance(value, str) else value

    @field_validator("inputs", mode="before")
    @classmethod
    def _inputs_by_name(cls, value: Any) -> Any:
        return inputs_by_name(value)

    @field_validator("inputs")
    @classmethod
    def _input_names_are_identifiers(cls, value: dict[str, InputSpec]) -> dict[str, InputSpec]:
        for name in value:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"input name {name!r} must be an identifier (letters, digits, _)")
        return value

    @field_validator("version", mode="before")
    @classmethod
    def _version_as_text(cls, value: Any) -> Any:
        # `version: 1.0` parses as a float; the author meant the text.
        return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value

    @property
    def extensions(self) -> dict[str, Any]:
        """Top-level sections rosetta does not know (e.g. ``validation``), preserved as written."""
        return dict(self.model_extra or {})

    def unknown_fields(self) -> dict[tuple[str | int, ...], Any]:
        """Every field rosetta does not know, at any depth (path → value as written)."""
        return dict(_unknown_fields(self, ()))

    @property
    def input_names(self) -> tuple[str, ...]:
        """The run-time inputs: those declared, or the single ``request``."""
        return tuple(self.inputs) or (DEFAULT_INPUT,)


def _unknown_fields(model: BaseModel, path: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    for name, value in (model.model_extra or {}).items():
        yield (*path, name), value
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        here = (*path, info.alias or name)
        items: Iterable[tuple[str | int, Any]] = (enumerate(value) if isinstance(value, list)
                                                  else value.items() if isinstance(value, dict) else ())
        if isinstance(value, BaseModel):
            yield from _unknown_fields(value, here)
        for key, item in items:
            if isinstance(item, BaseModel):
                yield from _unknown_fields(item, (*here, key))


OPEN_VALUE_SETS: dict[tuple[str, ...], type[StrEnum]] = {
    ("identity", "cognitive_mode"): CognitiveMode,
    ("output", "levels"): OutputLevel,
}
"""Descriptive fields whose known values are suggestions: other values are rendered as written."""


def frontmatter_json_schema() -> dict[str, Any]:
    """JSON Schema of the frontmatter, for editors (yaml-language-server) and ``rosetta schema``."""
    schema = AgentSpec.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema
