"""Typing the merged frontmatter, tolerantly: a value outside an enum is set aside (the field takes
its default, a list item or mapping entry is skipped) and recorded for lint to report, while every
other schema error becomes a problem a person can act on: the file and line of the field, what was
expected, what was found, and a hint (e.g. the field name that was meant)."""

from __future__ import annotations

import copy
import functools
import re
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from rosetta.definition.formats import RawDefinition
from rosetta.definition.models import KEPT_AS_WRITTEN, OPEN_VALUE_SETS, AgentSpec, OffListValue
from rosetta.definition.yaml_source import format_path
from rosetta.errors import DefinitionError, Location, Problem

_OFF_LIST_ERRORS = {"enum", "literal_error"}
"""Error kinds that mean "a value outside the known set": tolerated, never a load failure."""


def validate_spec(raw: RawDefinition) -> tuple[AgentSpec, tuple[OffListValue, ...]]:
    """The typed spec and the off-list values set aside to get it; any other schema error raises
    one :class:`DefinitionError` with every problem located and explained."""
    data, set_aside = raw.data, []
    while True:
        try:
            spec = AgentSpec.model_validate(data)
            break
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
            hard = [error for error in errors if error["type"] not in _OFF_LIST_ERRORS]
            if hard:
                problems = [_problem(error, raw) for error in hard]
                problems.sort(key=lambda p: (p.location.file or "", p.location.line or 0, p.location.column or 0))
                raise DefinitionError(problems) from None
            data = copy.deepcopy(data) if data is raw.data else data
            # deepest and last first, so removing a list item does not shift the next one
            for error in sorted(errors, key=lambda e: _sort_key(e["loc"]), reverse=True):
                try:
                    _remove(data, tuple(error["loc"]))
                except (KeyError, IndexError, TypeError):  # not a plain path into the data: refuse, located
                    raise DefinitionError([_problem(error, raw)]) from None
                set_aside.append(error)
    off_list = [OffListValue(tuple(e["loc"]), e["input"], _expected_values(e), _used_instead(spec, tuple(e["loc"])))
                for e in set_aside]
    off_list += _unlisted_descriptive_values(spec)
    return spec, tuple(sorted(off_list, key=lambda v: _sort_key(v.path)))


def _sort_key(path: Any) -> tuple:
    return tuple((isinstance(part, str), part) for part in path)


def _remove(data: Any, loc: tuple) -> None:
    for part in loc[:-1]:
        data = data[part]
    del data[loc[-1]]


def _expected_values(error: Any) -> tuple[str, ...]:
    expected = error.get("ctx", {}).get("expected", "")
    return tuple(re.findall(r"'([^']*)'", expected))


def _used_instead(spec: AgentSpec, loc: tuple) -> str:
    """In words, what the spec holds in place of the value set aside at ``loc``."""
    value: Any = spec
    for part in loc:
        if isinstance(value, BaseModel):
            value = getattr(value, part)
        else:
            return "ignores it"  # a list item or mapping entry was skipped
    if value is None:
        return "treats the field as not set"
    return f"uses {getattr(value, 'value', value)!r}"


def _unlisted_descriptive_values(spec: AgentSpec) -> list[OffListValue]:
    found = []
    for path, known in OPEN_VALUE_SETS.items():
        value: Any = spec
        for part in path:
            value = getattr(value, part)
        items = enumerate(value) if isinstance(value, list) else [(None, value)]
        for index, item in items:
            if item is not None and item not in set(known):
                where = path if index is None else (*path, index)
                found.append(OffListValue(where, item, tuple(k.value for k in known), KEPT_AS_WRITTEN))
    return found


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


def known_fields(loc: tuple) -> list[str]:
    """Field names (by alias) of the model found at ``loc`` inside :class:`AgentSpec` (list indices
    and mapping keys in ``loc`` are skipped over); empty when ``loc`` is not a model."""
    model = _model_at(loc)
    return [f.alias or n for n, f in model.model_fields.items()] if model else []


def nested_fields(loc: tuple) -> list[tuple[str, ...]]:
    """Paths, relative to ``loc``, of every field reachable from the model there through nested
    sections (not through lists or mappings of models): where a misplaced key may belong."""
    model = _model_at(loc)
    return list(_nested_fields_of(model)) if model is not None else []


@functools.cache
def _nested_fields_of(model: type[BaseModel]) -> tuple[tuple[str, ...], ...]:
    found: list[tuple[str, ...]] = []

    def walk(model: type[BaseModel], prefix: tuple[str, ...]) -> None:
        for name, info in model.model_fields.items():
            path = (*prefix, info.alias or name)
            found.append(path)
            inner = info.annotation if isinstance(info.annotation, type) else None
            if inner is not None and issubclass(inner, BaseModel):
                walk(inner, path)

    walk(model, ())
    return tuple(found)


def _model_at(loc: tuple) -> type[BaseModel] | None:
    model: type[BaseModel] | None = AgentSpec
    skip_key = False  # the next part is a key of a dict[str, Model] field
    for part in loc:
        if isinstance(part, int):
            continue
        if skip_key:
            skip_key = False
            continue
        if model is None:
            return None
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
        if field is None:
            return None
        skip_key = typing.get_origin(field.annotation) is dict
        model = _model_in(field.annotation)
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is not None:
        for argument in typing.get_args(annotation):
            found = _model_in(argument)
            if found:
                return found
    return None
