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
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

MAX_PATTERN_CHARS = 10_000
"""Longest expression accepted: validation rules are a line or two, never a document."""
MAX_GROUP_DEPTH = 64
"""Deepest nesting of groups accepted (the YAML nesting limit); deeper ones exhaust the parsers' stack."""
MAX_EXPANSION = 100_000
"""Most copies compiling may make: ``regex`` writes out the *minimum* count of a repeat (``{n}``,
``{n,m}``), about 260 bytes each, so ``a{1000000000}`` took 5.7 GB and ``(?:a{10000}){10000}``
(nested minimums multiply) as much; 100,000 is 26 MB. A range's maximum costs nothing
(``[\\s\\S]{0,60000}``, a length cap real definitions use, is fine)."""
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


_COUNT = re.compile(r"\{(\d+)(?:,(\d*))?\}")


def shape(pattern: str) -> tuple[int, int]:
    """(how deeply groups nest, the most copies its repeats make: the largest product of nested
    minimum counts) in ``pattern``, escapes and character classes skipped, in one pass."""
    depth = deepest = 0
    inner = [1]  # per open group: the largest expansion inside it so far
    closed = 1  # the expansion of the group that just closed (a count after ``)`` multiplies it)
    index, length = 0, len(pattern)
    in_class = False
    while index < length:
        char = pattern[index]
        if char == "\\":
            index, closed = index + 2, 1
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class, closed = True, 1
            index += 1
            if pattern[index:index + 1] == "^":
                index += 1
            if pattern[index:index + 1] == "]":  # a ']' first in a class is a literal
                index += 1
            continue
        elif char == "(":
            depth += 1
            deepest = max(deepest, depth)
            inner.append(1)
        elif char == ")":
            depth = max(0, depth - 1)
            closed = inner.pop() if len(inner) > 1 else 1
            inner[-1] = max(inner[-1], closed)
            index += 1
            continue
        elif char == "{" and (count := _COUNT.match(pattern, index)):
            inner[-1] = max(inner[-1], int(count.group(1)) * closed)
            index = count.end()
            continue
        closed = 1
        index += 1
    return deepest, max(inner)


def group_depth(pattern: str) -> int:
    """How deeply groups nest in ``pattern`` (escapes and character classes skipped)."""
    return shape(pattern)[0]


def check_shape(pattern: str) -> None:
    """Raise :class:`PatternError` when ``pattern`` is too long, nests groups too deeply, or repeats
    (or nests repeats) past what compiling it can afford."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(f"the expression is {len(pattern):,} characters long; the limit is {MAX_PATTERN_CHARS:,}")
    depth, copies = shape(pattern)
    if depth > MAX_GROUP_DEPTH:
        raise PatternError(f"the expression nests groups {depth} deep; the limit is {MAX_GROUP_DEPTH}")
    if copies > MAX_EXPANSION:
        raise PatternError(f"the expression repeats something at least {copies:,} times (nested counts multiply); "
                           f"the limit is {MAX_EXPANSION:,}: use a range such as {{0,{copies}}}, whose maximum "
                           "costs nothing")


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
    base = validator_for(schema, default=Draft202012Validator)
    keywords = {"pattern": _bounded_pattern, "patternProperties": _bounded_pattern_properties,
                "additionalProperties": _bounded_additional_properties}
    if "unevaluatedProperties" in base.VALIDATORS:
        keywords["unevaluatedProperties"] = _guarded(base.VALIDATORS["unevaluatedProperties"])
    return extend(base, keywords)(schema)


def _key_matches(pattern: str, key: str) -> bool | ValidationError:
    """Whether an object key matches one of the schema's ``patternProperties``: True, False, or the
    ValidationError to report when it cannot be told in time (or the pattern cannot be used)."""
    from jsonschema.exceptions import ValidationError

    try:
        return search(pattern, key)
    except PatternTimeout:
        return ValidationError(f"checking the key {shown(key)} against {shown(pattern)} ran out of time; give "
                               "shorter, plainer keys")
    except PatternError as error:
        return ValidationError(f"the schema's pattern {shown(pattern)} cannot be used: {error}")


def _bounded_pattern_properties(validator: Any, patterns: Any, instance: Any,
                                schema: Any) -> Iterator[ValidationError]:
    """jsonschema's ``patternProperties``, its searches under the time limit."""
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            matched = _key_matches(pattern, key)
            if matched is True:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)
            elif matched is not False:
                yield matched


def _bounded_additional_properties(validator: Any, additional: Any, instance: Any,
                                   schema: Any) -> Iterator[ValidationError]:
    """jsonschema's ``additionalProperties``, which matches keys against ``patternProperties`` too."""
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    properties, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
    extras = []
    for key in instance:
        if key in properties:
            continue
        results = [_key_matches(pattern, key) for pattern in patterns]
        errors = [result for result in results if result not in (True, False)]
        yield from errors
        if not errors and not any(results):
            extras.append(key)
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        joined = ", ".join(repr(each) for each in sorted(extras))
        if patterns:
            yield ValidationError(f"{joined} {'does' if len(extras) == 1 else 'do'} not match any of the regexes: "
                                  + ", ".join(repr(each) for each in sorted(patterns)))
        else:
            yield ValidationError(f"Additional properties are not allowed ({joined} "
                                  f"{'was' if len(extras) == 1 else 'were'} unexpected)")


def _guarded(keyword: Any) -> Any:
    """``unevaluatedProperties``, which matches keys against this node's ``patternProperties`` with
    ``re``: each match is first tried under the time limit, and a key that cannot be told in time is
    reported instead of searched without one."""
    def bounded(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if validator.is_type(instance, "object"):
            errors = [result for pattern in schema.get("patternProperties", {}) for key in instance
                      if (result := _key_matches(pattern, key)) not in (True, False)]
            if errors:
                yield from errors
                return
        yield from keyword(validator, value, instance, schema)
    return bounded


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
