"""Turn JSON Schemas (draft 2020-12) into pydantic v2 types built at runtime.

Agents declare structured output and tool parameters as JSON Schema; to hand callers typed
objects instead of plain dicts we build pydantic models from those schemas on the fly.

Mapping: string/integer/number/boolean/null → str/int/float/bool/None; array → ``list[T]``;
object with properties → a nested model named after its property path (``Output_Affected_Item``);
object without properties → ``dict[str, T]``; ``enum``/``const`` → ``Literal``; type lists,
``anyOf``/``oneOf`` → unions; ``allOf`` → one merged schema; local ``$ref`` (recursive too) → the
referenced type. Bounds and lengths become pydantic constraints, patterns a validator that searches
with a time limit (``rosetta.definition.patterns``: ``re``'s syntax, no unbounded backtracking). Unsafe
property names get a safe field name plus an alias, so ``model_dump(by_alias=True)`` round-trips.

Keywords that do not shape a Python type are ignored on purpose: ``if``/``then``/``else``, ``not``,
``patternProperties``, ``dependentSchemas``, ``uniqueItems``, ``format``, ``contains``, the value
schema of ``additionalProperties`` next to ``properties``, ... Full validation with ``jsonschema``
happens elsewhere; these types are for typed access. Schemas we cannot express (``false``, remote
``$ref``, contradictory ``allOf``) raise :class:`SchemaTypeError`. Nothing is cached between calls.
"""

from __future__ import annotations

import builtins
import contextlib
import keyword
import math
import re
from typing import Annotated, Any, Literal, Union
from urllib.parse import unquote

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model
from typing_extensions import TypeAliasType

from rosetta.definition.patterns import PatternError, PatternTimeout, compile_pattern, search, shown
from rosetta.definition.schema_shape import node_problem
from rosetta.errors import Problem, RosettaError

__all__ = ["SchemaTypeError", "model_from_schema", "type_from_schema"]

# keywords that never change the shape of a value; merging anyOf/oneOf siblings skips them
_ANNOTATIONS = {"$schema", "$id", "$anchor", "$comment", "$defs", "definitions", "title", "description",
                "default", "examples", "deprecated", "readOnly", "writeOnly", "nullable"}
_LOWER_BOUNDS = {"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"}
_UPPER_BOUNDS = {"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"}
_MUST_AGREE = {"pattern", "const", "multipleOf", "anyOf", "oneOf", "$ref"}
_LITERALS = (str, int, float, bool, type(None))
MAX_PARTS = 20_000
"""Subschemas built at most for one type: each $ref builds its target once, but anyOf and allOf
members merged with their siblings are built apart, so definitions used twice per level double."""
MAX_DEPTH = 64
"""Deepest nesting of subschemas followed (the YAML nesting limit); each level is a few Python frames."""


class SchemaTypeError(RosettaError):
    """A JSON Schema (or part of one) that cannot be expressed as a Python type."""


def _error(path: str, keyword: str | None, message: str, **extra: str) -> SchemaTypeError:
    return SchemaTypeError(Problem(message, field=f"{path}/{keyword}" if keyword else path, **extra))


def _ident(text: str) -> str:
    text = re.sub(r"\W", "_", text, flags=re.ASCII)
    return text if text and not text[0].isdigit() else f"M{text}"


def _pascal(key: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[^0-9A-Za-z]+", key) if p) or "Field"


def _safe_field(key: str) -> bool:
    return key.isidentifier() and key.isascii() and not key.startswith("_") \
        and not keyword.iskeyword(key) and not hasattr(BaseModel, key)


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _union(types: list[Any]) -> Any:
    return types[0] if len(types) == 1 else Union[tuple(types)]  # noqa: UP007


def _constrain(base: Any, **constraints: Any) -> Any:
    constraints = {k: v for k, v in constraints.items() if v is not None}
    return Annotated[base, Field(**constraints)] if constraints else base


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


class _Builder:
    """One conversion: the root document, the class names handed out, the models made."""

    def __init__(self, root: Any, defs: dict | None, root_name: str) -> None:
        self.root, self.defs, self.root_name = root, defs, _ident(root_name)
        self.names: set[str] = set()
        self.models: list[type[BaseModel]] = []
        self.namespace: dict[str, Any] = {}  # names that forward references may point at
        self.done: dict[str, Any] = {}  # $ref → finished type
        self.building: dict[str, str] = {}  # $ref being built → its reserved name
        self.recursive: set[str] = set()
        self.steps = 0  # parts built so far, bounded by MAX_PARTS
        self.depth = 0  # nesting of the part being built, bounded by MAX_DEPTH

    def claim(self, base: str) -> str:
        base = name = _ident(base)
        count = 1
        while name in self.names or name in globals() or hasattr(builtins, name):
            count += 1
            name = f"{base}_{count}"
        self.names.add(name)
        return name

    def finish(self) -> None:
        for model in self.models:
            if not model.__pydantic_complete__:
                model.model_rebuild(_types_namespace=self.namespace)

    def named(self, ref: str, target: Any, candidate: str, path: str, force: bool = False) -> Any:
        """Build ``target`` once under a reserved class name; cycles get forward references."""
        if ref in self.done:
            return self.done[ref]
        if ref in self.building:
            self.recursive.add(ref)
            return self.building[ref]
        name = self.building[ref] = self.claim(candidate)
        result = self.build(target, name, path, exact=True, force=force)
        del self.building[ref]
        if ref in self.recursive and not (_is_model(result) and result.__name__ == name):
            result = TypeAliasType(name, result)  # recursion through a union, list or dict
        self.namespace[name] = self.done[ref] = result
        return result

    def target(self, ref: Any, path: str) -> tuple[Any, str]:
        if not isinstance(ref, str) or not ref.startswith("#") or ref[1:2] not in ("", "/"):
            raise _error(path, "$ref", f"cannot follow $ref {ref!r}: only local JSON pointers are supported",
                         expected="'#/$defs/NAME' or '#/definitions/NAME'",
                         hint="inline the referenced schema or copy it under $defs")
        parts = [unquote(p).replace("~1", "/").replace("~0", "~") for p in ref[1:].split("/")[1:]]
        if self.defs is not None and len(parts) == 2 and parts[0] in ("$defs", "definitions") \
                and parts[1] in self.defs:
            return self.defs[parts[1]], parts[1]
        node = self.root
        for part in parts:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise _error(path, "$ref", f"$ref {ref!r} points at nothing in this schema")
        return node, parts[-1] if parts else self.root_name

    def deref(self, schema: Any, path: str) -> Any:
        for _ in range(100):
            if not (isinstance(schema, dict) and "$ref" in schema):
                return schema
            schema = self.target(schema["$ref"], path)[0]
        raise _error(path, "$ref", "the $ref chain loops without reaching a schema")

    def build(self, schema: Any, name: str, path: str, exact: bool = False, force: bool = False) -> Any:
        self.count(path)
        self.depth += 1
        try:
            return self.build_bounded(schema, name, path, exact, force)
        finally:
            self.depth -= 1

    def count(self, path: str) -> None:
        """One more part built; refuse a schema that expands past the bounds (a "$ref bomb")."""
        self.steps += 1
        if self.steps > MAX_PARTS:
            raise _error(path, None, f"the schema expands to more than {MAX_PARTS:,} parts once its $refs, anyOf "
                         "and allOf are followed", hint="refer to each definition once per level, not several times")
        if self.depth >= MAX_DEPTH:
            raise _error(path, None, f"the schema nests more than {MAX_DEPTH} levels deep (following $refs)",
                         hint="flatten the schema")

    def build_bounded(self, schema: Any, name: str, path: str, exact: bool, force: bool) -> Any:
        if schema is True:
            return Any
        if schema is False:
            raise _error(path, None, "the schema `false` accepts no value", hint="remove it or give a real schema")
        if not isinstance(schema, dict):
            raise _error(path, None, f"a schema must be an object or a boolean, not {type(schema).__name__}")
        _check_node(schema, path)
        result = self.shape(schema, name, path, exact, force)
        return _union([result, type(None)]) if schema.get("nullable") is True else result  # OpenAPI 3.0 style

    def shape(self, schema: dict, name: str, path: str, exact: bool, force: bool) -> Any:
        if "$ref" in schema:
            target, def_name = self.target(schema["$ref"], path)
            return self.named(schema["$ref"], target, f"{self.root_name}_{_pascal(def_name)}", schema["$ref"])
        if "allOf" in schema:
            return self.build(self.merge_all(schema, path), name, path, exact, force)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                members = schema[key]
                if not isinstance(members, list) or not members:
                    raise _error(path, key, f"{key} must be a non-empty list of schemas")
                rest = {k: v for k, v in schema.items() if k != key}
                if set(rest) - _ANNOTATIONS:  # sibling keywords apply to every member
                    members = [_merge(rest, self.deref(m, f"{path}/{key}/{i}"), f"{path}/{key}/{i}")
                               for i, m in enumerate(members)]
                return _union([self.build(m, name, f"{path}/{key}/{i}") for i, m in enumerate(members)])
        if "const" in schema:
            return self.literal([schema["const"]], path, "const")
        if "enum" in schema:
            return self.literal(schema["enum"], path, "enum")
        types = schema.get("type")
        if types is None:
            types = "object" if "properties" in schema else "array" if "items" in schema else None
            if types is None:
                return Any
        if isinstance(types, list):
            if not types:
                raise _error(path, "type", "an empty type list allows no value")
            return _union([self.single(schema, t, name, path, False, False) for t in types])
        return self.single(schema, types, name, path, exact, force)

    def literal(self, values: Any, path: str, key: str) -> Any:
        if not isinstance(values, list) or not values:
            raise _error(path, key, f"{key} must list at least one value")
        if not all(isinstance(v, _LITERALS) for v in values):
            raise _error(path, key, f"{key} values must be strings, numbers, booleans or null")
        return Literal[tuple(values)]

    def number(self, schema: dict, key: str, path: str) -> Any:
        value = schema.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise _error(path, key, f"{key} must be a number", expected="a number")
        if value is not None and not math.isfinite(value):
            raise _error(path, key, f"{key} must be a finite number, not {value}", expected="a finite number")
        if key == "multipleOf" and value is not None and value <= 0:
            raise _error(path, key, f"multipleOf must be greater than 0, not {value}", expected="a positive number")
        return value

    def single(self, schema: dict, kind: Any, name: str, path: str, exact: bool, force: bool) -> Any:
        count = lambda key: self.number(schema, key, path)
        if kind == "string":
            text = _constrain(str, min_length=count("minLength"), max_length=count("maxLength"))
            pattern = schema.get("pattern")
            if pattern is None:
                return text
            if not isinstance(pattern, str):
                raise _error(path, "pattern", f"pattern must be text, not {type(pattern).__name__}")
            try:
                compile_pattern(pattern)
            except PatternError as exc:
                raise _error(path, "pattern", f"pattern {shown(pattern)} is not a usable regular expression: "
                             f"{exc}") from None
            return Annotated[text, AfterValidator(_matching(pattern))]
        if kind in ("integer", "number"):
            step = count("multipleOf")
            bounds = {"ge": count("minimum"), "le": count("maximum"), "gt": count("exclusiveMinimum"),
                      "lt": count("exclusiveMaximum")}
            if kind == "integer" and step is not None and not float(step).is_integer():
                # pydantic's int takes only whole steps; JSON Schema allows any (every integer is a multiple of 0.5)
                return Annotated[_constrain(int, **bounds), AfterValidator(_multiple_of(step))]
            whole = kind == "integer" and step is not None
            return _constrain(int if kind == "integer" else float, **bounds,
                              multiple_of=int(step) if whole else step)
        if kind in ("boolean", "null"):
            return bool if kind == "boolean" else type(None)
        if kind == "array":
            items, prefix = schema.get("items", True), schema.get("prefixItems")
            if items is False and isinstance(prefix, list):
                members = [self.build(s, f"{name}_Item{i + 1}", f"{path}/prefixItems/{i}")
                           for i, s in enumerate(prefix)]
                return tuple[tuple(members)] if members else tuple[()]
            item = self.build(items, f"{name}_Item", f"{path}/items")
            return _constrain(list[item], min_length=count("minItems"), max_length=count("maxItems"))
        if kind == "object":
            return self.object(schema, name, path, exact, force)
        raise _error(path, "type", f"unknown type {kind!r}", expected="a JSON Schema type name")

    def object(self, schema: dict, name: str, path: str, exact: bool, force: bool) -> Any:
        props, extra = schema.get("properties") or {}, schema.get("additionalProperties", True)
        if not isinstance(props, dict):
            raise _error(path, "properties", "properties must be an object")
        if not props and extra is not False and not force:
            value = self.build(extra, f"{name}_Value", f"{path}/additionalProperties")
            return _constrain(dict[str, value], min_length=self.number(schema, "minProperties", path),
                              max_length=self.number(schema, "maxProperties", path))
        class_name = name if exact else self.claim(name)
        required = set(schema.get("required") or [])
        used = {key for key in props if _safe_field(key)}
        fields: dict[str, Any] = {}
        for key, sub in props.items():
            field = key
            if not _safe_field(key):
                field = re.sub(r"\W", "_", key, flags=re.ASCII)
                field = field if field[:1].isalpha() else f"f_{field}"
                while field in used or not _safe_field(field):
                    field += "_"
                used.add(field)
            annotation = self.build(sub, f"{class_name}_{_pascal(key)}", f"{path}/properties/{_escape(key)}")
            info: dict[str, Any] = {"alias": key} if field != key else {}
            if isinstance(sub, dict) and isinstance(sub.get("description"), str):
                info["description"] = sub["description"]
            if key in required:
                fields[field] = (annotation, Field(**info))
            else:
                default = sub.get("default") if isinstance(sub, dict) else None
                fields[field] = (_union([annotation, type(None)]), Field(default, **info))
        config = ConfigDict(extra="forbid" if extra is False else "allow", populate_by_name=True,
                            protected_namespaces=())
        doc = schema.get("description") if isinstance(schema.get("description"), str) else None
        model = create_model(class_name, __config__=config, __doc__=doc, __module__=__name__, **fields)
        self.models.append(model)
        self.namespace[class_name] = model
        return model

    def merge_all(self, schema: dict, path: str) -> dict:
        self.count(path)
        self.depth += 1
        try:
            return self.merge_members(schema, path)
        finally:
            self.depth -= 1

    def merge_members(self, schema: dict, path: str) -> dict:
        members = schema["allOf"]
        if not isinstance(members, list) or not members:
            raise _error(path, "allOf", "allOf must be a non-empty list of schemas")
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for i, member in enumerate(members):
            member = self.deref(member, f"{path}/allOf/{i}")
            if not isinstance(member, (dict, bool)):
                raise _error(f"{path}/allOf/{i}", None, f"a schema must be an object or a boolean, not "
                             f"{type(member).__name__}")
            if isinstance(member, dict) and "allOf" in member:
                member = self.merge_all(member, f"{path}/allOf/{i}")
            merged = _merge(merged, member, f"{path}/allOf/{i}")
        return merged


def _multiple_of(step: float) -> Any:
    def check(value: int) -> int:
        ratio = value / step
        if abs(ratio - round(ratio)) > 1e-9:
            raise ValueError(f"{value} is not a multiple of {step}")
        return value
    return check


def _check_node(schema: dict, path: str) -> None:
    """Refuse a node whose structural keywords have the wrong type (``properties: [a]``) before reading it."""
    found = node_problem(schema)
    if found is not None:
        keyword, expected, value = found
        raise _error(path, keyword, f"{keyword} must be {expected}, not {value!r:.60}")


def _matching(pattern: str) -> Any:
    """A validator: the text must contain a match of ``pattern``, found within the time limit."""

    def check(value: str) -> str:
        try:
            found = search(pattern, value)
        except PatternTimeout as timeout:
            raise ValueError(f"could not be checked against the pattern {shown(pattern)} within {timeout.seconds:g} s "
                             "(the expression backtracks on this text)") from None
        if not found:
            raise ValueError(f"should match the pattern {shown(pattern)}")
        return value

    return check


def _merge(a: Any, b: Any, path: str) -> Any:
    """Combine two schemas that must both hold (the typing view of ``allOf``)."""
    if a is True or b is True or a is False or b is False:
        return b if a is True else a if b is True else False
    for side in (a, b):
        if not isinstance(side, dict):
            raise _error(path, None, f"a schema must be an object or a boolean, not {type(side).__name__}")
        _check_node(side, path)
    out = dict(a)
    for key, value in b.items():
        old = out.get(key)
        if key not in out or old == value or key in _ANNOTATIONS:
            out.setdefault(key, value)
        elif key == "type":
            left, right = (t if isinstance(t, list) else [t] for t in (old, value))
            common = [t for t in left if t in right or (t == "integer" and "number" in right)]
            common += ["integer"] if "number" in left and "integer" in right else []
            if not common:
                raise _error(path, "type", f"allOf members disagree on the type: {old!r} vs {value!r}",
                             hint="an instance cannot be both; fix one of the members")
            out[key] = common[0] if len(common) == 1 else list(dict.fromkeys(common))
        elif key == "properties":
            out[key] = {**old, **{k: _merge(old[k], v, f"{path}/properties/{_escape(k)}") if k in old else v
                                  for k, v in value.items()}}
        elif key == "required":
            out[key] = list(dict.fromkeys([*old, *value]))
        elif key == "enum":
            out[key] = [v for v in old if v in value]
            if not out[key]:
                raise _error(path, "enum", "allOf members share no enum value")
        elif key in _LOWER_BOUNDS or key in _UPPER_BOUNDS:
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (old, value)):
                raise _error(path, key, f"{key} must be a number", expected="a number")
            out[key] = (max if key in _LOWER_BOUNDS else min)(old, value)
        elif key in ("items", "additionalProperties"):
            out[key] = _merge(old, value, f"{path}/{key}")
        elif key in _MUST_AGREE:
            raise _error(path, key, f"allOf members give different values for {key}: {old!r} vs {value!r}")
    return out


@contextlib.contextmanager
def _built_by_pydantic() -> Any:
    """A constraint pydantic refuses to build a validator for (a valid JSON Schema it cannot
    express) is a :class:`SchemaTypeError`, never pydantic's own error."""
    from pydantic import PydanticSchemaGenerationError
    from pydantic_core import SchemaError

    try:
        yield
    except (SchemaError, PydanticSchemaGenerationError, OverflowError) as exc:
        first = str(exc).strip().splitlines()[-1].strip() if str(exc).strip() else type(exc).__name__
        raise _error("#", None, f"pydantic cannot build a type for this schema: {first}",
                     expected="constraints pydantic can express") from None


def type_from_schema(schema: dict | bool, *, name: str, defs: dict | None = None) -> Any:
    """Python type annotation for any (sub)schema, e.g. for ``pydantic.TypeAdapter``.

    ``name`` is the base for generated class names; ``defs`` (definition name → schema) resolves
    ``#/$defs/NAME`` and ``#/definitions/NAME`` when the schema was cut out of a larger document.
    """
    builder = _Builder(schema, defs, name)
    with _built_by_pydantic():
        result = builder.named("#", schema, name, "#")
        builder.finish()
    return result


def model_from_schema(schema: dict, *, name: str = "Output") -> type[BaseModel]:
    """Build a pydantic model class for an object schema (an object without properties gives a
    model that allows any keys)."""
    builder = _Builder(schema, None, name)
    plain = isinstance(schema, dict) and schema.get("type") == "object"
    with _built_by_pydantic():
        result = builder.named("#", schema, name, "#", force=plain)
        builder.finish()
    if not _is_model(result):
        raise _error("#", "type", "the root schema does not describe an object with properties",
                     expected="type: object", hint="use type_from_schema() with pydantic.TypeAdapter")
    return result
