"""The static portability criteria PV-001…PV-010 (ADR-003 §5) and rosetta's own RS rules.

Each check reads a loaded definition and yields hits; the registry decides severity and location.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from pathlib import Path

from rosetta.definition.document import KEPT_AS_WRITTEN, AgentDefinition
from rosetta.definition.formats import CLAUDE_CODE_FIELDS, SIDECAR_SUFFIXES, stem_of
from rosetta.definition.models import PROVIDER_API_PARAMS, Feature, ReasoningStrategy
from rosetta.definition.patterns import PatternError, shown
from rosetta.definition.schema_shape import subschemas
from rosetta.definition.sections import lines_outside_fences
from rosetta.definition.spec_errors import known_fields, nested_fields
from rosetta.definition.vocabulary import AgentFormat
from rosetta.definition.yaml_source import format_path
from rosetta.lint.metaschema import metaschema_errors
from rosetta.lint.reasoning import reasoning_instructions
from rosetta.lint.redos import TooComplex, find_hazard
from rosetta.lint.registry import Hit, Severity, rule

CHAT_TEMPLATE_TOKENS = (
    "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
    "[INST]", "[/INST]", "<<SYS>>", "<</SYS>>",
    "<start_of_turn>", "<end_of_turn>",
    "<|system|>", "<|user|>", "<|assistant|>", "<|end|>",
    "<|im_start|>", "<|im_end|>",
)
"""Chat-template control tokens of the common open-model families (PV-004)."""

MODEL_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.:@/+-]*$")
"""The portable ``provider/model`` form (PV-006)."""

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
                if isinstance(name, str) and name not in properties:  # other names: the metaschema said
                    yield Hit(f"tool {tool.name!r}: required parameter {name!r} is not in properties",
                              field=("tools", index, "required") if name in tool.required else (*base, "required"))


@rule(
    "PV-003", "Output schema is JSON Schema",
    criterion="output.schema, when given, validates against the JSON Schema metaschema. (output.required "
    "without a schema is the persisted-output pattern: free text at output.levels, saved at output.location.)",
    remediation="Fix output.schema so it is a valid JSON Schema (draft 2020-12 unless $schema says otherwise).",
)
def check_output_schema(definition: AgentDefinition) -> Iterator[Hit]:
    schema = definition.spec.output.schema_
    for path, message in metaschema_errors(schema) if schema is not None else ():
        yield Hit(message, field=("output", "schema", *path))


# -- PV-004 / PV-005: the body ---------------------------------------------------------------


@rule(
    "PV-004", "No hardcoded chat template tokens",
    criterion="The body contains none of " + ", ".join(CHAT_TEMPLATE_TOKENS) + ".",
    remediation="Remove the token; the runtime applies each model's chat template itself.",
)
def check_template_tokens(definition: AgentDefinition) -> Iterator[Hit]:
    body, found = definition.body, set()
    for order, token in enumerate(CHAT_TEMPLATE_TOKENS):  # searched in the whole body: no loop per line
        position = line = counted = 0
        while (position := body.find(token, position)) != -1:
            line += body.count("\n", counted, position)
            counted, position = position, position + 1
            found.add((line, order))
    for line, order in sorted(found):  # once per line and token, in line order
        yield Hit(f"chat template token {CHAT_TEMPLATE_TOKENS[order]!r} in the body", body_line=line)


@rule(
    "PV-005", "No hardcoded CoT instructions unless reasoning_strategy is explicit_cot",
    criterion="No instruction to the model to reason out loud or before answering ('think step by step', "
    "\"let's reason through this\", 'show your chain of thought') when the strategy is adaptive or none; "
    "domain prose ('step-by-step runbooks') is not one.",
    remediation="Remove the instruction and let the renderer inject reasoning per model, or set "
    "portability.reasoning_strategy: explicit_cot.",
)
def check_cot_phrases(definition: AgentDefinition) -> Iterator[Hit]:
    if definition.spec.portability.reasoning_strategy is ReasoningStrategy.EXPLICIT_COT:
        return
    for index, line in enumerate(lines_outside_fences(definition.body)):
        if line.isspace() or not line:
            continue
        for phrase in reasoning_instructions(line):
            yield Hit(f"hard-coded reasoning instruction {phrase!r} in the body", body_line=index)


# -- PV-006 … PV-010: the portability section ------------------------------------------------


CLAUDE_CODE_MODELS = frozenset({"sonnet", "opus", "haiku", "inherit"})
"""What Claude Code accepts in a subagent's ``model:`` (besides full ``claude-…`` ids)."""


def _portable_name(name: str) -> str | None:
    """The catalog's ``provider/model`` spelling of a shorthand such as ``sonnet``, if it knows one."""
    from rosetta.providers.catalog import load_catalog

    model = load_catalog().names().get(name.lower())
    if model is None:
        return None
    return min((n for n in (model.id, *model.aliases) if "/" in n), key=len)


def _model_remedy(name: str) -> str:
    suggestion = _portable_name(name)
    if suggestion:
        return f"Write '{suggestion}' instead of the vendor shorthand {name!r}."
    return "Write the model as provider/model, e.g. anthropic/claude-sonnet-5-5 or openai/gpt-5.6."


@rule(
    "PV-006", "Model preference uses portable format",
    criterion="Every portability.model_preferences entry (and the top-level model) is provider/model; a "
    "Claude Code subagent keeps Claude Code's own model values.",
    remediation="Write models as provider/model, e.g. anthropic/claude-sonnet-5-5, openai/gpt-5.6.",
)
def check_model_format(definition: AgentDefinition) -> Iterator[Hit]:
    preferences = definition.spec.portability.model_preferences
    for index, name in enumerate(preferences):
        if not MODEL_ID.match(name):
            yield Hit(f"model preference {name!r} is not in provider/model form",
                      field=("portability", "model_preferences", index), remediation=_model_remedy(name))
    model = definition.spec.model
    claude_code = definition.source.format is AgentFormat.CLAUDE_CODE
    if not model or MODEL_ID.match(model) or (model == "inherit" and not claude_code):
        return
    if claude_code and (model in CLAUDE_CODE_MODELS or model.startswith("claude-")):
        if not preferences:  # valid Claude Code: say where the portable list goes, never to change it
            sidecar = stem_of(Path(definition.source.path)) + SIDECAR_SUFFIXES[0]
            yield Hit(f"model {model!r} is Claude Code's own value; with no portability.model_preferences, "
                      "`rosetta compile` targets the project's default models",
                      field=("model",), severity=Severity.INFO,
                      remediation=f"Keep it for Claude Code; list the models to compile for under "
                      f"portability.model_preferences in a governance sidecar, {sidecar}.")
        return
    kind = "a vendor shorthand" if _portable_name(model) else "not in provider/model form"
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


EXAMPLES_REF = ("portability", "few_shot", "examples_ref")
NEAR_MISS_CHECKS = 1_000
"""Unknown fields compared with the known ones, per definition; beyond that many a definition is
data, not a typo, and comparing each would cost seconds."""
CUSTOM_SECTIONS = frozenset({"validation", "constitution", "metadata", "changelog", "mode", "permission"})
"""Extension sections seen in real agent files (OpenCode's and Copilot's ``mode``, OpenCode's
``permission``): kept as written, never taken for misspellings."""


def _belongs_at(path: tuple) -> str | None:
    """The known field an unknown key most likely meant: a near-miss among its siblings, or a field
    of that name (or a near-miss of it) deeper in the same section, e.g. top-level ``examples`` →
    ``portability.few_shot.examples_ref``."""
    key, parent = str(path[-1]), path[:-1]
    if key in CUSTOM_SECTIONS:
        return None
    close = difflib.get_close_matches(key, known_fields(parent), n=1, cutoff=0.75)
    if close:
        return format_path((*parent, close[0]))
    deeper = {path[-1]: path for path in nested_fields(parent) if len(path) > 1}
    close = difflib.get_close_matches(key, list(deeper), n=1, cutoff=0.8)
    return format_path((*parent, *deeper[close[0]])) if close else None


@rule(
    "RS-001", "Unknown fields are kept; near-misses are reported",
    criterion="Fields rosetta does not know are kept (spec.unknown_fields(), carried into compiled artifacts); "
    "none is a near-miss or a misplacement of a known field.",
    remediation="Rename or move the field if a known one was meant; otherwise it is a deliberate extension.",
    portability=False, severity=Severity.WARNING,
)
def check_unknown_fields(definition: AgentDefinition) -> Iterator[Hit]:
    claude_code = definition.source.format is AgentFormat.CLAUDE_CODE
    for count, path in enumerate(definition.spec.unknown_fields()):
        name = path[-1]
        if name in PROVIDER_API_PARAMS or (claude_code and len(path) == 1 and name in CLAUDE_CODE_FIELDS):
            continue  # PV-001 reports the first; Claude Code reads the second
        meant = _belongs_at(path) if count < NEAR_MISS_CHECKS else None
        if meant is None:
            yield Hit(f"unknown field {name!r} is kept as an extension", field=path, severity=Severity.INFO,
                      remediation="Nothing to do if it is deliberate: rosetta keeps it and does not use it.")
        elif meant == format_path(EXAMPLES_REF):
            yield Hit(f"unknown field {name!r}: few-shot examples are read from the file named by {meant}",
                      field=path, remediation="Move the examples to a JSON-lines file, one "
                      '{"inputs": {...}, "output": ...} per line, and set portability.few_shot.examples_ref '
                      "to its path (and few_shot.enabled: true).")
        else:
            yield Hit(f"unknown field {name!r} is kept as an extension; did you mean {meant!r}?", field=path,
                      remediation=f"Rename or move it to {meant} if that is what you meant.")


@rule(
    "RS-002", "Input rules are enforced",
    criterion="Every guardrails.input_validation rule is a regular expression on a declared input (or on every "
    "text input), which rosetta checks before each call.",
    remediation="Point the rule at a declared input (`field:` or the rule name), or check the precondition in "
    "the caller: rosetta keeps it but does not enforce it.",
    portability=False, severity=Severity.WARNING,
)
def check_input_rules(definition: AgentDefinition) -> Iterator[Hit]:
    declared = definition.spec.input_names
    for index, input_rule in enumerate(definition.spec.guardrails.input_validation):
        reason = input_rule.unenforced(declared)
        if reason:
            name = input_rule.rule or input_rule.field or f"rule {index + 1}"
            close = difflib.get_close_matches(name, declared, n=1)
            named_nothing = input_rule.target(declared) is None and input_rule.precondition is None
            yield Hit(f"input rule {name!r} is not enforced: {reason}"
                      + (f"; did you mean {close[0]!r}?" if close and named_nothing else ""),
                      field=definition.input_rule_path(index))


@rule(
    "RS-003", "Values are in their field's known set",
    criterion="Enumerated fields hold one of their known values.",
    remediation="Use one of the known values, or keep yours if rosetta's handling (in the message) is what you want.",
    portability=False, severity=Severity.WARNING,
)
def check_off_list_values(definition: AgentDefinition) -> Iterator[Hit]:
    for value in definition.source.off_list:
        field_name = next(str(p) for i, p in reversed(list(enumerate(value.path)))
                          if isinstance(p, str) and p in known_fields(value.path[:i]))
        close = difflib.get_close_matches(str(value.value), value.known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(value.known)}"
        yield Hit(f"{value.value!r} is not a known {field_name} value: rosetta {value.used}{hint}",
                  field=value.path, severity=Severity.INFO if value.used == KEPT_AS_WRITTEN else None)


@rule(
    "RS-009", "Known fields are written in a shape rosetta reads",
    criterion="Every known field holds a shape rosetta reads; one it cannot read is kept as written (compiled "
    "artifacts carry it) and not used.",
    remediation="Rewrite the field in one of the shapes named in the message, or rename it if it is an extension.",
    portability=False, severity=Severity.WARNING,
)
def check_unread_shapes(definition: AgentDefinition) -> Iterator[Hit]:
    for value in definition.source.unread:
        field_name = format_path(value.path)
        yield Hit(f"{field_name} is {value.found}, which rosetta does not read there (expected {value.expected}): "
                  f"kept as written, not used; rosetta {value.used}", field=value.path)


def _shown_path(path: str) -> str:
    """``path`` relative to the working directory when it lies below it (shorter in a CI log)."""
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


@rule(
    "RS-010", "Referenced files are found",
    criterion="Every file the definition names (output.template, few_shot.examples_ref) is found next to it, in a "
    "folder above it up to the project root, or at the repository root.",
    remediation="Create the file or fix the path; until then the agent renders without it.",
    portability=False, severity=Severity.WARNING,
)
def check_missing_references(definition: AgentDefinition) -> Iterator[Hit]:
    for missing in definition.source.missing_references:
        if missing.why:
            yield Hit(f"{format_path(missing.path)} {missing.reference!r}: {missing.why}; the agent renders without it",
                      field=missing.path)
            continue
        tried = ", ".join(_shown_path(t) for t in missing.tried) or "nowhere inside the project"
        yield Hit(f"{format_path(missing.path)} {missing.reference!r} was not found (tried {tried}); the agent "
                  "renders without it", field=missing.path)


def _has_labeled_data(definition: AgentDefinition) -> bool:
    """Whether `rosetta compile --optimize` has train rows to pick demos from: its evaluation.dataset,
    else ``<datasets_dir>/<agent>/`` of the project it belongs to."""
    from rosetta.errors import RosettaError
    from rosetta.settings import load_settings

    if definition.spec.evaluation.dataset:
        return True
    try:
        datasets = load_settings(Path(definition.source.path).parent).datasets_dir
    except RosettaError:  # unusable settings: `rosetta validate` reports them on their own
        return False
    return (datasets / definition.name).is_dir()


@rule(
    "RS-004", "Few-shot examples are readable",
    criterion="portability.few_shot.enabled comes with an examples_ref to read the examples from.",
    remediation="Set portability.few_shot.examples_ref to a JSON-lines file of examples, or few_shot.enabled: false.",
    portability=False, severity=Severity.WARNING,
)
def check_few_shot(definition: AgentDefinition) -> Iterator[Hit]:
    few_shot = definition.spec.portability.few_shot
    if few_shot.enabled and not few_shot.examples_ref and not _has_labeled_data(definition):
        yield Hit(f"few_shot.enabled is true but there are no examples to read: no examples_ref, and no labeled "
                  f"data (evaluation.dataset or datasets/{definition.name}/) for the optimizer to pick demos from",
                  field=("portability", "few_shot", "enabled"))
    elif few_shot.examples_ref and not few_shot.enabled:
        yield Hit(f"examples_ref {few_shot.examples_ref!r} is not used while few_shot.enabled is false",
                  field=EXAMPLES_REF, severity=Severity.INFO, remediation="Set few_shot.enabled: true to use them.")


@rule(
    "RS-005", "Preferred models are still served",
    criterion="No portability.model_preferences entry (nor the top-level model) names a model its vendor has "
    "retired (error) or has announced a retirement date for (warning).",
    remediation="Replace the model with the one the message names, then run `rosetta compile`.",
    portability=False,
)
def check_model_lifecycle(definition: AgentDefinition) -> Iterator[Hit]:
    from rosetta.providers.catalog import load_catalog

    catalog = load_catalog()
    names = catalog.names()
    named = [(("portability", "model_preferences", i), n)
             for i, n in enumerate(definition.spec.portability.model_preferences)]
    if definition.spec.model:
        named.append((("model",), definition.spec.model))
    for path, name in named:
        model = names.get(name.strip().lower())
        status = catalog.status(model) if model is not None else None
        if status is None or status.state == "current":
            continue  # unknown names are compile's to judge (they may be accepted unlisted models)
        yield Hit(status.describe(model.id) + ("" if name == model.id else f" ({name!r})"), field=path,
                  severity=Severity.WARNING if status.state == "deprecated" else None,
                  remediation=f"Write {status.replacement} instead of {name!r}, then run `rosetta compile`.")


@rule(
    "RS-006", "Regular expressions cannot backtrack catastrophically",
    criterion="Every regular expression of the definition (guardrails.input_validation pattern and reject; "
    "guardrails.output_filtering pattern; pattern and patternProperties in output.schema and tools[].parameters) compiles, nests groups at most 64 deep, and "
    "cannot match one piece of text in two ways inside a repeat, as (a+)+, (a|a)*, (.*a)* and (\\w+\\s?)+$ do: "
    "a failing search of those takes time exponential in the input's length.",
    remediation="Rewrite the expression so each character can be matched one way only: drop the inner repeat "
    "((a+)+ → a+), make alternatives and neighbouring repeats read different characters ((.*,)* → ([^,]*,)*), or "
    "use an atomic group (?>…) or a possessive repeat (a++). Input rules are searched for at most 0.25 s, and an "
    "input that takes longer is refused.",
    portability=False,
)
def check_expressions(definition: AgentDefinition) -> Iterator[Hit]:
    for field, pattern, is_input_rule in _expressions(definition):
        try:
            hazard = find_hazard(pattern)
        except PatternError as error:
            if is_input_rule:  # it compiled for the `regex` package that enforces it; `re` cannot read it
                yield Hit(f"expression {shown(pattern)} was not checked for catastrophic backtracking: {error}",
                          field=field, severity=Severity.INFO, remediation="Nothing to do if it is deliberate.")
            else:
                yield Hit(f"expression {shown(pattern)} cannot be used: {error}", field=field,
                          remediation="Fix the expression: JSON Schema patterns are Python regular expressions.")
        except TooComplex as error:
            yield Hit(f"expression {shown(pattern)} is too large to check for catastrophic backtracking ({error})",
                      field=field, severity=Severity.INFO, remediation="Nothing to do if it is deliberate.")
        else:
            if hazard is not None:
                yield Hit(f"expression {shown(pattern)} backtracks catastrophically: {hazard.describe()}", field=field)


def _expressions(definition: AgentDefinition) -> Iterator[tuple[tuple, str, bool]]:
    """(field path, expression, whether it is an input rule) for every regular expression written."""
    located = definition.source.locations
    for index, input_rule in enumerate(definition.spec.guardrails.input_validation):
        base = definition.input_rule_path(index)
        for key in ("pattern", "reject"):
            expression = getattr(input_rule, key)
            if expression is not None:
                short = key == "pattern" and (*base, key) not in located and input_rule.rule is not None
                yield ((*base, input_rule.rule) if short else (*base, key)), expression, True
    for index, output_rule in enumerate(definition.spec.guardrails.output_filtering):
        if not isinstance(output_rule, str) and output_rule.pattern is not None:  # searched on every answer
            yield ("guardrails", "output_filtering", index, "pattern"), output_rule.pattern, True
    schemas = [(("output", "schema"), definition.spec.output.schema_)]
    schemas += [(("tools", i, "parameters"), tool.parameters) for i, tool in enumerate(definition.spec.tools)]
    for base, schema in schemas:
        if not isinstance(schema, dict):
            continue
        for path, node in subschemas(schema):
            if isinstance(node.get("pattern"), str):
                yield (*base, *path, "pattern"), node["pattern"], False
            if isinstance(node.get("patternProperties"), dict):
                for name in node["patternProperties"]:
                    yield (*base, *path, "patternProperties", name), str(name), False
