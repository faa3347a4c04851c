"""The shape of the JSON Schemas definitions carry (``output.schema``, ``tools[].parameters``):
where their subschemas are, and what type each structural keyword must have.

The loader keeps a schema of any shape (``rosetta validate`` reports what is wrong with it, PV-002
and PV-003); the code that reads schemas (typing, provider transforms, lint) walks them with
:func:`subschemas` and checks a node with :func:`node_problem` before indexing into it, so that
``properties: [a, b]`` is a located refusal rather than an ``AttributeError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rosetta.definition.yaml_source import FieldPath

SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
SUBSCHEMA_SINGLE = ("items", "additionalProperties", "not", "if", "then", "else", "contains",
                    "propertyNames", "unevaluatedProperties", "unevaluatedItems")

SHAPES: dict[str, tuple[tuple[type, ...], str]] = {
    **{key: ((dict,), "a mapping of schemas") for key in SUBSCHEMA_MAPS},
    **{key: ((list,), "a list of schemas") for key in SUBSCHEMA_LISTS},
    **{key: ((dict, bool), "a schema (a mapping, or true or false)") for key in SUBSCHEMA_SINGLE},
    "items": ((dict, bool, list), "a schema, or a list of schemas (draft 4's tuples)"),
    "required": ((list,), "a list of property names"),
    "enum": ((list,), "a list of values"),
    "type": ((str, list), "a type name or a list of type names"),
}
"""Each structural keyword and what its value must be."""

_MAPS, _LISTS, _SINGLES = frozenset(SUBSCHEMA_MAPS), frozenset(SUBSCHEMA_LISTS), frozenset(SUBSCHEMA_SINGLE)


def children(node: dict[str, Any]) -> list[tuple[FieldPath, dict[str, Any]]]:
    """(relative path, subschema) for every direct subschema of ``node`` that is a mapping."""
    found: list[tuple[FieldPath, dict[str, Any]]] = []
    for key, value in node.items():
        if key in _MAPS and isinstance(value, dict):
            found += [((key, name), sub) for name, sub in value.items() if isinstance(sub, dict)]
        elif key in _LISTS and isinstance(value, list):
            found += [((key, i), sub) for i, sub in enumerate(value) if isinstance(sub, dict)]
        elif key in _SINGLES and isinstance(value, dict):
            found.append(((key,), value))
    return found


def subschemas(schema: dict[str, Any], path: FieldPath = ()) -> Iterator[tuple[FieldPath, dict[str, Any]]]:
    """(path, node) for ``schema`` and every subschema inside it, parents first."""
    yield path, schema
    for relative, child in children(schema):
        yield from subschemas(child, path + relative)


def node_problem(node: dict[str, Any]) -> tuple[str, str, Any] | None:
    """(keyword, what it must be, its value) for the first structural keyword of ``node`` with a
    value of the wrong type, or None."""
    for keyword, (kinds, expected) in SHAPES.items():
        if keyword not in node:
            continue
        value = node[keyword]
        wrong = not isinstance(value, kinds)
        if (keyword == "required" and not wrong) or (keyword == "type" and isinstance(value, list)):
            wrong = not all(isinstance(name, str) for name in value)
        if wrong:
            return keyword, expected, value
    return None


def shape_problem(schema: dict[str, Any]) -> tuple[FieldPath, str, str, Any] | None:
    """(path, keyword, what it must be, its value) for the first misshapen keyword anywhere in ``schema``."""
    for path, node in subschemas(schema):
        found = node_problem(node)
        if found is not None:
            return (path, *found)
    return None
