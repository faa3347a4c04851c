"""Typing the merged frontmatter, tolerantly: only what rosetta cannot run without refuses a
definition (no name, a structured-output schema that is not a mapping, an expression it would
enforce that does not compile, input names it cannot fill). Any other value it cannot read is set
aside and recorded for lint to report: a value outside an enum (:class:`OffListValue`, the field
takes its default), a known field in an unexpected shape (:class:`UnreadValue`, kept as written and
carried into compiled artifacts). A refusal is a problem a person can act on: the file and line of
the field, what was expected, what was found, and a hint (e.g. the field name that was meant)."""

from __future__ import annotations

import copy
import functools
import re
import types
import typing
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ValidationError

from rosetta.definition.formats import RawDefinition
from rosetta.definition.input_rules import rules_by_input
from rosetta.definition.document import KEPT_AS_WRITTEN, OffListValue, UnreadValue
from rosetta.definition.models import OPEN_VALUE_SETS, AgentSpec, inputs_by_name
from rosetta.definition.yaml_source import FieldPath, format_path
from rosetta.errors import DefinitionError, Location, Problem

_OFF_LIST_ERRORS = {"enum", "literal_error"}
"""Error kinds that mean "a value outside the known set"."""
_UNION_TAG = re.compile(r"^(str|int|float|bool|list\[.*\]|dict\[.*\]|[A-Z]\w*)$")


def validate_spec(raw: RawDefinition) -> tuple[AgentSpec, tuple[OffListValue, ...], tuple[UnreadValue, ...]]:
    """The typed spec, the off-list values and the unread shapes set aside to get it; a value rosetta
    cannot run without raises one :class:`DefinitionError` with every such problem located."""
    data, off_list_errors, unread = _as_read(raw.data), [], []
    while True:
        try:
            spec = AgentSpec.model_validate(data)
            break
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
            hard = [error for error in errors if _refuses(error, data)]
            if hard:
                problems = [_problem(error, raw) for error in hard]
                problems.sort(key=lambda p: (p.location.file or "", p.location.line or 0, p.location.column or 0))
                raise DefinitionError(problems) from None
            data = copy.deepcopy(data) if data is raw.data else data
            targets: dict[FieldPath, Any] = {}
            for error in sorted(errors, key=_named_depth, reverse=True):  # a union's most telling error
                targets.setdefault(_target(data, tuple(error["loc"])), error)
            if () in targets:  # nothing smaller to set aside
                raise DefinitionError([_problem(targets[()], raw)]) from None
            # an ancestor set aside takes its descendants with it; deepest and last first, so that
            # removing a list item does not shift the next one
            kept = {path: error for path, error in targets.items()
                    if not any(path[:n] in targets for n in range(len(path)))}
            for path in sorted(kept, key=_sort_key, reverse=True):
                error = kept[path]
                value = _remove(data, path)
                if error["type"] in _OFF_LIST_ERRORS and tuple(error["loc"]) == path:
                    off_list_errors.append(error)
                else:
                    unread.append((path, value, error))
    off_list = [OffListValue(_source_path(raw.data, tuple(e["loc"])), e["input"], _expected_values(e),
                             _used_instead(spec, tuple(e["loc"]))) for e in off_list_errors]
    off_list += _unlisted_descriptive_values(spec)
    shapes = [UnreadValue(_source_path(raw.data, path), value, *_shape(path, value, error), _used_instead(spec, path))
              for path, value, error in unread]
    return (spec, tuple(sorted(off_list, key=lambda v: _sort_key(v.path))),
            tuple(sorted(shapes, key=lambda v: _sort_key(v.path))))


def _as_read(written: dict[str, Any]) -> dict[str, Any]:
    """``written`` with the shapes the models rewrite (inputs as lists, input rules as a mapping)
    already rewritten, so that every error's path leads into this data (a copy when it differs)."""
    inputs = written.get("inputs")
    guardrails = written.get("guardrails")
    rules = guardrails.get("input_validation") if isinstance(guardrails, dict) else None
    if inputs_by_name(inputs) == inputs and not isinstance(rules, dict):
        return written
    data = copy.deepcopy(written)
    if "inputs" in data:
        data["inputs"] = inputs_by_name(data["inputs"])
    if isinstance(rules, dict):
        data["guardrails"]["input_validation"] = rules_by_input(data["guardrails"]["input_validation"])
    return data


def _named_depth(error: Any) -> int:
    """How many field names an error's path holds (a union's member tags, such as ``str``, not counted)."""
    return sum(isinstance(part, str) and not _UNION_TAG.match(part) for part in error["loc"])


def _refuses(error: Any, data: Any) -> bool:
    """Whether ``error`` is about something rosetta cannot run without."""
    loc = tuple(error["loc"])
    if loc[:1] == ("name",) or (loc == ("inputs",) and error["type"] == "value_error"):
        return True  # no agent without a name; no call without inputs it can fill
    if loc[:2] == ("output", "schema"):
        output = data.get("output") if isinstance(data, dict) else None
        return isinstance(output, dict) and output.get("required") is True
    return "invalid regular expression" in error.get("msg", "")


def _target(data: Any, loc: FieldPath) -> FieldPath:
    """The part of the data to set aside for an error at ``loc``: the value there (union member
    tags in ``loc`` skipped), or the item holding a required field that is missing or unusable
    (a tool without a usable name is no tool)."""
    path: list[Any] = []
    for part in loc:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        elif isinstance(part, str) and _UNION_TAG.match(part):
            continue
        else:
            return tuple(path)  # a missing field: set aside what should have held it
        path.append(part)
    return tuple(path[:-1]) if _required(tuple(path)) else tuple(path)


def _required(path: FieldPath) -> bool:
    """Whether the field at ``path`` is one its model cannot do without (e.g. a tool's name)."""
    if not path or not isinstance(path[-1], str):
        return False
    model = _model_at(path[:-1])
    field = next((f for n, f in model.model_fields.items() if (f.alias or n) == path[-1]), None) if model else None
    return field is not None and field.is_required()


def _source_path(written: Any, path: FieldPath) -> FieldPath:
    """``path`` as written: an index into a shape the loader rewrote (input rules written as a
    mapping, inputs written as lists) becomes the name it was written under."""
    if path[:2] == ("guardrails", "input_validation") and len(path) > 2:
        rules = written.get("guardrails", {}).get("input_validation") if isinstance(written.get("guardrails"), dict) \
            else None
        if isinstance(rules, dict) and isinstance(path[2], int):
            converted = rules_by_input(rules)
            if path[2] < len(converted):
                return (*path[:2], converted[path[2]]["field"], *path[3:])
    if path[:1] == ("inputs",) and len(path) > 1 and isinstance(written.get("inputs"), list):
        names = list(inputs_by_name(written["inputs"]))
        if path[1] in names:
            return ("inputs", names.index(path[1]), *path[2:])
    return path


def _sort_key(path: FieldPath) -> tuple[tuple[bool, str | int], ...]:
    return tuple((isinstance(part, str), part) for part in path)


def _remove(data: Any, path: FieldPath) -> Any:
    for part in path[:-1]:
        data = data[part]
    value = data[path[-1]]
    del data[path[-1]]
    return value


def _expected_values(error: Any) -> tuple[str, ...]:
    expected = error.get("ctx", {}).get("expected", "")
    return tuple(re.findall(r"'([^']*)'", expected))


def _used_instead(spec: AgentSpec, loc: FieldPath) -> str:
    """In words, what the spec holds in place of the value set aside at ``loc``."""
    if isinstance(loc[-1], int):
        return "skips it"  # a list item
    value: Any = spec
    for part in loc:
        if isinstance(value, BaseModel):
            assert isinstance(part, str)  # a model is reached through a mapping, whose keys are text
            fields = type(value).model_fields
            value = getattr(value, next((n for n, f in fields.items() if (f.alias or n) == part), part))
        elif isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
            value = value[part]
        else:
            return "ignores it"  # a list item or mapping entry was skipped
    if value is None:
        return "treats the field as not set"
    if value == [] or value == {}:
        return "treats it as empty"
    if isinstance(value, BaseModel):
        return "uses the section's defaults"
    return f"uses {getattr(value, 'value', value)!r}"


def _unlisted_descriptive_values(spec: AgentSpec) -> list[OffListValue]:
    found = []
    for path, known in OPEN_VALUE_SETS.items():
        value: Any = spec
        for part in path:
            value = getattr(value, part)
        items: Iterable[tuple[int | None, Any]] = enumerate(value) if isinstance(value, list) else [(None, value)]
        for index, item in items:
            if item is not None and item not in set(known):
                where: FieldPath = path if index is None else (*path, index)
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


def _shape(path: FieldPath, value: Any, error: Any) -> tuple[str, str]:
    """(the shape found, the shapes read there), in words; when a whole item is set aside for one of
    its fields (a tool whose name is unusable), both name that field."""
    loc = tuple(error["loc"])
    inner = next((part for part in reversed(loc) if isinstance(part, str) and not _UNION_TAG.match(part)), None)
    if loc[:len(path)] == path and len(loc) > len(path) and inner is not None:
        found = "missing" if error["type"] == "missing" else _describe(error["input"])
        return f"{_describe(value)} whose {inner!r} is {found}", f"{inner!r} to be {_expected(error)}"
    return _describe(value), _expected(error)


_BOUNDS = {"le": "≤", "ge": "≥", "lt": "<", "gt": ">"}


def _expected(error: Any) -> str:
    """The shapes the field takes, in words."""
    kind = error["type"]
    if kind == "missing":
        return "given"
    if kind == "string_pattern_mismatch":
        return f"text matching {error['ctx']['pattern']}"
    if kind in ("string_too_short", "too_short"):
        return f"at least {error['ctx']['min_length']} character(s) or item(s)"
    if kind in ("string_too_long", "too_long"):
        return f"at most {error['ctx']['max_length']} character(s) or item(s)"
    bound = next(((sign, error["ctx"][key]) for key, sign in _BOUNDS.items() if key in error.get("ctx", {})), None)
    if bound is not None:
        return f"a number {bound[0]} {bound[1]}"
    return _EXPECTED.get(kind) or error["msg"].removeprefix("Value error, ")


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


def locate_field(raw: RawDefinition, loc: FieldPath) -> tuple[str, int | None, int | None]:
    """(file, line, column) of a field path, or of its nearest ancestor that has a position."""
    for end in range(len(loc), -1, -1):
        found = raw.locations.get(loc[:end])
        if found:
            return found
    return str(raw.path), None, None


def known_fields(loc: FieldPath) -> list[str]:
    """Field names (by alias) of the model found at ``loc`` inside :class:`AgentSpec` (list indices
    and mapping keys in ``loc`` are skipped over); empty when ``loc`` is not a model."""
    model = _model_at(loc)
    return [f.alias or n for n, f in model.model_fields.items()] if model else []


def nested_fields(loc: FieldPath) -> list[tuple[str, ...]]:
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


def _model_at(loc: FieldPath) -> type[BaseModel] | None:
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
