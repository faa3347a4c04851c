"""Catastrophic backtracking, found in the parsed expression rather than guessed from its text.

A backtracking matcher (Python's ``re``, ``regex``, jsonschema's ``pattern``) takes time exponential
in the input when the expression can match one piece of text in two different ways and then go
round a loop again: ``(a+)+``, ``(a|a)*``, ``(.*a)*``, ``(\\w+\\s?)+$``. That is the "exponential
degree of ambiguity" of the expression's automaton, decided on the automaton itself (approximated
only where said below). The ``regex`` package that enforces input rules cuts some of these short,
not all (``^(a|aa)+$`` still takes exponential time), and JSON Schema patterns run on ``re``:
every one is reported.

1. parse the expression (``re._parser``) and build its position automaton (Glushkov's: one state
   per character class, no empty moves), counting for every transition the number of distinct ways
   the expression reaches it, so ``(a*)*`` keeps its two ways of repeating ``a``;
2. it is ambiguous this way when, inside one loop (a strongly connected component), a transition
   can be taken two ways, or two different states can read the same text from a common state and
   meet again (a cycle in the product automaton that leaves its diagonal).

Character classes are compared on a small alphabet: ASCII, every character and range end the
expression names, and one sample of each Unicode class (the largest lower range end of two
intersecting ranges is always a range end, so ranges compare exactly). Lookarounds are checked on
their own; back-references count as matching nothing; atomic groups and possessive repeats, which
never backtrack into themselves, become one opaque class. Counted repeats are expanded up to
:data:`EXPAND_LIMIT` and treated as loops above it. Expressions bigger than the bounds below are
reported as not checked, never analysed for long.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]

from rosetta.definition.patterns import PatternError, check_shape

EXPAND_LIMIT = 16
"""Counted repeats up to this count are expanded exactly ({3} is three copies); larger ones loop."""
MAX_POSITIONS = 400
"""Character positions of the automaton analysed at most (a long validation rule has ~50)."""
MAX_WORK = 200_000
"""Product-automaton transitions examined at most, which keeps one check within ~0.1 s."""

_SAMPLES = (0xA0, 0xB5, 0xE9, 0x130, 0x3A3, 0x663, 0x1680, 0x2028, 0x3000, 0x4E00, 0xE000, 0x1F600)
"""One character of each Unicode class sre distinguishes beyond ASCII (spaces, letters, digits,
cased letters, a private-use character in no class)."""
_ASCII_SPACE = frozenset(" \t\n\r\f\v")

Charset = tuple[tuple[bool, tuple, int], ...]
"""Alternatives of (negated, sre set items, flags): a character belongs when any alternative takes it."""


class TooComplex(Exception):
    """The expression exceeds the analysis bounds; nothing is known about it."""


@dataclass(frozen=True)
class Hazard:
    """Where an expression backtracks catastrophically: a character that some loop can read two ways."""

    char: str

    def describe(self) -> str:
        return (f"a run of {self.char!r} can be matched in more than one way inside a repeat (nested or "
                "overlapping repeats), so a search that fails takes time exponential in the run's length")


@lru_cache(maxsize=1024)
def find_hazard(pattern: str) -> Hazard | None:
    """The catastrophic-backtracking hazard of ``pattern``, or None when it has none.

    Raises :class:`~rosetta.definition.patterns.PatternError` when ``pattern`` does not parse or
    nests too deeply, and :class:`TooComplex` when it is too large to analyse."""
    check_shape(pattern)
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, OverflowError, RecursionError, ValueError) as exc:
        raise PatternError(f"not a valid regular expression: {exc}") from None
    pending = [(list(parsed), parsed.state.flags)]
    while pending:
        items, flags = pending.pop()
        automaton = _Automaton()
        automaton.sequence(items, flags)
        pending += automaton.lookarounds
        hazard = automaton.hazard()
        if hazard is not None:
            return hazard
    return None


@dataclass
class _Frag:
    """A piece of the automaton: its first and last positions (with their number of ways) and how
    many ways it matches the empty string (0, 1, or 2 meaning "several")."""

    first: dict[int, int] = field(default_factory=dict)
    last: dict[int, int] = field(default_factory=dict)
    empty: int = 1


def _add(a: dict[int, int], b: dict[int, int], times: int = 1) -> dict[int, int]:
    out = dict(a)
    if times:
        for key, ways in b.items():
            out[key] = min(2, out.get(key, 0) + ways * times)
    return out


class _Automaton:
    """Glushkov's position automaton of one expression, transitions counted by their ways."""

    def __init__(self) -> None:
        self.charsets: list[Charset] = []
        self.follow: list[dict[int, int]] = []
        self.lookarounds: list[tuple[list, int]] = []

    # -- building ------------------------------------------------------------------------

    def position(self, charset: Charset) -> _Frag:
        if len(self.charsets) >= MAX_POSITIONS:
            raise TooComplex(f"more than {MAX_POSITIONS} character positions")
        self.charsets.append(charset)
        self.follow.append({})
        index = len(self.charsets) - 1
        return _Frag({index: 1}, {index: 1}, 0)

    def link(self, a: _Frag, b: _Frag) -> _Frag:
        """``a`` then ``b``."""
        for p, x in a.last.items():
            row = self.follow[p]
            for q, y in b.first.items():
                row[q] = min(2, row.get(q, 0) + x * y)
        return _Frag(_add(a.first, b.first, a.empty), _add(b.last, a.last, b.empty), min(2, a.empty * b.empty))

    def loop(self, a: _Frag) -> None:
        """Let ``a`` repeat: its last positions go on to its first ones."""
        self.link(a, a)

    def sequence(self, items: Iterable, flags: int) -> _Frag:
        result = _Frag()
        for op, value in items:
            result = self.link(result, self.item(op, value, flags))
        return result

    def item(self, op: object, value: object, flags: int) -> _Frag:
        if op in (sre.LITERAL, sre.NOT_LITERAL):
            return self.position(((op is sre.NOT_LITERAL, ((sre.LITERAL, value),), flags),))
        if op is sre.ANY:
            return self.position(((True, () if flags & sre.SRE_FLAG_DOTALL else ((sre.LITERAL, 10),), flags),))
        if op is sre.IN:
            negated = bool(value) and value[0][0] is sre.NEGATE
            return self.position(((negated, tuple(value[1:] if negated else value), flags),))
        if op is sre.SUBPATTERN:
            _group, add, remove, body = value
            return self.sequence(body, (flags | add) & ~remove)
        if op is sre.BRANCH:
            frags = [self.sequence(branch, flags) for branch in value[1]]
            return _Frag(_merge(f.first for f in frags), _merge(f.last for f in frags),
                         min(2, sum(f.empty for f in frags)))
        if op is sre.GROUPREF_EXISTS:
            _group, yes, no = value
            frags = [self.sequence(yes, flags), self.sequence(no, flags) if no else _Frag()]
            return _Frag(_merge(f.first for f in frags), _merge(f.last for f in frags),
                         min(2, sum(f.empty for f in frags)))
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            return self.repeat(*value, flags)
        if op is sre.POSSESSIVE_REPEAT:
            low, _high, body = value
            return self.opaque(body, flags, empty=low == 0)
        if op is sre.ATOMIC_GROUP:
            return self.opaque(value, flags, empty=False)
        if op in (sre.ASSERT, sre.ASSERT_NOT):
            self.lookarounds.append((list(value[1]), flags))
        return _Frag()  # anchors, lookarounds, back-references: no character of the main match

    def repeat(self, low: int, high: int, body: list, flags: int) -> _Frag:
        if high != sre.MAXREPEAT and high <= EXPAND_LIMIT:
            mark = len(self.charsets)
            try:
                return self.expand(low, high, body, flags, budget=mark + 4 * EXPAND_LIMIT)
            except _OverBudget:
                del self.charsets[mark:], self.follow[mark:]
        once = self.sequence(body, flags)
        if high > 1:
            self.loop(once)
        return _Frag(once.first, once.last, 1 if low == 0 else once.empty)

    def expand(self, low: int, high: int, body: list, flags: int, *, budget: int) -> _Frag:
        """``body{low,high}`` as ``low`` copies then ``high - low`` nested optional ones (x(x)?)?,
        which match each count one way only, as the matcher's counter does."""
        def copy() -> _Frag:
            frag = self.sequence(body, flags)
            if len(self.charsets) > budget:
                raise _OverBudget
            return frag

        result = _Frag()
        for _ in range(low):
            result = self.link(result, copy())
        optional: _Frag | None = None
        for _ in range(high - low):
            inner = copy() if optional is None else self.link(copy(), optional)
            optional = _Frag(inner.first, inner.last, min(2, inner.empty + 1))
        return self.link(result, optional) if optional is not None else result

    def opaque(self, body: list, flags: int, *, empty: bool) -> _Frag:
        """A part that never backtracks into itself: one position reading any character it could."""
        mark = len(self.charsets)
        inner = self.sequence(body, flags)
        charset = tuple(alt for charset in self.charsets[mark:] for alt in charset)
        del self.charsets[mark:], self.follow[mark:]
        if not charset:
            return _Frag()
        frag = self.position(charset)
        frag.empty = 1 if empty or inner.empty else 0
        return frag

    # -- deciding ------------------------------------------------------------------------

    def hazard(self) -> Hazard | None:
        component = _components(self.follow)
        looping = [p for p, number in enumerate(component) if number >= 0]
        if not looping:  # no repeat reads a character: nothing to backtrack over
            return None
        alphabet = _alphabet([self.charsets[p] for p in looping])
        masks = [0] * len(self.charsets)
        for p, mask in zip(looping, _masks([self.charsets[p] for p in looping], alphabet), strict=True):
            masks[p] = mask
        for p, row in enumerate(self.follow):
            for q, ways in row.items():
                if ways > 1 and component[p] == component[q] and masks[q]:
                    return Hazard(_char(masks[q], alphabet))
        for members in _groups(component):
            if len(members) > 1:
                found = self.diverging_pair(members, component, masks)
                if found:
                    return Hazard(_char(found, alphabet))
        return None

    def diverging_pair(self, members: list[int], component: list[int], masks: list[int]) -> int:
        """A character two different positions of one loop can both read on paths that leave a
        common position and meet again (0 if none): a cycle of the product automaton off its diagonal."""
        scc = component[members[0]]
        follow = {p: [q for q in self.follow[p] if component[q] == scc and masks[q]] for p in members}
        start = [(p, p) for p in members]
        successors: dict[tuple[int, int], list[tuple[int, int]]] = {}
        queue, work = list(start), 0
        while queue:
            pair = queue.pop()
            if pair in successors:
                continue
            a, b = pair
            found = []
            for x in follow[a]:
                for y in follow[b]:
                    work += 1
                    if (masks[x] & masks[y]) and (x <= y or a != b):
                        found.append((x, y) if x <= y else (y, x))
            if work > MAX_WORK:
                raise TooComplex(f"more than {MAX_WORK:,} steps")
            successors[pair] = found
            queue += [s for s in found if s not in successors]
        predecessors: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for pair, after in successors.items():
            for nxt in after:
                predecessors.setdefault(nxt, []).append(pair)
        back, queue = set(start), list(start)
        while queue:
            for before in predecessors.get(queue.pop(), ()):
                if before not in back:
                    back.add(before)
                    queue.append(before)
        for a, b in back:
            if a != b and (a, b) in successors:
                return masks[a] & masks[b]
        return 0


class _OverBudget(Exception):
    """An exact expansion grew too big: the repeat is treated as a loop instead."""


def _merge(dicts: Iterable[dict[int, int]]) -> dict[int, int]:
    out: dict[int, int] = {}
    for d in dicts:
        out = _add(out, d)
    return out


# -- character classes -----------------------------------------------------------------------


def _alphabet(charsets: list[Charset]) -> list[int]:
    """The characters classes are compared on: ASCII, samples, and every literal and range end used."""
    chars = set(range(128)) | set(_SAMPLES)
    for charset in charsets:
        for _negated, items, flags in charset:
            for op, value in items:
                ends = value if op is sre.RANGE else (value,) if op is sre.LITERAL else ()
                for end in ends:
                    chars.add(end)
                    if flags & sre.SRE_FLAG_IGNORECASE:
                        chars |= _variants(end)
    return sorted(chars)


def _masks(charsets: list[Charset], alphabet: list[int]) -> list[int]:
    """Each class as a bit mask over ``alphabet`` (bit i: it takes ``alphabet[i]``), built from
    whole-alphabet masks of each literal, range and category rather than character by character."""
    index = {char: i for i, char in enumerate(alphabet)}
    full = (1 << len(alphabet)) - 1
    categories: dict[tuple[object, bool], int] = {}

    def category(name: object, ascii_only: bool) -> int:
        if (name, ascii_only) not in categories:
            categories[name, ascii_only] = sum(1 << i for i, char in enumerate(alphabet)
                                               if _in_category(name, char, ascii_only))
        return categories[name, ascii_only]

    def alternative(negated: bool, items: tuple, flags: int) -> int:
        fold = bool(flags & sre.SRE_FLAG_IGNORECASE)
        mask = 0
        for op, value in items:
            if op is sre.LITERAL:
                for char in _variants(value) if fold else (value,):
                    mask |= 1 << index[char] if char in index else 0
            elif op is sre.RANGE:
                low, high = value
                mask |= sum(1 << i for i, char in enumerate(alphabet)
                            if any(low <= v <= high for v in (_variants(char) if fold else (char,))))
            elif op is sre.CATEGORY:
                mask |= category(value, bool(flags & sre.SRE_FLAG_ASCII))
        return full & ~mask if negated else mask

    known: dict[Charset, int] = {}
    for charset in charsets:
        if charset not in known:
            known[charset] = 0
            for alt in charset:
                known[charset] |= alternative(*alt)
    return [known[charset] for charset in charsets]


def _variants(char: int) -> set[int]:
    """``char`` and its single-character lower and upper cases (what IGNORECASE also takes)."""
    text = chr(char)
    return {char} | {ord(c) for c in (text.lower(), text.upper()) if len(c) == 1}


@lru_cache(maxsize=1 << 16)
def _in_category(category: object, char: int, ascii_only: bool) -> bool:
    text = chr(char)
    name = str(category).removeprefix("CATEGORY_").removeprefix("UNI_").removeprefix("LOC_")
    negated = name.startswith("NOT_")
    kind = name.removeprefix("NOT_")
    if kind == "DIGIT":
        inside = ("0" <= text <= "9") if ascii_only else text.isdecimal()
    elif kind == "WORD":
        inside = (text.isascii() or not ascii_only) and (text.isalnum() or text == "_")
    elif kind == "SPACE":
        inside = text in _ASCII_SPACE if ascii_only else text.isspace()
    else:  # LINEBREAK
        inside = text == "\n"
    return inside != negated


def _char(mask: int, alphabet: list[int]) -> str:
    """A readable character of ``mask``: a letter or digit when there is one."""
    chars = [chr(c) for i, c in enumerate(alphabet) if mask >> i & 1]
    return next((c for c in chars if c.isalnum()), next((c for c in chars if c.isprintable()), chars[0]))


# -- strongly connected components -----------------------------------------------------------


def _components(follow: list[dict[int, int]]) -> list[int]:
    """Tarjan's strongly connected components, iteratively; a position on no cycle gets its own
    number, distinct from every other, so ``component[p] == component[q]`` means a common loop."""
    count = len(follow)
    index = [-1] * count
    low = [0] * count
    on_stack = [False] * count
    component = [-1] * count
    stack: list[int] = []
    counter = components = 0
    for root in range(count):
        if index[root] != -1:
            continue
        work = [(root, iter(follow[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if index[child] == -1:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack[child] = True
                    work.append((child, iter(follow[child])))
                    advanced = True
                    break
                if on_stack[child]:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    component[member] = components
                    if member == node:
                        break
                components += 1
    cyclic = {component[p] for p, row in enumerate(follow) for q in row if component[q] == component[p]}
    return [c if c in cyclic else -1 - p for p, c in enumerate(component)]


def _groups(component: list[int]) -> list[list[int]]:
    groups: dict[int, list[int]] = {}
    for position, number in enumerate(component):
        groups.setdefault(number, []).append(position)
    return list(groups.values())
