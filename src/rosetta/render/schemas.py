"""Output schemas rewritten for what each provider's structured-output API accepts.

Each adapter lists named transforms (``schema_transforms``); this module implements them once.
The agent's own schema is never changed: rosetta validates answers against the original, so a
constraint moved into a description here is still enforced after the call. What a provider
cannot express is an error naming the keyword, its path and the provider, raised at render
time rather than by the provider's API; what a provider would silently ignore is dropped here
with a warning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rosetta.errors import Problem, RenderError
from rosetta.providers.adapter import SchemaTransform

Schema = dict[str, Any]
Warnings = list[str]

_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_SINGLE = ("items", "additionalProperties", "not", "if", "then", "else", "contains",
                     "propertyNames", "unevaluatedProperties", "unevaluatedItems")
_CONSTRAINTS = {
    "minimum": "minimum {}", "maximum": "maximum {}", "exclusiveMinimum": "greater than {}",
    "exclusiveMaximum": "less than {}", "multipleOf": "a multiple of {}", "minLength": "at least {} characters",
    "maxLength": "at most {} characters", "pattern": "matching the regular expression {}",
    "minItems": "at least {} items", "maxItems": "at most {} items", "uniqueItems": "items unique",
    "minProperties": "at least {} properties", "maxProperties": "at most {} properties",
}


def pointer(path: tuple) -> str:
    """JSON pointer of a path inside the schema, for messages."""
    return "#" + "".join(f"/{part}" for part in path) if path else "#"


def _fail(provider: str, keyword: str, path: tuple, why: str) -> RenderError:
    return RenderError(Problem(
        f"output schema keyword {keyword!r} at {pointer(path)} cannot be expressed for {provider}: {why}",
        field=f"output.schema{pointer(path)[1:].replace('/', '.')}" if path else "output.schema",
        hint="simplify the schema, or drop this model from the agent's model_preferences",
    ))


_MAPS, _LISTS, _SINGLES = frozenset(_SUBSCHEMA_MAPS), frozenset(_SUBSCHEMA_LISTS), frozenset(_SUBSCHEMA_SINGLE)


def _children(node: Schema) -> list[tuple[tuple, Schema]]:
    """(relative path, subschema) for every direct subschema of ``node``."""
    found: list[tuple[tuple, Schema]] = []
    for key, value in node.items():
        if key in _MAPS and isinstance(value, dict):
            found += [((key, name), sub) for name, sub in value.items() if isinstance(sub, dict)]
        elif key in _LISTS and isinstance(value, list):
            found += [((key, i), sub) for i, sub in enumerate(value) if isinstance(sub, dict)]
        elif key in _SINGLES and isinstance(value, dict):
            found.append(((key,), value))
    return found


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-shaped data (much cheaper than copy.deepcopy)."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


def _walk(node: Schema, visit: Callable[[Schema, tuple], None], path: tuple = ()) -> None:
    """Call ``visit`` on every (sub)schema, parents before children; ``visit`` may edit in place."""
    visit(node, path)
    for relative, child in _children(node):
        _walk(child, visit, path + relative)


# -- transforms ------------------------------------------------------------------------------


def _has_refs(node: Any) -> bool:
    if isinstance(node, dict):
        return "$ref" in node or "$defs" in node or "definitions" in node or any(_has_refs(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_refs(v) for v in node)
    return False


def inline_refs(schema: Schema, provider: str) -> tuple[Schema, Warnings]:
    """Replace local ``$ref``s with the definitions they point to; drop ``$defs``.

    A schema without references is returned as is (callers that edit must copy)."""
    if not _has_refs(schema):
        return schema, []
    definitions = {**schema.get("definitions", {}), **schema.get("$defs", {})}

    def resolve(node: Any, path: tuple, stack: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [resolve(item, path + (i,), stack) for i, item in enumerate(node)]
        if not isinstance(node, dict):
            return node
        if isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            name = ref.rsplit("/", 1)[-1]
            if not ref.startswith(("#/$defs/", "#/definitions/")) or name not in definitions:
                raise _fail(provider, "$ref", path, f"only local #/$defs references can be inlined, got {ref!r}")
            if name in stack:
                raise _fail(provider, "$ref", path, f"{ref!r} is recursive and cannot be inlined")
            target = resolve(definitions[name], path, stack + (name,))
            extra = {k: v for k, v in node.items() if k != "$ref"}
            return {**target, **resolve(extra, path, stack)}
        return {k: resolve(v, path + (k,), stack) for k, v in node.items() if k not in ("$defs", "definitions")}

    return resolve(schema, (), ()), []


def constraints_to_descriptions(schema: Schema, provider: str) -> tuple[Schema, Warnings]:
    """Move numeric, length and pattern constraints into the description the model reads."""
    schema = copy_json(schema)

    def visit(node: Schema, path: tuple) -> None:
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

    def visit(node: Schema, path: tuple) -> None:
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

    def visit(node: Schema, path: tuple) -> None:
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


def gemini_subset(schema: Schema, provider: str) -> tuple[Schema, Warnings]:
    """Gemini's response schema (an OpenAPI 3.0 subset): rewrite what has an equivalent, drop the rest
    with a warning (the API would ignore it silently)."""
    inlined, _ = inline_refs(schema, provider)
    schema = copy_json(inlined) if inlined is schema else inlined
    warnings: Warnings = []

    def visit(node: Schema, path: tuple) -> None:
        for keyword in _GEMINI_FAIL:
            if keyword in node:
                raise _fail(provider, keyword, path, "Gemini's response schema has no equivalent")
        if "const" in node:
            node["enum"] = [node.pop("const")]
        kind = node.get("type")
        if isinstance(kind, list):
            others = [k for k in kind if k != "null"]
            if len(others) != 1:
                raise _fail(provider, "type", path, f"a union of types {kind} has no equivalent")
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
    for name in transforms:
        schema, more = TRANSFORMS[name](schema, provider)
        warnings += more
    return schema, warnings
