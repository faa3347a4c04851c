"""JSON Schema → llama.cpp grammar (GBNF) for the local/ provider's constrained decoding.

llama-cpp-python's converter does most of the work; three of its gaps would let the model write
JSON that does not parse, or a grammar that does not build, so they are closed here:

- string ``pattern``: the converter accepts only ``^…$`` patterns, lets ``.`` produce ``"`` (which
  ends the JSON string) and copies escapes such as ``\\d`` into literals. Patterns are translated
  here instead, from Python's own regex parser, into a grammar that produces a *subset* of the
  matching strings, each a valid JSON string body (no raw quotes, backslashes or control chars).
  A pattern the grammar cannot express (look-arounds, back-references, flags, anchors in the
  middle) is left out of the grammar — the answer is still validated against the full schema.
- raw control characters (a newline inside a string) are not valid JSON: strings exclude them.
- long ``maxLength`` / ``maxItems`` become GBNF's ``{m,n}`` repetition, not n nested rules.

What the grammar never expresses (numeric bounds, ``uniqueItems``, most ``format``s, lengths of
patterned strings) is checked by rosetta's validation after the call, like any provider's answer.
"""

from __future__ import annotations

import json
import logging
from typing import Any

log = logging.getLogger("rosetta.local")

_SAFE_CHAR = r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})'
"""One JSON string character: no raw control characters (llama.cpp upstream's rule)."""
_ANY = r'[^"\\\x7F\x00-\x1F]'
"""What a regex ``.`` or an unanchored end may add: any plain character that needs no escape."""
_UNSAFE = {ord('"'), ord("\\"), 0x7F, *range(0x20)}
_PRINTABLE = [(0x20, 0x7E)]
_CATEGORIES = {  # ASCII subsets of Python's (Unicode) classes: every character they give also matches
    "CATEGORY_DIGIT": [(0x30, 0x39)],
    "CATEGORY_WORD": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
    "CATEGORY_SPACE": [(0x20, 0x20)],  # \t \n \r would need escapes inside JSON
}


class Unsupported(ValueError):
    """A regex feature the grammar cannot express."""


def schema_to_gbnf(schema: dict[str, Any] | None) -> str:
    """A GBNF grammar whose every sentence is JSON (valid against ``schema`` where expressible)."""
    from llama_cpp.llama_grammar import JSON_GBNF

    if schema is None:
        return JSON_GBNF
    converter = _converter_class()(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    resolved = converter.resolve_refs(json.loads(json.dumps(schema)), "schema")
    converter.visit(resolved, "")
    return converter.format_grammar()


def pattern_to_gbnf(pattern: str, min_length: int = 0, max_length: int | None = None) -> str:
    """The GBNF body (between the JSON string's quotes) producing strings that match ``pattern``.

    An unanchored pattern gets free text on one side only (a subset of what it matches, and one
    decision fewer for the model), sized so the string keeps within ``min_length``/``max_length``
    whenever the pattern's own width is bounded. Raises :class:`Unsupported` for what the grammar
    cannot express.
    """
    import re

    try:
        parsed = re._parser.parse(pattern)  # type: ignore[attr-defined]
    except re.error as exc:
        raise Unsupported(f"not a valid regular expression: {exc}") from None
    if parsed.state.flags & ~(re.UNICODE | re.ASCII):  # (?i), (?m), ... change what matches
        raise Unsupported("inline flags")
    return _top(parsed, min_length, max_length, max_length if max_length is not None else UNBOUNDED_CAP)


UNBOUNDED_CAP = 256
"""Longest run an unbounded repeat (``\\d+``, free text) may have when no ``maxLength`` says:
fewer than the pattern allows is still a match, and a small greedy model cannot loop forever."""
_SKIP_KEYWORDS = ("$ref", "oneOf", "anyOf", "allOf", "const", "enum", "items", "prefixItems", "properties")


def _converter_class() -> type:
    """llama-cpp-python's converter with the three repairs above (built on first use: llama_cpp
    is an optional extra)."""
    global _Converter
    if _Converter is not None:
        return _Converter
    from llama_cpp.llama_grammar import PRIMITIVE_RULES, RESERVED_NAMES, BuiltinRule, SchemaConverter

    class Converter(SchemaConverter):  # type: ignore[misc,valid-type]
        def visit(self, schema: Any, name: str) -> str:
            if isinstance(schema, dict) and schema.get("type", "string") == "string" \
                    and not any(key in schema for key in _SKIP_KEYWORDS):
                rule_name = name + "-" if name in RESERVED_NAMES else name or "root"
                if "pattern" in schema:
                    try:
                        body = pattern_to_gbnf(schema["pattern"], schema.get("minLength", 0), schema.get("maxLength"))
                    except Unsupported as exc:
                        log.debug("pattern %r left out of the grammar: %s", schema["pattern"], exc)
                        return self.visit({k: v for k, v in schema.items() if k != "pattern"}, name)
                    return self._add_rule(rule_name, rf'"\"" {body} "\"" space')
                if ("minLength" in schema or "maxLength" in schema) and "format" not in schema:
                    char = self._add_primitive("char", PRIMITIVE_RULES["char"])
                    length = _repeat(char, schema.get("minLength", 0), schema.get("maxLength"))
                    return self._add_rule(rule_name, rf'"\"" {length} "\"" space')
            if isinstance(schema, dict) and schema.get("type") == "array" and isinstance(schema.get("items"), dict) \
                    and schema.get("maxItems") is not None and int(schema["maxItems"]) > 4:
                item = self.visit(schema["items"], f"{name}{'-' if name else ''}item")
                low, high = int(schema.get("minItems", 0)), int(schema["maxItems"])
                rest = rf'("," space {item}){{{max(low - 1, 0)},{high - 1}}}'
                body = f"{item} {rest}" if low > 0 else f"({item} {rest})?"
                return self._add_rule(name + "-" if name in RESERVED_NAMES else name or "root",
                                      rf'"[" space {body} "]" space')
            return super().visit(schema, name)

        def _add_primitive(self, name: str, rule: Any) -> str:
            if name == "char":
                rule = BuiltinRule(_SAFE_CHAR, [])
            return super()._add_primitive(name, rule)

    _Converter = Converter
    return Converter


_Converter: type | None = None


def _repeat(item: str, low: int, high: int | None) -> str:
    if high is None:
        return f"{item}{{{low},}}" if low else f"{item}*"
    return f"{item}{{{low},{high}}}"


# -- regex → GBNF -----------------------------------------------------------------------------

def _top(pattern: Any, low: int, high: int | None, cap: int) -> str:
    """The whole pattern (a ``re._parser.SubPattern``): JSON Schema patterns search, so an
    unanchored side may hold any text."""
    from re import _constants as c  # type: ignore[attr-defined]

    if len(pattern) == 1 and pattern[0][0] is c.BRANCH:  # a|b: each branch anchored on its own
        return "(" + " | ".join(_top(branch, low, high, cap) for branch in pattern[0][1][1]) + ")"
    starts = len(pattern) > 0 and pattern[0] == (c.AT, c.AT_BEGINNING)
    ends = len(pattern) > 0 and pattern[-1][0] is c.AT and pattern[-1][1] in (c.AT_END, c.AT_END_STRING)
    core = pattern[1 if starts else 0:len(pattern) - 1 if ends else len(pattern)]
    fewest = core.getwidth()[0]
    if high is not None:  # the longest repeat that keeps the whole string within maxLength
        cap = max([0] + [n for n in range(min(cap, high) + 1) if _width(list(core), n) <= high])
    body = _sequence(list(core), cap)
    if starts and ends:
        return body or '""'
    free_low = max(low - fewest, 0)
    free_high = (high if high is not None else cap) - _width(list(core), cap)
    if free_high is not None and free_high < free_low:
        raise Unsupported("the pattern cannot keep within minLength/maxLength")
    free = "" if free_high == 0 else _repeat(_ANY, free_low, free_high)
    parts = [body, free] if starts else [free, body]  # ^abc → "abc…"; abc$ and abc → "…abc"
    return " ".join(p for p in parts if p) or '""'


def _width(items: list[tuple[Any, Any]], cap: int) -> int:
    """The longest string ``_sequence(items, cap)`` produces."""
    from re import _constants as c  # type: ignore[attr-defined]

    total = 0
    for op, arg in items:
        if op is c.BRANCH:
            total += max(_width(list(b), cap) for b in arg[1])
        elif op is c.SUBPATTERN:
            total += _width(list(arg[3]), cap)
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)):
            low, high, inner = arg
            total += (max(low, cap) if high is c.MAXREPEAT else high) * _width(list(inner), cap)
        elif op is not c.AT:
            total += 1
    return total


def _sequence(items: list[tuple[Any, Any]], cap: int) -> str:
    from re import _constants as c  # type: ignore[attr-defined]

    parts: list[str] = []
    text = ""  # consecutive literal characters become one GBNF literal
    for op, arg in items:
        if op is c.LITERAL:
            text += chr(arg)
            continue
        if text:
            parts.append(_literal(text))
            text = ""
        parts.append(_node(op, arg, cap))
    if text:
        parts.append(_literal(text))
    return " ".join(parts)


def _node(op: Any, arg: Any, cap: int) -> str:
    from re import _constants as c  # type: ignore[attr-defined]

    if op is c.NOT_LITERAL:
        return _negated_class([(arg, arg)])
    if op is c.ANY:
        return _ANY
    if op is c.IN:
        return _class(arg)
    if op is c.BRANCH:
        return "(" + " | ".join(_sequence(list(b), cap) or '""' for b in arg[1]) + ")"
    if op is c.SUBPATTERN:
        _group, add_flags, del_flags, inner = arg
        if add_flags or del_flags:
            raise Unsupported("inline flags")
        return "(" + (_sequence(list(inner), cap) or '""') + ")"
    if op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)):
        low, high, inner = arg
        body = "(" + (_sequence(list(inner), cap) or '""') + ")"
        return _repeat(body, low, max(low, cap) if high is c.MAXREPEAT else high)
    raise Unsupported(str(op).lower())


def _literal(text: str) -> str:
    """A GBNF literal for ``text`` as it appears inside a JSON string (escaped where JSON needs it)."""
    encoded = json.dumps(text, ensure_ascii=False)[1:-1]
    return '"' + "".join(f"\\x{ord(ch):02X}" if ch in '"\\' or ord(ch) < 0x20 else ch for ch in encoded) + '"'


def _class(items: list[tuple[Any, Any]]) -> str:
    """A character class. Classes built from categories (``\\d``, ``\\W``, ``[^\\s,]``) are read
    over printable ASCII only, which keeps what they produce inside Python's Unicode meaning."""
    from re import _constants as c  # type: ignore[attr-defined]

    negate = bool(items) and items[0][0] is c.NEGATE
    named: list[tuple[int, int]] = []  # what the class lists, before any negation
    categories = False
    for op, arg in items[1:] if negate else items:
        if op is c.LITERAL:
            named.append((arg, arg))
        elif op is c.RANGE:
            named.append(arg)
        elif op is c.CATEGORY and str(arg).replace("_NOT", "") in _CATEGORIES:
            categories = True
            ascii_set = _CATEGORIES[str(arg).replace("_NOT", "")]
            named += _printable_outside(ascii_set) if "_NOT_" in str(arg) else ascii_set
        else:
            raise Unsupported(f"character class item {op} {arg}")
    if negate and not categories:
        return _negated_class(named)
    ranges = _printable_outside(named) if negate else named
    alternatives = []
    safe = _subtract(ranges, _UNSAFE)
    if safe:
        alternatives.append("[" + "".join(_range(lo, hi) for lo, hi in safe) + "]")
    alternatives += [_literal(ch) for ch in '"\\' if any(lo <= ord(ch) <= hi for lo, hi in ranges)]
    if not alternatives:  # control characters only: JSON would need escapes the grammar does not offer
        raise Unsupported("a character class of control characters only")
    return alternatives[0] if len(alternatives) == 1 else "(" + " | ".join(alternatives) + ")"


def _printable_outside(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return _subtract(_PRINTABLE, {x for x in range(0x20, 0x7F) if any(lo <= x <= hi for lo, hi in ranges)})


def _negated_class(excluded: list[tuple[int, int]]) -> str:
    """Any plain character outside ``excluded`` (and never one that JSON would need escaped)."""
    return "[^" + "".join(_range(lo, hi) for lo, hi in [*excluded, (0, 0x1F), (0x22, 0x22), (0x5C, 0x5C),
                                                        (0x7F, 0x7F)]) + "]"


def _subtract(ranges: list[tuple[int, int]], points: set[int]) -> list[tuple[int, int]]:
    result = []
    for lo, hi in ranges:
        start = lo
        for point in sorted(p for p in points if lo <= p <= hi):
            if start < point:
                result.append((start, point - 1))
            start = point + 1
        if start <= hi:
            result.append((start, hi))
    return result


def _range(lo: int, hi: int) -> str:
    return _char(lo) if lo == hi else f"{_char(lo)}-{_char(hi)}"


def _char(code: int) -> str:
    if chr(code).isascii() and chr(code).isalnum():
        return chr(code)
    return f"\\x{code:02X}" if code < 0x100 else (f"\\u{code:04X}" if code < 0x10000 else f"\\U{code:08X}")
