"""The provider-neutral IR: what an agent asks of any model, with no provider syntax in it.

``lower(definition)`` turns a loaded :class:`AgentDefinition` into a frozen :class:`Signature`:
instructions (the body's RCCF sections plus identity, forbidden actions and output rules), typed
inputs, the output schema (and a pydantic model built from it on demand), tools and demos.
Renderers consume only this; ``Signature.to_dspy()`` hands the same contract to DSPy.
"""

from __future__ import annotations

import hashlib
import json
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from rosetta.definition.document import AgentDefinition, Section
from rosetta.definition.models import (
    DEFAULT_INPUT,
    BodyFormat,
    Feature,
    GenerationParams,
    ReasoningStrategy,
)
from rosetta.definition.vocabulary import RCCFRole
from rosetta.definition.yaml_source import format_path
from rosetta.errors import DefinitionError, Problem, UsageError
from rosetta.parts import Demo, InputField, ToolSpec, deeper_than

_JSON_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "object": dict, "array": list}


class Signature(BaseModel):
    """Everything a renderer needs, and nothing provider-specific."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, ignored_types=(cached_property,))

    name: str
    version: str | None = None
    description: str = ""
    role: str | None = None
    expertise: tuple[str, ...] = ()
    cognitive_mode: str | None = None
    tone: str | None = None
    communication_style: str | None = None
    audience_level: str | None = None
    instructions: tuple[Section, ...] = ()
    forbidden_actions: tuple[str, ...] = ()
    output_rules: tuple[str, ...] = ()
    inputs: tuple[InputField, ...] = (InputField(name=DEFAULT_INPUT),)
    output_schema: dict[str, Any] | None = None
    output_required: bool = False
    output_levels: tuple[str, ...] = ()
    output_location: str | None = None
    output_template: str | None = None
    """The text of the file ``output.template`` names, rendered into the Format section."""
    tools: tuple[ToolSpec, ...] = ()
    host_tools: tuple[str, ...] = ()
    """Tools the agent expects its host to provide (Claude Code's Read, Bash, MCP tools…): named in
    allowed_tools, with no schema in ``tools``; no request rosetta sends can carry them."""
    demos: tuple[Demo, ...] = ()
    demo_range: tuple[int, int] = (0, 0)
    reasoning_strategy: ReasoningStrategy = ReasoningStrategy.ADAPTIVE
    body_format: BodyFormat = BodyFormat.MARKDOWN
    generation_params: dict[str, GenerationParams] = {}
    minimum_context_window: int | None = None
    required_features: tuple[Feature, ...] = ()
    extensions: dict[str, Any] = {}
    """The definition's fields rosetta does not know, by dotted path, carried as written."""
    source_sha256: str = ""

    @cached_property
    def output_model(self) -> type[BaseModel] | None:
        """A pydantic model of the output schema (None for free-text agents)."""
        if self.output_schema is None:
            return None
        from rosetta.schema_types import model_from_schema

        return model_from_schema(self.output_schema, name=_class_name(self.name) + "Output")

    def to_dspy(self) -> Any:
        """A real ``dspy.Signature`` subclass: one typed input field per input, one typed output field
        per top-level property of the output schema (:meth:`dspy_outputs`), and instructions carrying
        the role, expertise, the definition's sections (output-format ones left to DSPy when there is
        an output schema: :meth:`dspy_instructions`) and its forbidden actions.

        To run it on the embedded model (``dspy.LM("local/gemma-3-270m")``), register the ``local/``
        provider with litellm first: ``rosetta.local.provider.register()``.
        """
        from rosetta.third_party import import_dspy

        dspy = import_dspy()

        fields: dict[str, tuple[Any, Any]] = {}
        for field in self.inputs:
            annotation = _JSON_TYPES.get(field.type, str)
            if not field.required:
                annotation = annotation | None
            fields[field.name] = (annotation, dspy.InputField(desc=field.description or field.name))
        for name, (annotation, description) in self.dspy_outputs().items():
            fields[name] = (annotation, dspy.OutputField(desc=description))
        return dspy.make_signature(fields, self.dspy_instructions(),
                                   signature_name=_class_name(self.name) + "Signature")

    def to_dspy_program(self) -> Any:
        """``dspy.Predict`` over :meth:`to_dspy` with the definition's demos attached as ``dspy.Example``s."""
        from rosetta.third_party import import_dspy

        dspy = import_dspy()

        program = dspy.Predict(self.to_dspy())
        program.demos = [self.dspy_example(demo.inputs, demo.output) for demo in self.demos]
        return program

    def dspy_outputs(self) -> dict[str, tuple[Any, str]]:
        """DSPy's output fields: name → (type, description). One per top-level property of an object
        output schema (typed from the schema); a single ``answer`` field when the output is not an
        object with properties, or a property name cannot be a DSPy field (not an identifier, or an
        input's name). DSPy's adapters keep each field's type (an enum as a Literal, a nested object
        as its model) but build their JSON schema from the bare types, so a top-level field's own
        limits (maxLength, minimum) are not enforced through DSPy: :meth:`output_from_dspy` validates
        what it returns against the schema, as rosetta's runtime does."""
        schema = self.output_schema if isinstance(self.output_schema, dict) else {}
        properties = schema.get("properties") if schema.get("type") == "object" else None
        model = self.output_model
        names = {field.name for field in self.inputs}
        if not properties or model is None or any(not str(n).isidentifier() or n in names for n in properties):
            return {"answer": (model or str, "The answer, following the output schema." if model else "The answer.")}
        by_name = {(info.alias or name): info for name, info in model.model_fields.items()}
        return {name: (by_name[name].annotation, str(spec.get("description") or name))
                for name, spec in properties.items() if name in by_name}

    def dspy_instructions(self) -> str:
        """The instructions DSPy gets: who the agent is ("You are a Vulnerability Triage Analyst."),
        the definition's sections, each under its own title (``Constraints:``; text before the first
        heading stays untitled), and what it must never do.

        Sections whose RCCF role is the output format are left out when the agent has an output
        schema (:meth:`_dspy_formats_output`): DSPy then owns the answer's format. It asks for one
        ``[[ ## field ## ]]`` block per output field (ChatAdapter) or for its own JSON object
        (JSONAdapter) and parses exactly that, so the definition's "Return one JSON object ... no
        prose outside it" would contradict the adapter and get a model to answer in neither shape;
        what the fields mean travels in their descriptions (:meth:`dspy_outputs`). A free-text agent
        (no schema, or a plain string schema) keeps its format sections: DSPy only wraps its text in
        one ``answer`` field, and those sections are the only description of what that text holds
        (a markdown report's parts, say)."""
        parts = []
        if self.role:
            parts.append(_role_sentence(self.role) + (f" Expertise: {', '.join(self.expertise)}." if self.expertise
                                                      else ""))
        left_to_dspy = self._dspy_formats_output()
        for section in self.instructions:
            content = section.content.strip("\n")
            if not content.strip() or (left_to_dspy and section.role == RCCFRole.FORMAT):
                continue
            parts.append(f"{_heading(section.title)}\n{content}" if section.title.strip() else content)
        if self.forbidden_actions:
            parts.append("Never:\n" + "\n".join(f"- {action}" for action in self.forbidden_actions))
        return "\n\n".join(parts) or self.description or self.name

    def _dspy_formats_output(self) -> bool:
        """Whether DSPy's output fields carry the answer's structure: the agent has an output schema
        whose answer is JSON data, not plain text (a schema of ``type: string``)."""
        return isinstance(self.output_schema, dict) and self.output_schema.get("type") != "string"

    def dspy_example(self, inputs: dict[str, Any], output: Any, **extra: Any) -> Any:
        """A ``dspy.Example`` of ``inputs`` and rosetta's ``output``, split into DSPy's output fields."""
        from rosetta.third_party import import_dspy

        dspy = import_dspy()

        outputs = self.dspy_outputs()
        values = {"answer": output} if list(outputs) == ["answer"] else {
            name: output.get(name) for name in outputs if isinstance(output, dict) and name in output}
        names = [field.name for field in self.inputs if field.name in inputs]
        return dspy.Example(**inputs, **values, **extra).with_inputs(*names)

    def output_from_dspy(self, prediction: Any, *, validate: bool = True) -> Any:
        """rosetta's output from a DSPy prediction or example: its output fields as plain JSON data
        (an unparsed answer as the text it was), validated against the output schema.

        DSPy's adapters parse each field into its type but do not enforce the schema's own limits (a
        number's range, a string's length or pattern, required fields), so an answer rosetta's
        runtime would refuse can come back from DSPy. Such an output raises :class:`UsageError`,
        one problem per failing field with what the schema expects and what the prediction holds.
        ``validate=False`` returns the output as it is (a scorer that must go on past one bad
        prediction reads :meth:`dspy_output_problems` instead of catching). Free-text agents (no
        output schema) are not validated."""
        output = self._output_from_dspy(prediction)
        if validate:
            problems = self._output_problems(output)
            if problems:
                shown = problems[:_MAX_PROBLEMS]
                more = len(problems) - len(shown)
                raise UsageError([
                    Problem(f"{self.name}: the DSPy prediction does not fit the agent's output schema"
                            + (f" ({len(problems)} problems, {more} not listed)" if more else ""),
                            hint="DSPy does not enforce the schema's limits; ask the model again, or read the "
                                 "output anyway with output_from_dspy(prediction, validate=False)"),
                    *shown])
        return output

    def dspy_output_problems(self, prediction: Any) -> list[Problem]:
        """What is wrong with a DSPy prediction's output against the output schema, one problem per
        failing field (none for a valid one, or a free-text agent): :meth:`output_from_dspy`'s check,
        for a caller that scores predictions rather than stopping at the first bad one."""
        return self._output_problems(self._output_from_dspy(prediction))

    def _output_from_dspy(self, prediction: Any) -> Any:
        names = list(self.dspy_outputs())
        if names == ["answer"]:
            return _plain_data(getattr(prediction, "answer", None), parse=True)
        values = {name: _plain_data(prediction.get(name) if hasattr(prediction, "get") else
                                    getattr(prediction, name, None)) for name in names}
        required = set((self.output_schema or {}).get("required") or ())
        return {name: value for name, value in values.items() if value is not None or name in required}

    def _output_problems(self, output: Any) -> list[Problem]:
        """``output``'s schema violations, one problem per violation with the field it is about
        (``items[1].name``), checked as the runtime checks an answer (``pattern`` searched under a
        time limit)."""
        if self.output_schema is None:
            return []
        from rosetta.definition.patterns import schema_validator

        if deeper_than(output, _MAX_DEPTH):
            return [Problem(f"the output nests JSON more than {_MAX_DEPTH} levels deep", field="output")]
        validator = schema_validator(json.dumps(self.output_schema, sort_keys=True))
        errors = sorted(validator.iter_errors(output), key=lambda e: ([str(p) for p in e.absolute_path], e.message))
        return [Problem(_violation(error), field=_field_path(error.absolute_path) or "output") for error in errors]


_MAX_PROBLEMS = 20
"""Problems one refused prediction lists (the rest are counted), as a correction lists issues."""
_MAX_DEPTH = 64
"""Deeper output is not validated: jsonschema recurses once per level (the runtime's limit too)."""

_DETERMINERS = frozenset({"a", "an", "the", "your", "our", "my", "their", "his", "her", "its", "this", "that",
                          "one", "some", "any", "every", "each"})
"""A role that starts with one of these already has its article: "You are the on-call lead."."""


def _violation(error: Any) -> str:
    """What a jsonschema error says the schema wants, never the value the prediction holds (a model's
    answer may quote a credential, and this text goes into an exception)."""
    if error.validator == "required":
        return f"is missing a required field ({error.message.split(' is a required property')[0]})"[:300]
    wanted = json.dumps(error.validator_value, ensure_ascii=False, default=str)
    return f"breaks the schema's {error.validator!r}: {wanted if len(wanted) <= 200 else wanted[:199] + '…'}"


def _role_sentence(role: str) -> str:
    """"You are a Vulnerability Triage Analyst." / "an Incident Responder": an article before the
    role unless its first word is one already (or a determiner, a possessive), and no second
    period after a role that ends a sentence itself. A role that starts with an article is kept as
    written ("An Expert", "The Guardian": it may be a name). The article follows the first letter
    (a, e, i, o, u take "an"), not its sound, so "an Unix admin" and "a hour" are the rule's misses;
    a definition that minds them writes its role with the article."""
    role = " ".join(role.split())
    first = role.split(" ", 1)[0].lower().strip("\"'“‘(")
    if first not in _DETERMINERS:
        role = ("an " if role[:1].lower() in "aeiou" else "a ") + role
    return f"You are {role}" + ("" if role[-1] in ".!?…" else ".")


def _heading(title: str) -> str:
    """A section's title as the line above its content: ``Constraints:``."""
    title = " ".join(title.split())
    return title if title[-1] in ":.?!" else title + ":"


def _field_path(parts: Any) -> str:
    """``category``, ``affected[0].ecosystem``: where in the output a problem is."""
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _plain_data(value: Any, *, parse: bool = False) -> Any:
    """``value`` as JSON data: pydantic models dumped, and with ``parse`` a JSON string parsed."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_none=True)
    if parse and isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _class_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace("-", "_").replace(".", "_").split("_") if part)


def lower(definition: AgentDefinition, *, demos: tuple[Demo, ...] | None = None) -> Signature:
    """The provider-neutral signature of a loaded definition (demos read from examples_ref if not given)."""
    spec = definition.spec
    inputs = tuple(
        InputField(name=name, type=item.type, description=item.description, required=item.required)
        for name, item in spec.inputs.items()
    ) or (InputField(name=DEFAULT_INPUT, description="The request to handle."),)
    few_shot = spec.portability.few_shot
    if demos is None:
        demos = load_demos(definition, inputs) if few_shot.enabled and few_shot.examples_ref else ()
    return Signature(
        name=spec.name,
        version=spec.version,
        description=spec.description,
        role=spec.identity.role,
        expertise=tuple(spec.identity.expertise),
        cognitive_mode=spec.identity.cognitive_mode,
        tone=spec.persona.tone,
        communication_style=spec.persona.communication_style,
        audience_level=spec.persona.audience_level,
        instructions=definition.sections,
        forbidden_actions=tuple(spec.capabilities.forbidden_actions),
        output_rules=spec.guardrails.output_rule_texts(),
        inputs=inputs,
        output_schema=spec.output.schema_,
        output_required=spec.output.required,
        output_levels=tuple(spec.output.levels),
        output_location=spec.output.location,
        output_template=_read_template(definition),
        tools=tuple(ToolSpec(name=t.name, description=t.description, parameters=_with_required(t)) for t in spec.tools),
        host_tools=tuple(name for name in spec.capabilities.allowed_tools if name not in {t.name for t in spec.tools}),
        demos=demos,
        demo_range=(few_shot.count_range.min, few_shot.count_range.max) if few_shot.enabled else (0, 0),
        reasoning_strategy=spec.portability.reasoning_strategy,
        body_format=definition.body_format,
        generation_params=dict(spec.generation_params),
        minimum_context_window=spec.portability.minimum_context_window,
        required_features=tuple(spec.capabilities.required_features),
        extensions={**{format_path(path): value for path, value in spec.unknown_fields().items()},
                    **{format_path(unread.path): unread.value for unread in definition.source.unread}},
        source_sha256=source_digest(definition),
    )


def _with_required(tool: Any) -> dict[str, Any]:
    """Tool parameters with the tool-level ``required`` list folded into the schema."""
    parameters = dict(tool.parameters)
    if tool.required:
        merged = list(parameters.get("required", []))
        merged += [name for name in tool.required if name not in merged]
        parameters["required"] = merged
    return parameters


def source_digest(definition: AgentDefinition) -> str:
    """sha256 over every file the definition was merged from (names excluded: moves don't matter)."""
    from rosetta.fileio import read_source_bytes

    digest = hashlib.sha256()
    for file in definition.source.files:
        digest.update(read_source_bytes(file))
        digest.update(b"\0")
    return digest.hexdigest()


def load_demos(definition: AgentDefinition, inputs: tuple[InputField, ...]) -> tuple[Demo, ...]:
    """Demos from the definition's examples file: JSON lines of ``{"id"?, "inputs": {...}, "output": ...}``;
    none when the file was found nowhere (lint reports it)."""
    found = definition.source.references.get("portability.few_shot.examples_ref")
    if found is None:
        return ()
    path = Path(found)
    names = {field.name for field in inputs}
    demos = []
    for number, line in enumerate(_read_examples(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            too_deep = deeper_than(row, MAX_EXAMPLE_DEPTH)
        except json.JSONDecodeError as exc:
            raise DefinitionError.at(f"invalid JSON: {exc.msg}", file=path, line=number, column=exc.colno) from None
        except RecursionError:  # the decoder's own limit, far deeper than ours
            too_deep = True
        if too_deep:
            raise DefinitionError.at(f"the example nests lists and objects more than {MAX_EXAMPLE_DEPTH} levels deep",
                                     file=path, line=number, hint="flatten the example")
        if not is_text(row):
            raise DefinitionError.at("the example holds a lone surrogate escape (such as \\ud800), which is no "
                                     "character: it cannot be sent or shown", file=path, line=number,
                                     hint="write the character itself, or its full surrogate pair")
        if not isinstance(row, dict) or not isinstance(row.get("inputs"), dict) or "output" not in row:
            raise DefinitionError.at(
                "each example must be an object with 'inputs' (an object) and 'output'", file=path, line=number,
                hint='e.g. {"id": "ex1", "inputs": {"report": "..."}, "output": {"severity": "high"}}',
            )
        unknown = set(row["inputs"]) - names
        if unknown:
            raise DefinitionError.at(
                f"example uses undeclared inputs {sorted(unknown)}", file=path, line=number,
                hint=f"the agent's inputs are {sorted(names)}",
            )
        demos.append(Demo(id=str(row.get("id", f"{path.stem}-{number}")), inputs=row["inputs"], output=row["output"]))
    return tuple(demos)


def is_text(value: Any) -> bool:
    """Whether every string in a JSON value is text UTF-8 can carry (JSON's ``\\ud800`` escape decodes
    to a lone surrogate, which no encoder writes: a render, a log line or a request would fail)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


MAX_EXAMPLES_BYTES = 10_000_000
"""Largest examples file read: demos are a prompt's worth of text, labeled data lives in datasets/."""
MAX_EXAMPLE_DEPTH = 64
"""Deepest nesting of one example (the YAML nesting limit): JSON's encoder and decoder recurse per level."""


MAX_TEMPLATE_BYTES = 64 * 1024
"""Largest output template rendered: a document skeleton, not a document."""


def _read_template(definition: AgentDefinition) -> str | None:
    """The output template's text; None when the definition names none or it was found nowhere."""
    from rosetta.definition.frontmatter import decode
    from rosetta.fileio import read_source_bytes

    found = definition.source.references.get("output.template")
    if found is None:
        return None
    path = Path(found)
    try:
        size = path.stat().st_size
        if size > MAX_TEMPLATE_BYTES:
            raise DefinitionError.at(f"output template is {size:,} bytes; the limit is {MAX_TEMPLATE_BYTES:,}",
                                     file=path, hint="keep the template to the skeleton of the answer")
        return decode(read_source_bytes(path, limit=MAX_TEMPLATE_BYTES), path)
    except OSError as exc:
        raise DefinitionError.at(f"cannot read the output template: {exc.strerror or exc}", file=path) from None


def _read_examples(path: Path) -> str:
    """The examples file as text, or a located error saying why it cannot be read."""
    from rosetta.definition.frontmatter import decode
    from rosetta.fileio import read_source_bytes

    try:
        size = path.stat().st_size
        if size > MAX_EXAMPLES_BYTES:
            raise DefinitionError.at(f"examples file is {size:,} bytes; the limit is {MAX_EXAMPLES_BYTES:,}", file=path,
                                     hint="keep a few demos here; put labeled data under datasets/")
        return decode(read_source_bytes(path, limit=MAX_EXAMPLES_BYTES), path)  # a FIFO is refused, not waited on
    except OSError as exc:
        raise DefinitionError.at(f"cannot read the examples file: {exc.strerror or exc}", file=path) from None
