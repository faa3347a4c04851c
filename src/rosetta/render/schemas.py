"""Output schemas rewritten for what each provider's structured-output API accepts.

Each adapter lists named transforms (``schema_transforms``); this module implements them once.
The agent's own schema is never changed: rosetta validates answers against the original, so a
constraint moved into a description here is still enforced after the call. What a provider
cannot express is an error naming the keyword, its path and the provider, raised at render
time rather than by the provider's API; what a provider would silently ignore is dropped here
with a warning.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rosetta.definition.schema_shape import children, shape_problem
from rosetta.errors import Problem, RenderError
from rosetta.providers.kinds import SchemaTransform

if TYPE_CHECKING:
    from rosetta.definition.yaml_source import FieldPath

Schema = dict[str, Any]
Warnings = list[str]

_CONSTRAINTS = {
    "minimum": "minimum {}", "maximum": "maximum {}", "exclusiveMinimum": "greater than {}",
    "exclusiveMaximum": "less than {}", "multipleOf": "a multiple of {}", "minLength": "at least {} characters",
    "maxLength": "at most {} characters", "pattern": "matching the regular expression {}",
    "minItems": "at least {} items", "maxItems": "at most {} items", "uniqueItems": "items unique",
    "minProperties": "at least {} properties", "maxProperties": "at most {} properties",
}


def pointer(path: FieldPath) -> str:
    """JSON pointer of a path inside the schema, for messages."""
    return "#" + "".join(f"/{part}" for part in path) if path else "#"


def _fail(provider: str, keyword: str, path: FieldPath, why: str, field: str = "output.schema") -> RenderError:
    return _refuse(f"keyword {keyword!r} at {pointer(path)} cannot be expressed for {provider}: {why}", path, field,
                   "simplify the schema, or drop this model from the agent's model_preferences")


def _refuse(message: str, path: FieldPath, field: str, hint: str) -> RenderError:
    """A problem with the schema at ``field`` (``output.schema``, ``tools[0].parameters``), at ``path`` in it."""
    what = "output schema" if field == "output.schema" else f"{field} schema"
    return RenderError(Problem(f"{what} {message}", field=field + pointer(path)[1:].replace("/", "."), hint=hint))


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-shaped data (much cheaper than copy.deepcopy)."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


def _walk(node: Schema, visit: Callable[[Schema, FieldPath], None], path: FieldPath = ()) -> None:
    """Call ``visit`` on every (sub)schema, parents before children; ``visit`` may edit in place."""
    visit(node, path)
    for relative, child in children(node):
        _walk(child, visit, path + relative)


def check_shape(schema: Any, field: str = "output.schema") -> None:
    """Refuse a schema the transforms cannot read: not JSON data, or a keyword of the wrong shape
    (``properties`` as a list, ``required`` naming non-strings, ...). The loader keeps such schemas
    so that ``rosetta validate`` can report them (PV-002, PV-003); rendering stops here, located."""
    hint = "fix the schema; `rosetta validate` lists every problem it has (PV-002, PV-003)"
    if not isinstance(schema, dict):
        raise _refuse(f"is {type(schema).__name__} value, not a mapping", (), field, hint)
    try:
        json.dumps(schema)
    except (TypeError, ValueError) as exc:
        raise _refuse(f"holds a value that is not JSON ({exc})", (), field, hint) from None
    found = shape_problem(schema)
    if found is not None:
        path, keyword, expected, value = found
        raise _refuse(f"keyword {keyword!r} at {pointer(path)} must be {expected}, not {value!r:.60}",
                      (*path, keyword), field, hint)


# -- transforms ------------------------------------------------------------------------------


def _has_refs(node: Any) -> bool:
    if isinstance(node, dict):
        return "$ref" in node or "$defs" in node or "definitions" in node or any(_has_refs(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_refs(v) for v in node)
    return False


MAX_INLINED_VALUES = 20_000
"""Values a schema may grow to when its ``$ref``s are inlined. Each reference is a copy, so
definitions that refer to each other twice per level double with every level (a "$ref bomb":
thirty levels make a billion values); real schemas stay in the hundreds."""
MAX_INLINED_DEPTH = 64
"""Nesting an inlined schema may reach, and references it may follow in a row (the YAML nesting limit)."""


def inline_refs(schema: Schema, provider: str, field: str = "output.schema") -> tuple[Schema, Warnings]:
    """Replace local ``$ref``s with the definitions they point to; drop ``$defs``.

    A schema without references is returned as is (callers that edit must copy). The size the
    result would have is measured first, each definition once, so a schema whose references
    multiply is refused in time linear in its text, never expanded."""
    if not _has_refs(schema):
        return schema, []
    definitions = {name: value for key in ("definitions", "$defs") if isinstance(schema.get(key), dict)
                   for name, value in schema[key].items()}
    measured: dict[str, tuple[int, int, int]] = {}

    def target(node: Schema, path: FieldPath, stack: tuple[str, ...]) -> str:
        """The definition name a ``$ref`` node points to, checked to be inlinable from here."""
        ref: str = node["$ref"]
        name = ref.rsplit("/", 1)[-1]
        if not ref.startswith(("#/$defs/", "#/definitions/")) or name not in definitions:
            raise _fail(provider, "$ref", path, f"only local #/$defs references can be inlined, got {ref!r}", field)
        if name in stack:
            raise _fail(provider, "$ref", path, f"{ref!r} is recursive and cannot be inlined", field)
        if len(stack) >= MAX_INLINED_DEPTH:
            raise _fail(provider, "$ref", path, f"references chain more than {MAX_INLINED_DEPTH} deep", field)
        if not isinstance(definitions[name], dict):
            raise _fail(provider, "$ref", path, f"{ref!r} points to a {type(definitions[name]).__name__} value, "
                        "not a schema object", field)
        return name

    def measure(node: Any, path: FieldPath, stack: tuple[str, ...]) -> tuple[int, int, int]:
        """(values, depth, references followed in a row) of ``node`` once inlined: each definition is
        measured once, so this is linear in the schema's text however large the result would be."""
        if isinstance(node, list):
            sizes = [measure(item, path + (i,), stack) for i, item in enumerate(node)]
            return (1 + sum(s[0] for s in sizes), 1 + max((s[1] for s in sizes), default=0),
                    max((s[2] for s in sizes), default=0))
        if not isinstance(node, dict):
            return 1, 0, 0
        values, depth, hops = 1, 1, 0
        if isinstance(node.get("$ref"), str):
            name = target(node, path, stack)
            if name not in measured:
                measured[name] = measure(definitions[name], path, stack + (name,))
            values, depth, hops = measured[name]
            hops += 1
        for key, value in node.items():
            if key not in ("$ref", "$defs", "definitions"):
                inner = measure(value, path + (key,), stack)
                values, depth, hops = values + inner[0], max(depth, 1 + inner[1]), max(hops, inner[2])
        return values, depth, hops

    def resolve(node: Any) -> Any:
        if isinstance(node, list):
            return [resolve(item) for item in node]
        if not isinstance(node, dict):
            return node
        if isinstance(node.get("$ref"), str):
            inlined = resolve(definitions[node["$ref"].rsplit("/", 1)[-1]])
            return {**inlined, **resolve({k: v for k, v in node.items() if k != "$ref"})}
        return {k: resolve(v) for k, v in node.items() if k not in ("$defs", "definitions")}

    values, depth, hops = measure(schema, (), ())
    if values > MAX_INLINED_VALUES or max(depth, hops) > MAX_INLINED_DEPTH:
        largest = max(measured, key=lambda name: measured[name][0])
        raise _fail(provider, "$ref", (), f"inlining its references would make {values:,} values nested {depth} deep "
                    f"through chains of {hops} references (the limits are {MAX_INLINED_VALUES:,} values and "
                    f"{MAX_INLINED_DEPTH} levels; {largest!r} alone makes {measured[largest][0]:,}): definitions that "
                    "refer to others more than once multiply with every level", field)
    return resolve(schema), []


def constraints_to_descriptions(schema: Schema, provider: str) -> tuple[Schema, Warnings]:
    """Move numeric, length and pattern constraints into the description the model reads."""
    schema = copy_json(schema)

    def visit(node: Schema, path: FieldPath) -> None:
        moved = [template.format(node.pop(key)) for key, template in _CONSTRAINTS.items() if key in node]
        if moved:
            note = "Must be " + ", ".join(moved) + "."
            node["description"] = f"{node['description']} {note}" if node.get("description") else note

    _walk(schema, visit)
    return schema, []


_ANTHROPIC_UNSUPPORTED = ("not", "if", "then", "else", "patternProperties", "propertyNames", "dependentRequired",
                          "dependentSchemas", "unevaluatedProperties", "unevaluatedItems", "contains")


def anthropic_output(schema: Schema, provider: str) -> tuple[Schema, Warnings]:
    """Anthropic's output_config.format (structured outputs docs): closed objects and ``anyOf`` for
    ``oneOf`` (after ``constraints_to_descriptions`` moved what its decoder cannot enforce)."""
    schema = copy_json(schema)

    def visit(node: Schema, path: FieldPath) -> None:
        for keyword in _ANTHROPIC_UNSUPPORTED:
            if keyword in node:
                raise _fail(provider, keyword, path, "not supported by Anthropic's structured outputs")
        if "oneOf" in node:
            node["anyOf"] = node.pop("oneOf")
        is_object = node.get("type") == "object" or (isinstance(node.get("type"), list) and "object" in node["type"])
        if is_object or "properties" in node:
            if node.get("additionalProperties") not in (None, False):
                raise _fail(provider, "additionalProperties", path, "structured outputs need closed objects")
            node["additionalProperties"] = False

    _walk(schema, visit)
    return schema, []


_OPENAI_UNSUPPORTED = ("allOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
                       "patternProperties", "unevaluatedProperties", "unevaluatedItems", "propertyNames",
                       "contains", "minProperties", "maxProperties")


def openai_strict(schema: Schema, provider: str) -> tuple[Schema, Warnings]:
    """OpenAI strict mode: object root, every property required (optional ones nullable), closed objects."""
    if schema.get("type") != "object":
        raise _fail(provider, "type", (), "strict structured output needs an object at the root")
    schema = copy_json(schema)

    def visit(node: Schema, path: FieldPath) -> None:
        for keyword in _OPENAI_UNSUPPORTED:
            if keyword in node:
                raise _fail(provider, keyword, path, "not supported in strict structured output")
        is_object = node.get("type") == "object" or (isinstance(node.get("type"), list) and "object" in node["type"])
        if is_object or "properties" in node:
            properties = node.setdefault("properties", {})
            required = set(node.get("required", []))
            for name, sub in properties.items():
                if name not in required and isinstance(sub, dict):
                    properties[name] = _nullable(sub)
            node["required"] = list(properties)
            if node.get("additionalProperties") not in (None, False):
                raise _fail(provider, "additionalProperties", path, "strict mode requires closed objects")
            node["additionalProperties"] = False

    _walk(schema, visit)
    return schema, []


def _nullable(schema: Schema) -> Schema:
    """``schema`` or null (OpenAI strict's spelling of an optional property)."""
    kind = schema.get("type")
    if isinstance(kind, str) and "$ref" not in schema:
        result = {**schema, "type": [kind, "null"]}
        if "enum" in schema and None not in schema["enum"]:
            result["enum"] = [*schema["enum"], None]
        return result
    if isinstance(kind, list):
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


_GEMINI_KEEP = {"type", "format", "description", "nullable", "enum", "properties", "required", "items",
                "minItems", "maxItems", "minimum", "maximum", "anyOf", "propertyOrdering", "title"}
_GEMINI_FAIL = ("allOf", "not", "if", "then", "else", "oneOf")


def gemini_subset(schema: Schema, provider: str, field: str = "output.schema") -> tuple[Schema, Warnings]:
    """Gemini's response schema (an OpenAPI 3.0 subset): rewrite what has an equivalent, drop the rest
    with a warning (the API would ignore it silently)."""
    inlined, _ = inline_refs(schema, provider, field)
    schema = copy_json(inlined) if inlined is schema else inlined
    warnings: Warnings = []

    def visit(node: Schema, path: FieldPath) -> None:
        for keyword in _GEMINI_FAIL:
            if keyword in node:
                raise _fail(provider, keyword, path, "Gemini's response schema has no equivalent", field)
        if "const" in node:
            node["enum"] = [node.pop("const")]
        kind = node.get("type")
        if isinstance(kind, list):
            others = [k for k in kind if k != "null"]
            if len(others) != 1:
                raise _fail(provider, "type", path, f"a union of types {kind} has no equivalent", field)
            node["type"] = others[0]
            if "null" in kind:
                node["nullable"] = True
        for keyword in sorted(set(node) - _GEMINI_KEEP):
            warnings.append(f"dropped {keyword!r} at {pointer(path)} (not honoured by Gemini; rosetta still validates it)")
            if keyword in _CONSTRAINTS:
                note = "Must be " + _CONSTRAINTS[keyword].format(node[keyword]) + "."
                node["description"] = f"{node['description']} {note}" if node.get("description") else note
            del node[keyword]
        if node.get("type") == "object" and node.get("properties"):
            node.setdefault("propertyOrdering", list(node["properties"]))

    _walk(schema, visit)
    return schema, warnings


TRANSFORMS: dict[SchemaTransform, Callable[[Schema, str], tuple[Schema, Warnings]]] = {
    SchemaTransform.INLINE_REFS: inline_refs,
    SchemaTransform.CONSTRAINTS_TO_DESCRIPTIONS: constraints_to_descriptions,
    SchemaTransform.OPENAI_STRICT: openai_strict,
    SchemaTransform.GEMINI_SUBSET: gemini_subset,
    SchemaTransform.ANTHROPIC_OUTPUT: anthropic_output,
}


def sanitize(schema: Schema, transforms: list[SchemaTransform], provider: str) -> tuple[Schema, Warnings]:
    """Apply the adapter's transforms in order; return the provider schema and the warnings."""
    warnings: Warnings = []
    check_shape(schema)
    for name in transforms:
        schema, more = TRANSFORMS[name](schema, provider)
        warnings += more
    return schema, warnings
