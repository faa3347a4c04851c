"""The request bodies litellm puts on the wire, checked with each vendor SDK's own request types.

The OpenAI and Anthropic SDKs describe a request as TypedDicts; pydantic cannot check those
strictly (it refuses a ``config`` for a TypedDict, ignores unknown keys in nested ones by default,
and validates ``Iterable[...]`` fields lazily, i.e. not at all until someone iterates), so
:func:`typed_problems` walks the annotations itself: an unknown key at any depth, a missing
required key, a wrong JSON type or a value outside a ``Literal`` is a problem. google-genai's
types are pydantic models that already forbid unknown fields; they are validated in strict JSON
mode, so ``"5"`` is no integer, and the warning an unknown enum value only raises there counts as
a problem.

Each ``*_problems`` function returns readable lines, e.g.
``anthropic body for vuln-triage@anthropic/claude-sonnet-5-5: `temperature`: extra key not allowed``.
"""

from __future__ import annotations

import collections.abc
import json
import os
import types
import typing
import warnings
from functools import cache
from typing import Any, Literal, NotRequired, Required, Union

import typing_extensions
from pydantic import BaseModel, TypeAdapter, ValidationError

_SEQUENCES = (list, collections.abc.Iterable, collections.abc.Sequence)
_MAPPINGS = (dict, collections.abc.Mapping)
_QUALIFIERS = (Required, NotRequired, typing_extensions.ReadOnly)
_NOT_JSON = (bytes, typing.IO, os.PathLike)
"""File uploads the SDKs accept as Python objects: no JSON value is one of them."""


def openai_problems(body: Any, where: str) -> list[str]:
    """An OpenAI Chat Completions body against ``CompletionCreateParams(Non)Streaming``."""
    from openai.types.chat import completion_create_params as params

    kind = params.CompletionCreateParamsStreaming if _streams(body) else params.CompletionCreateParamsNonStreaming
    return [f"openai body for {where}: {line}" for line in typed_problems(body, kind)]


def anthropic_problems(body: Any, where: str) -> list[str]:
    """An Anthropic Messages body against ``MessageCreateParams(Non)Streaming``."""
    from anthropic.types import message_create_params as params

    kind = params.MessageCreateParamsStreaming if _streams(body) else params.MessageCreateParamsNonStreaming
    return [f"anthropic body for {where}: {line}" for line in typed_problems(body, kind)]


def google_problems(body: Any, where: str) -> list[str]:
    """A Gemini ``generateContent`` REST body: each top-level key with google-genai's type for it."""
    prefix = f"google body for {where}: "
    if not isinstance(body, dict):
        return [prefix + f"expected a JSON object, got {_json_kind(body)}"]
    fields = _google_fields()
    problems = []
    for key, value in body.items():
        adapter = fields.get(key)
        if adapter is None:
            problems.append(prefix + f"`{key}`: extra key not allowed")
            continue
        with warnings.catch_warnings(record=True) as warned:  # an unknown enum value is only a warning
            warnings.simplefilter("always")
            try:
                adapter.validate_json(json.dumps(value), strict=True)
            except ValidationError as error:
                problems += [prefix + f"`{_dotted((key, *e['loc']))}`: {e['msg']}" for e in error.errors()]
        problems += [prefix + f"`{key}`: {w.message}" for w in warned if "is not a valid" in str(w.message)]
    if "contents" not in body:
        problems.append(prefix + "`contents`: missing required key")
    return problems


@cache
def _google_fields() -> dict[str, TypeAdapter[Any]]:
    """generateContent's top-level keys, in the REST API's camelCase and the SDK's snake_case."""
    from google.genai import types as g

    kinds = {"contents": list[g.Content], "system_instruction": g.Content, "generation_config": g.GenerationConfig,
             "tools": list[g.Tool], "tool_config": g.ToolConfig, "safety_settings": list[g.SafetySetting]}
    fields = {}
    for snake, kind in kinds.items():
        adapter = TypeAdapter(kind)
        fields[snake] = fields[_camel(snake)] = adapter
    return fields


def typed_problems(value: Any, annotation: Any, path: tuple[str | int, ...] = ()) -> list[str]:
    """What keeps the JSON ``value`` from being a valid ``annotation`` (an SDK TypedDict or any type
    inside one), as "`path`: problem" lines; empty when it is valid."""
    annotation = _unwrap(annotation)
    origin = typing.get_origin(annotation)
    where = f"`{_dotted(path)}`: " if path else ""
    if annotation is Any or annotation is object:
        return []
    if origin is Union or origin is types.UnionType:
        return _union_problems(value, typing.get_args(annotation), path)
    if origin is Literal:
        allowed = typing.get_args(annotation)
        if any(type(value) is type(option) and value == option for option in allowed):
            return []
        return [where + f"{json.dumps(value)} is not one of {', '.join(json.dumps(a) for a in allowed)}"]
    if typing_extensions.is_typeddict(annotation):
        return _typeddict_problems(value, annotation, path)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [where + f"{annotation.__name__} is an SDK object, not a wire format"]
    if (origin or annotation) in _SEQUENCES:
        if not isinstance(value, list):
            return [where + f"expected an array, got {_json_kind(value)}"]
        (item,) = typing.get_args(annotation) or (Any,)
        return [line for index, entry in enumerate(value) for line in typed_problems(entry, item, (*path, index))]
    if (origin or annotation) in _MAPPINGS:
        if not isinstance(value, dict):
            return [where + f"expected an object, got {_json_kind(value)}"]
        _, item = typing.get_args(annotation) or (str, Any)
        return [line for key, entry in value.items() for line in typed_problems(entry, item, (*path, key))]
    if annotation in (str, int, float, bool, type(None)):
        return [] if _is_scalar(value, annotation) else [
            where + f"expected {_name(annotation)}, got {_json_kind(value)}"]
    if annotation in _NOT_JSON or origin in _NOT_JSON:
        return [where + f"{_name(annotation)} is a Python object, not JSON"]
    raise TypeError(f"vendor_contracts cannot check {annotation!r} (at {_dotted(path) or 'the top'}): add it")


def _typeddict_problems(value: Any, kind: type, path: tuple[str | int, ...]) -> list[str]:
    where = f"`{_dotted(path)}`: " if path else ""
    if not isinstance(value, dict):
        return [where + f"expected an object ({kind.__name__}), got {_json_kind(value)}"]
    fields = _fields(kind)
    problems = [f"`{_dotted((*path, key))}`: extra key not allowed" for key in value if key not in fields]
    problems += [f"`{_dotted((*path, key))}`: missing required key" for key, (_, required) in fields.items()
                 if required and key not in value]
    for key, entry in value.items():
        if key in fields:
            problems += typed_problems(entry, fields[key][0], (*path, key))
    return problems


def _union_problems(value: Any, options: tuple[Any, ...], path: tuple[str | int, ...]) -> list[str]:
    """Valid when one option accepts ``value``; otherwise the problems of the likeliest option: the
    right JSON kind first, then the one whose ``Literal`` keys (``type``, ``role``) match, then the
    one with fewest problems. When no option is even the right kind, say what was expected."""
    ranked = []
    for option in options:
        problems = typed_problems(value, option, path)
        if not problems:
            return []
        ranked.append(((not _kind_fits(value, option), _discriminator_misses(value, option), len(problems)),
                       problems))
    (wrong_kind, misses, _), problems = min(ranked, key=lambda entry: entry[0])
    if wrong_kind:
        where = f"`{_dotted(path)}`: " if path else ""
        return [where + f"expected {' | '.join(_name(o) for o in options)}, got {_json_kind(value)}"]
    if misses:  # no variant has this `type` / `role`: list every one the union allows
        return [f"`{_dotted((*path, key))}`: {json.dumps(value[key])} is not one of "
                f"{', '.join(json.dumps(a) for a in allowed)}" for key, allowed in _discriminators(options).items()
                if key in value and value[key] not in allowed]
    return problems


def _kind_fits(value: Any, option: Any) -> bool:
    """Whether ``value`` is the JSON kind ``option`` describes (object, array, string, ...)."""
    option = _unwrap(option)
    origin = typing.get_origin(option) or option
    if origin is Union or origin is types.UnionType:
        return any(_kind_fits(value, o) for o in typing.get_args(option))
    if origin is Literal:
        return any(type(value) is type(o) for o in typing.get_args(option))
    if typing_extensions.is_typeddict(option) or origin in _MAPPINGS:
        return isinstance(value, dict)
    if origin in _SEQUENCES:
        return isinstance(value, list)
    if option in (str, int, float, bool, type(None)):
        return _is_scalar(value, option)
    return option is Any or option is object


def _discriminator_misses(value: Any, option: Any) -> int:
    """How many of ``option``'s Literal-typed keys ``value`` has with another value."""
    option = _unwrap(option)
    if not (isinstance(value, dict) and typing_extensions.is_typeddict(option)):
        return 0
    misses = 0
    for key, (annotation, _) in _fields(option).items():
        annotation = _unwrap(annotation)
        if key in value and typing.get_origin(annotation) is Literal and value[key] not in typing.get_args(annotation):
            misses += 1
    return misses


def _discriminators(options: tuple[Any, ...]) -> dict[str, list[Any]]:
    """The values each Literal-typed key may take in some TypedDict of a union."""
    allowed: dict[str, list[Any]] = {}
    for option in map(_unwrap, options):
        if typing_extensions.is_typeddict(option):
            for key, (annotation, _) in _fields(option).items():
                annotation = _unwrap(annotation)
                if typing.get_origin(annotation) is Literal:
                    allowed.setdefault(key, []).extend(typing.get_args(annotation))
    return allowed


@cache
def _fields(kind: type) -> dict[str, tuple[Any, bool]]:
    """A TypedDict's keys: (annotation, required). Computed here because ``__required_keys__`` is
    empty for the SDKs' classes on Python 3.11 (their modules use ``from __future__ import annotations``,
    so ``Required[...]`` is still a string when the class is made)."""
    hints = typing.get_type_hints(kind, include_extras=True)
    fields = {}
    for key, annotation in hints.items():
        required = _total_for(kind, key)
        while typing.get_origin(annotation) in _QUALIFIERS:
            if typing.get_origin(annotation) is Required:
                required = True
            elif typing.get_origin(annotation) is NotRequired:
                required = False
            (annotation,) = typing.get_args(annotation)
        fields[key] = (annotation, required)
    return fields


def _total_for(kind: type, key: str) -> bool:
    """The ``total=`` of the TypedDict (``kind`` or a base) that declares ``key``."""
    for base in getattr(kind, "__orig_bases__", ()):
        if typing_extensions.is_typeddict(base) and key in base.__annotations__:
            return _total_for(base, key)
    return kind.__total__


def _unwrap(annotation: Any) -> Any:
    """The type under ``Annotated[...]``, ``Required[...]`` and type aliases."""
    while True:
        if isinstance(annotation, typing_extensions.TypeAliasType):
            annotation = annotation.__value__
        elif typing.get_origin(annotation) is typing.Annotated or typing.get_origin(annotation) in _QUALIFIERS:
            annotation = typing.get_args(annotation)[0]
        else:
            return annotation


def _streams(body: Any) -> bool:
    return isinstance(body, dict) and body.get("stream") is True


def _is_scalar(value: Any, kind: type) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _json_kind(value: Any) -> str:
    kinds = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}
    return "null" if value is None else f"{kinds.get(type(value), type(value).__name__)} {json.dumps(value)[:40]}"


def _name(annotation: Any) -> str:
    annotation = _unwrap(annotation)
    if annotation is type(None):
        return "null"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin is Union or origin is types.UnionType:
        return " | ".join(_name(a) for a in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', origin)}[{', '.join(_name(a) for a in args)}]"
    return getattr(annotation, "__name__", str(annotation))


def _dotted(path: tuple[Any, ...]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(word.title() for word in rest)
