"""Turning pydantic's validation errors into problems a person can act on: the file and line of
the field, what was expected, what was found, and a hint (e.g. the field name that was meant)."""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from rosetta.definition.formats import RawDefinition
from rosetta.definition.models import AgentSpec
from rosetta.definition.yaml_source import format_path
from rosetta.errors import DefinitionError, Location, Problem


def validate_spec(raw: RawDefinition) -> AgentSpec:
    """Type the merged frontmatter; every schema error becomes a located, explained problem."""
    try:
        return AgentSpec.model_validate(raw.data)
    except ValidationError as exc:
        problems = [_problem(error, raw) for error in exc.errors(include_url=False)]
        problems.sort(key=lambda p: (p.location.file or "", p.location.line or 0, p.location.column or 0))
        raise DefinitionError(problems) from None


_EXPECTED = {
    "string_type": "text",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "list_type": "a list (one '- item' per line, or [a, b])",
    "dict_type": "a mapping of 'key: value' lines",
    "model_type": "a mapping of 'key: value' lines",
    "model_attributes_type": "a mapping of 'key: value' lines",
}


def _problem(error: Any, raw: RawDefinition) -> Problem:
    loc = tuple(error["loc"])
    kind = error["type"]
    file, line, column = locate_field(raw, loc)
    message = error["msg"].removeprefix("Value error, ")
    expected = _EXPECTED.get(kind)
    hint = None
    if kind == "missing":
        message = "required field is missing"
        hint = f"add '{loc[-1]}: ...'" + (" at the top of the frontmatter" if len(loc) == 1 else "")
    elif kind == "extra_forbidden":
        message = f"unknown field {loc[-1]!r}"
        known = _known_fields(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known fields here: {', '.join(known)}"
    elif kind == "enum":
        expected = f"one of {error['ctx']['expected']}"
        message = f"{error['input']!r} is not allowed"
    elif kind == "string_pattern_mismatch":
        expected = f"text matching {error['ctx']['pattern']}"
        message = f"{error['input']!r} has invalid characters"
    elif expected:
        message = f"got {_describe(error['input'])}"
    return Problem(message, Location(file, line, column), format_path(loc) or None, expected, hint)


def _describe(value: Any) -> str:
    kind = {dict: "a mapping", list: "a list", type(None): "nothing (null)"}.get(type(value))
    if kind:
        return kind
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def locate_field(raw: RawDefinition, loc: tuple) -> tuple[str, int | None, int | None]:
    """(file, line, column) of a field path, or of its nearest ancestor that has a position."""
    for end in range(len(loc), -1, -1):
        found = raw.locations.get(loc[:end])
        if found:
            return found
    return str(raw.path), None, None


def _known_fields(loc: tuple) -> list[str]:
    """Field names (by alias) of the model found at ``loc`` inside :class:`AgentSpec`."""
    model: type[BaseModel] | None = AgentSpec
    skip_key = False  # the next part is a key of a dict[str, Model] field
    for part in loc:
        if isinstance(part, int):
            continue
        if skip_key:
            skip_key = False
            continue
        if model is None:
            return []
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
        if field is None:
            return []
        skip_key = typing.get_origin(field.annotation) is dict
        model = _model_in(field.annotation)
    if model is None:
        return []
    return [f.alias or n for n, f in model.model_fields.items()]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is not None:
        for argument in typing.get_args(annotation):
            found = _model_in(argument)
            if found:
                return found
    return None
