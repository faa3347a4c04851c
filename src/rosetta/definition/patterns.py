"""Regular expressions from definitions: compiled once, bounded in size and nesting, searched with a
time limit.

Expressions in ``guardrails.input_validation`` come from whoever wrote the definition and run on
text from whoever calls the agent. Python's ``re`` backtracks without limit, so ``^(a+)+$`` and
forty characters of input hang a process. They are compiled with the ``regex`` package (``re``'s
syntax, plus a ``timeout`` on every search), and their nesting is checked before either parser,
both recursive, sees them. ``rosetta validate`` finds such expressions ahead of time (RS-006); the
timeout is what guarantees a bounded run.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

MAX_PATTERN_CHARS = 10_000
"""Longest expression accepted: validation rules are a line or two, never a document."""
MAX_GROUP_DEPTH = 64
"""Deepest nesting of groups accepted (the YAML nesting limit); deeper ones exhaust the parsers' stack."""
SEARCH_TIMEOUT_S = 0.25
"""Longest one search may take. A linear expression scans a megabyte in milliseconds; only a
backtracking one runs this long, and then its answer is unknown."""


class PatternError(ValueError):
    """An expression that cannot be used: too long, nested too deeply, or not valid syntax."""


class PatternTimeout(Exception):
    """A search that did not finish within its time limit (the expression backtracks on this text)."""

    def __init__(self, pattern: str, seconds: float) -> None:
        super().__init__(f"searching with {pattern!r} took longer than {seconds:g} s")
        self.pattern = pattern
        self.seconds = seconds


def shown(pattern: str, limit: int = 80) -> str:
    """``pattern`` quoted for a message, cut short when long."""
    return repr(pattern if len(pattern) <= limit else pattern[:limit - 3] + "...")


def group_depth(pattern: str) -> int:
    """How deeply groups nest in ``pattern`` (escapes and character classes skipped), in one pass."""
    depth = deepest = 0
    index, length = 0, len(pattern)
    in_class = False
    while index < length:
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            index += 1
            if pattern[index:index + 1] == "^":
                index += 1
            if pattern[index:index + 1] == "]":  # a ']' first in a class is a literal
                index += 1
            continue
        elif char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth = max(0, depth - 1)
        index += 1
    return deepest


def check_shape(pattern: str) -> None:
    """Raise :class:`PatternError` when ``pattern`` is too long or nests groups too deeply."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(f"the expression is {len(pattern):,} characters long; the limit is {MAX_PATTERN_CHARS:,}")
    depth = group_depth(pattern)
    if depth > MAX_GROUP_DEPTH:
        raise PatternError(f"the expression nests groups {depth} deep; the limit is {MAX_GROUP_DEPTH}")


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> Any:
    """``pattern`` compiled by the ``regex`` package, or :class:`PatternError` saying why it cannot be."""
    import regex

    check_shape(pattern)
    try:
        return regex.compile(pattern)
    except (regex.error, OverflowError, RecursionError, ValueError) as exc:
        raise PatternError(f"not a valid regular expression: {exc}") from None


def search(pattern: str, text: str, *, timeout: float = SEARCH_TIMEOUT_S) -> bool:
    """Whether ``pattern`` occurs in ``text``; raises :class:`PatternTimeout` past ``timeout`` seconds.

    The search keeps the GIL (``concurrent=False``): ``regex`` otherwise lets it go during a search
    and counts the wait to take it back against the limit, so with many busy threads (500 concurrent
    calls) a 100-character input was refused after 0.25 s of waiting and microseconds of work. Held,
    the GIL is kept at most ``timeout`` seconds, the bound on a backtracking search either way."""
    try:
        return compile_pattern(pattern).search(text, timeout=timeout, concurrent=False) is not None
    except TimeoutError:
        raise PatternTimeout(pattern, timeout) from None


@lru_cache(maxsize=256)
def schema_validator(schema_text: str) -> Any:
    """A jsonschema validator of the schema (JSON text) whose ``pattern`` keyword searches under
    the time limit: the pattern comes from a definition, the text from a model, and ``re`` (which
    jsonschema uses) backtracks without limit. The runtime and the DSPy interop validate with it."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import extend, validator_for

    schema = json.loads(schema_text)
    return extend(validator_for(schema, default=Draft202012Validator), {"pattern": _bounded_pattern})(schema)


def _bounded_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Any:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "string"):
        return
    try:
        matched = search(pattern, instance)
    except PatternTimeout:
        yield ValidationError(f"checking the answer against {shown(pattern)} ran out of time; give a shorter, "
                              "plainer value")
    except PatternError as error:
        yield ValidationError(f"the schema's pattern {shown(pattern)} cannot be used: {error}")
    else:
        if not matched:
            shown_value = instance if len(instance) <= 200 else instance[:150] + "…" + instance[-40:]
            yield ValidationError(f"{shown_value!r} does not match {shown(pattern)}")
