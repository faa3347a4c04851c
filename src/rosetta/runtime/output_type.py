"""The user's own output type (``rosetta.load(name, output_type=Triage)``), checked once against
the agent's output schema: every answer the schema admits must fit the type, or the type would
refuse valid answers at run time. What is compared is what a JSON answer can carry at the top
level: the fields, which are required, each field's JSON types and enum values; nested objects
are left to pydantic when an answer is typed (a refusal there is an issue on the Result)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rosetta.errors import Location, Problem, UsageError

if TYPE_CHECKING:
    from pydantic import BaseModel


def check_output_type(output_type: type, schema: Mapping[str, Any] | None, *, agent: str,
                      source: str | None = None) -> None:
    """Raise :class:`UsageError` naming each disagreement between ``output_type`` (a pydantic
    model class) and the output ``schema`` of ``agent`` (its definition file ``source``)."""
    from pydantic import BaseModel

    where = Location(source)
    if not (isinstance(output_type, type) and issubclass(output_type, BaseModel)):
        raise UsageError(Problem(f"output_type must be a pydantic model class, not {output_type!r}", where,
                                 field="output_type", expected="a subclass of pydantic.BaseModel"))
    if schema is None:
        raise UsageError(Problem(f"agent {agent!r} declares no output schema: its answers are text, which "
                                 f"{output_type.__name__} cannot type", where, field="output.schema",
                                 hint="declare output.schema in the definition, or load the agent without "
                                      "output_type"))
    problems = [Problem(f"output_type {output_type.__name__} disagrees with {agent}'s output schema: {said}", where,
                        field=f"output.schema.properties.{name}" if name else "output.schema",
                        hint="make the model accept every answer the schema allows (or change the schema)")
                for name, said in disagreements(output_type, schema)]
    if problems:
        raise UsageError(problems)


def disagreements(output_type: type[BaseModel], schema: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, what is wrong) for each way an answer valid under ``schema`` could fail
    ``output_type``'s validation, at the top level."""
    mine = output_type.model_json_schema(mode="validation")
    theirs_props: Mapping[str, Any] = schema.get("properties") or {}
    theirs_required = set(schema.get("required") or ())
    my_props: Mapping[str, Any] = mine.get("properties") or {}
    found: list[tuple[str, str]] = []
    if schema.get("type", "object") != "object":
        return [("", f"the schema's answers are {schema.get('type')!r}, not objects a model can type")]
    for name in sorted(set(mine.get("required") or ()) - theirs_required):
        found.append((name, "the model requires it, but the schema lets an answer leave it out"
                      if name in theirs_props else "the model requires it, but the schema has no such property"))
    if output_type.model_config.get("extra") == "forbid":
        found += [(name, "the schema allows it, but the model forbids fields it does not declare")
                  for name in sorted(set(theirs_props) - set(my_props))]
    defs = mine.get("$defs") or {}
    for name in sorted(set(theirs_props) & set(my_props)):
        theirs, ours = _kinds(theirs_props[name], schema.get("$defs") or {}), _kinds(my_props[name], defs)
        if theirs[0] and ours[0] and not _covered(theirs[0], ours[0]):
            found.append((name, f"the schema allows {_said(theirs[0])}, the model takes {_said(ours[0])}"))
        if theirs[1] is not None and ours[1] is not None and not theirs[1] <= ours[1]:
            found.append((name, f"the schema allows {sorted(theirs[1] - ours[1], key=repr)}, which the model's "
                                f"values {sorted(ours[1], key=repr)} leave out"))
    return found


def _kinds(node: object, defs: Mapping[str, Any]) -> tuple[set[str], set[Any] | None]:
    """The JSON types a schema node admits (empty: any) and its enum values (None: any)."""
    if not isinstance(node, Mapping):
        return set(), None
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _kinds(defs.get(ref.rsplit("/", 1)[1], {}), defs)
    branches = node.get("anyOf") or node.get("oneOf")
    if isinstance(branches, list):
        parts = [_kinds(branch, defs) for branch in branches]
        if any(not types for types, _ in parts):
            return set(), None
        values = [enum for _, enum in parts]
        return {t for types, _ in parts for t in types}, \
            None if any(v is None for v in values) else {v for enum in values if enum for v in enum}
    enum = node.get("enum")
    if "const" in node:
        enum = [node["const"]]
    declared = node.get("type")
    types = {declared} if isinstance(declared, str) else set(declared) if isinstance(declared, list) else set()
    if not types and isinstance(enum, list):
        types = {_json_type(value) for value in enum}
    return types, {_hashable(v) for v in enum} if isinstance(enum, list) else None


def _covered(theirs: set[str], ours: set[str]) -> bool:
    widened = ours | ({"integer"} if "number" in ours else set())
    return theirs <= widened


def _said(types: set[str]) -> str:
    return " or ".join(sorted(types))


def _json_type(value: object) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}.get(
        type(value), "object" if isinstance(value, dict) else "array")


def _hashable(value: object) -> object:
    return repr(value) if isinstance(value, (dict, list)) else value
