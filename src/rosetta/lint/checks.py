"""The static portability criteria PV-001…PV-010 (ADR-003 §5) and rosetta's own RS rules.

Each check reads a loaded definition and yields hits; the registry decides severity and location.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator

from rosetta.definition.models import (
    PROVIDER_API_PARAMS,
    AgentDefinition,
    AgentSpec,
    Feature,
    ReasoningStrategy,
)
from rosetta.definition.sections import lines_outside_fences
from rosetta.lint.metaschema import metaschema_errors
from rosetta.lint.registry import Hit, Severity, rule

CHAT_TEMPLATE_TOKENS = (
    "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
    "[INST]", "[/INST]", "<<SYS>>", "<</SYS>>",
    "<start_of_turn>", "<end_of_turn>",
    "<|system|>", "<|user|>", "<|assistant|>", "<|end|>",
    "<|im_start|>", "<|im_end|>",
)
"""Chat-template control tokens of the common open-model families (PV-004)."""

COT_PHRASES = re.compile(
    r"step[- ]by[- ]step|think(?:ing)? through|chain[- ]of[- ]thought|let'?s think", re.IGNORECASE
)
"""Hard-coded chain-of-thought instructions (PV-005)."""

MODEL_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.:@/+-]*$")
"""The portable ``provider/model`` form (PV-006)."""

MODEL_SHORTHANDS = {
    "sonnet": "anthropic/claude-sonnet-4",
    "opus": "anthropic/claude-opus-4",
    "haiku": "anthropic/claude-haiku-3.5",
}
"""Vendor shorthands (Claude Code's ``model:`` values) and the portable names they stand for."""


# -- PV-001 ----------------------------------------------------------------------------------

_SCHEMA_SUBTREES = (("tools", int, "parameters"), ("output", "schema"))


def _in_schema(path: tuple) -> bool:
    """Whether ``path`` lies inside a JSON Schema, where any property name is fair."""
    for prefix in _SCHEMA_SUBTREES:
        if len(path) >= len(prefix) and all(
            isinstance(p, int) if q is int else p == q for p, q in zip(path, prefix, strict=False)
        ):
            return True
    return False


@rule(
    "PV-001", "No provider-specific API parameters in frontmatter",
    criterion="Zero references to " + ", ".join(PROVIDER_API_PARAMS) + ".",
    remediation="Delete the parameter; the provider adapter chooses it when rendering for each model.",
)
def check_provider_params(definition: AgentDefinition) -> Iterator[Hit]:
    for path in definition.source.locations:  # every key of the frontmatter (and sidecar) as parsed
        if path and path[-1] in PROVIDER_API_PARAMS and not _in_schema(path):
            yield Hit(f"provider API parameter {path[-1]!r} in the definition", field=path)


# -- PV-002 / PV-003 -------------------------------------------------------------------------


@rule(
    "PV-002", "All tool definitions use JSON Schema",
    criterion="Every tools[].parameters validates against the JSON Schema metaschema, is an object "
    "schema, and every required name is a declared property.",
    remediation="Fix the schema: parameters must be {type: object, properties: {...}, required: [...]}.",
)
def check_tool_schemas(definition: AgentDefinition) -> Iterator[Hit]:
    for index, tool in enumerate(definition.spec.tools):
        base = ("tools", index, "parameters")
        for path, message in metaschema_errors(tool.parameters):
            yield Hit(f"tool {tool.name!r}: {message}", field=(*base, *path))
        if tool.parameters.get("type") != "object":
            yield Hit(f"tool {tool.name!r}: parameters must be an object schema (type: object)", field=base)
        properties = tool.parameters.get("properties")
        if isinstance(properties, dict):
            inner = tool.parameters.get("required")
            for name in [*tool.required, *(inner if isinstance(inner, list) else [])]:
                if name not in properties:
                    yield Hit(f"tool {tool.name!r}: required parameter {name!r} is not in properties",
                              field=("tools", index, "required") if name in tool.required else (*base, "required"))


@rule(
    "PV-003", "Output schema is JSON Schema",
    criterion="output.schema validates against the JSON Schema metaschema; output.required has a schema.",
    remediation="Fix output.schema so it is a valid JSON Schema (draft 2020-12 unless $schema says otherwise).",
)
def check_output_schema(definition: AgentDefinition) -> Iterator[Hit]:
    schema = definition.spec.output.schema_
    if schema is None:
        if definition.spec.output.required:
            yield Hit("output.required is true but there is no output.schema", field=("output", "required"),
                      remediation="Add output.schema, or set output.required: false for free-text output.")
        return
    for path, message in metaschema_errors(schema):
        yield Hit(message, field=("output", "schema", *path))


# -- PV-004 / PV-005: the body ---------------------------------------------------------------


@rule(
    "PV-004", "No hardcoded chat template tokens",
    criterion="The body contains none of " + ", ".join(CHAT_TEMPLATE_TOKENS) + ".",
    remediation="Remove the token; the runtime applies each model's chat template itself.",
)
def check_template_tokens(definition: AgentDefinition) -> Iterator[Hit]:
    for index, line in enumerate(definition.body.split("\n")):
        for token in CHAT_TEMPLATE_TOKENS:
            if token in line:
                yield Hit(f"chat template token {token!r} in the body", body_line=index)


@rule(
    "PV-005", "No hardcoded CoT instructions unless reasoning_strategy is explicit_cot",
    criterion="No 'step by step', 'think through' or 'chain of thought' phrasing when the strategy is "
    "adaptive or none.",
    remediation="Remove the phrase and let the renderer inject reasoning per model, or set "
    "portability.reasoning_strategy: explicit_cot.",
)
def check_cot_phrases(definition: AgentDefinition) -> Iterator[Hit]:
    if definition.spec.portability.reasoning_strategy is ReasoningStrategy.EXPLICIT_COT:
        return
    for index, line in enumerate(lines_outside_fences(definition.body)):
        for match in COT_PHRASES.finditer(line):
            yield Hit(f"hard-coded reasoning instruction {match.group(0)!r} in the body", body_line=index)


# -- PV-006 … PV-010: the portability section ------------------------------------------------


def _model_remedy(name: str) -> str:
    suggestion = MODEL_SHORTHANDS.get(name.lower())
    if suggestion:
        return f"Write '{suggestion}' instead of the vendor shorthand {name!r}."
    return "Write the model as provider/model, e.g. anthropic/claude-sonnet-4 or openai/gpt-4o."


@rule(
    "PV-006", "Model preference uses portable format",
    criterion="Every portability.model_preferences entry (and the top-level model) is provider/model.",
    remediation="Write models as provider/model, e.g. anthropic/claude-sonnet-4, openai/gpt-4o.",
)
def check_model_format(definition: AgentDefinition) -> Iterator[Hit]:
    for index, name in enumerate(definition.spec.portability.model_preferences):
        if not MODEL_ID.match(name):
            yield Hit(f"model preference {name!r} is not in provider/model form",
                      field=("portability", "model_preferences", index), remediation=_model_remedy(name))
    model = definition.spec.model
    if model and model != "inherit" and not MODEL_ID.match(model):
        kind = "a vendor shorthand" if model.lower() in MODEL_SHORTHANDS else "not in provider/model form"
        yield Hit(f"model {model!r} is {kind}", field=("model",), remediation=_model_remedy(model),
                  severity=Severity.WARNING)


@rule(
    "PV-007", "Required features are declared",
    criterion="Tools imply tool_use and an output schema implies structured_output in "
    "capabilities.required_features.",
    remediation="List the feature under capabilities.required_features.",
)
def check_required_features(definition: AgentDefinition) -> Iterator[Hit]:
    spec = definition.spec
    declared = set(spec.capabilities.required_features)
    implied = []
    if spec.tools or spec.capabilities.allowed_tools:
        implied.append((Feature.TOOL_USE, "the agent has tools"))
    if spec.output.schema_ is not None:
        implied.append((Feature.STRUCTURED_OUTPUT, "the agent has an output schema"))
    for feature, reason in implied:
        if feature not in declared:
            yield Hit(f"{reason} but {feature.value!r} is not in capabilities.required_features",
                      field=("capabilities", "required_features"),
                      remediation=f"Add '{feature.value}' to capabilities.required_features.")


@rule(
    "PV-008", "Context window requirement is declared",
    criterion="portability.minimum_context_window is set to a positive integer.",
    remediation="Set portability.minimum_context_window to the tokens the agent needs, e.g. 16000.",
)
def check_context_window(definition: AgentDefinition) -> Iterator[Hit]:
    window = definition.spec.portability.minimum_context_window
    if window is None:
        yield Hit("portability.minimum_context_window is not set", field=("portability",))
    elif window <= 0:
        yield Hit(f"portability.minimum_context_window must be positive, got {window}",
                  field=("portability", "minimum_context_window"))


@rule(
    "PV-009", "Body format is declared",
    criterion="portability.body_format is xml, markdown or rccf.",
    remediation="Set portability.body_format (markdown is the portable default).",
)
def check_body_format(definition: AgentDefinition) -> Iterator[Hit]:
    if definition.spec.portability.body_format is None:
        detected = definition.source.detected_body_format.value
        yield Hit(f"portability.body_format is not set (the body looks like {detected})",
                  field=("portability",), remediation=f"Add 'body_format: {detected}' under portability.")


@rule(
    "PV-010", "Portability flag is set",
    criterion="portability.enabled is true.",
    remediation="Set portability.enabled: true once the definition follows PV-001…PV-009.",
)
def check_enabled(definition: AgentDefinition) -> Iterator[Hit]:
    if not definition.portable:
        yield Hit("portability is not enabled (single-provider legacy agent)", field=("portability", "enabled"))


# -- rosetta's own rules ---------------------------------------------------------------------


CUSTOM_SECTIONS = frozenset({"validation", "constitution", "metadata", "changelog"})
"""Extension sections seen in real agent files: kept as written, never taken for misspellings."""


@rule(
    "RS-001", "Unknown top-level section looks like a misspelled field",
    criterion="Unknown top-level sections are kept, but none is a near-miss of a schema field.",
    remediation="Rename the section to the schema field, or keep it if it is a deliberate extension.",
    portability=False, severity=Severity.WARNING,
)
def check_misspelled_sections(definition: AgentDefinition) -> Iterator[Hit]:
    known = [field.alias or name for name, field in AgentSpec.model_fields.items()]
    for name in definition.spec.extensions:
        if name in CUSTOM_SECTIONS:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        if close:
            yield Hit(f"unknown section {name!r} is kept as an extension; did you mean {close[0]!r}?",
                      field=(name,), remediation=f"Rename {name!r} to {close[0]!r} if that is what you meant.")


@rule(
    "RS-002", "Input rules name declared inputs",
    criterion="Every guardrails.input_validation[].field is one of the declared inputs.",
    remediation="Fix the field name, or declare the input under `inputs`.",
    portability=False,
)
def check_input_rule_fields(definition: AgentDefinition) -> Iterator[Hit]:
    declared = list(definition.spec.inputs) or ["request"]
    for index, input_rule in enumerate(definition.spec.guardrails.input_validation):
        if input_rule.field is not None and input_rule.field not in declared:
            close = difflib.get_close_matches(input_rule.field, declared, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; inputs are {', '.join(declared)}"
            yield Hit(f"input rule applies to {input_rule.field!r}, which is not an input{hint}",
                      field=("guardrails", "input_validation", index, "field"))
