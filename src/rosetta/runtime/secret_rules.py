"""The credential rules ``rosetta.runtime.secrets`` redacts with, read and compiled once. The
rules are data: rosetta's own (``secret_rules.toml`` beside this module, each following a gitleaks
or detect-secrets rule or a documented format), tried first, then gitleaks'
(``secret_rules_gitleaks.toml``, converted from gitleaks' config by ``tools/gitleaks_rules.py``).

Compiling them also works out what makes the stream's scan linear: each rule's longest match (every
repetition bounded; the open-ended rest is a ``tail`` or ``until``), the literals every match of a
rule starts with (so a rule is searched only from where one has come), and gitleaks' checks
(keywords, entropy, allowlists), each compiled when first needed: most rules never are.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from sre_parse import SubPattern

    import regex

T = TypeVar("T")

RULES_FILES = ("secret_rules.toml", "secret_rules_gitleaks.toml")
"""The rule files, in the order their rules are tried: rosetta's own are the more specific."""
CONTEXT = 64
"""Characters kept before the unsent text: a rule's lookbehind (``\\b``, ``(?<!...)``) sees them,
and so does an allowlist on the whole match (a rule's ``lead``, up to 50)."""
LITERAL = 12
"""The longest literal start the scan for rules' starts looks for."""
LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


@dataclass(frozen=True)
class Allowlist:
    """What makes a match no credential, as gitleaks has it: one of ``regexes`` found in the
    secret (or, with ``target = "match"``, in the whole match), or one of ``stopwords`` in the
    secret, lower-cased; with ``all``, every kind of check given must agree."""

    target: str = "secret"
    regexes: tuple[str, ...] = ()
    stopwords: tuple[str, ...] = ()
    all: bool = False


@dataclass(frozen=True)
class Rule:
    """One credential shape of the rule files (their header says what each field means)."""

    id: str
    kind: str
    source: str
    regex: str
    tail: str | None = None
    until: str | None = None
    entropy: float | None = None
    keywords: tuple[str, ...] = ()
    allowlists: tuple[Allowlist, ...] = ()
    lead: str | None = None
    gitleaks_regex: str | None = None
    replaces: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"[redacted {self.kind}]"


@dataclass(frozen=True)
class _Checks:
    """A rule's checks of a match, compiled: gitleaks' entropy, keywords and allowlists."""

    entropy: float | None
    keywords: tuple[int, ...]  # ids of the rule's keywords (one must have come by the match's end)
    allowlists: tuple[tuple[str, tuple[Any, ...], Any, bool], ...]  # (target, regexes, stopwords, all)
    lead: Any  # regex.Pattern of the dropped context an allowlist on the match reads, or None


class _Lazy(Generic[T]):
    """Each rule's compiled pattern (or checks), made when first needed: most rules never are."""

    def __init__(self, make: Callable[[int], T], count: int) -> None:
        self._make = make
        self._made: list[Any] = [_UNMADE] * count

    def __getitem__(self, index: int) -> T:
        made: T = self._made[index]
        if made is _UNMADE:
            made = self._made[index] = self._make(index)
        return made


_UNMADE = object()


@dataclass(frozen=True)
class Compiled:
    """The rules compiled, plus what the stream needs to know of them."""

    rules: tuple[Rule, ...]
    each: _Lazy[regex.Pattern[str]]  # each rule's pattern (one search per rule: each finds its literal start fast)
    secrets: _Lazy[tuple[int, ...]]  # each rule's `secret` groups (the first that takes part is redacted)
    tails: tuple[Any, ...]  # a run of the rule's tail units, or None
    untils: tuple[Any, ...]
    checks: _Lazy[_Checks | None]  # each rule's _Checks, or None
    horizon: int  # longest rule match, plus the one character a rule may look past it
    until_horizon: int
    starts: Any  # re.Pattern finding, at each place, the longest literal start there (lower case)
    at_start: dict[str, tuple[tuple[int, ...], tuple[tuple[int, int], ...]]]  # literal → (rules, (keyword, length))
    partial: frozenset[str]  # the beginnings of literal starts
    longest: int  # the longest literal start or keyword
    always: tuple[int, ...]  # rules with no literal start: searched everywhere
    generic: frozenset[int]  # gitleaks' generic rules, which give way to a specific one on the same secret
    fragile: dict[int, tuple[tuple[str, ...], int]]  # rule → (its literal starts, its longest match): see _fragile


def rules() -> tuple[Rule, ...]:
    """The credential rules, in the order they are tried."""
    return compiled_rules().rules


def _load(name: str) -> list[Rule]:
    """The rules of file ``name``; its ``[allowlist]`` (gitleaks' global one) applies to each."""
    import tomllib
    from importlib import resources

    data = tomllib.loads(resources.files("rosetta.runtime").joinpath(name).read_text(encoding="utf-8"))
    common = (Allowlist(**_fields(data["allowlist"])),) if "allowlist" in data else ()
    loaded = []
    for entry in data["rules"]:
        entry = _fields(entry)
        allowlists = tuple(Allowlist(**_fields(a)) for a in entry.pop("allowlists", ())) + common
        loaded.append(Rule(**{**entry, "keywords": tuple(entry.get("keywords", ())), "allowlists": allowlists}))
    return loaded


def _fields(entry: Mapping[str, Any]) -> dict[str, Any]:
    """``entry`` without what documents it only (``notes``, and ``gitleaks``: the converter's input),
    its lists as tuples."""
    return {key: tuple(value) if isinstance(value, list) and key != "allowlists" else value
            for key, value in entry.items() if key not in ("notes", "gitleaks")}


@cache
def compiled_rules() -> Compiled:
    import re

    import regex

    loaded: tuple[Rule, ...] = ()
    for name in RULES_FILES:  # a rule of rosetta's that stands for gitleaks' leaves it out
        replaced = {f"gitleaks:{rule_id}" for rule in loaded for rule_id in rule.replaces}
        loaded += tuple(rule for rule in _load(name) if rule.id not in replaced)
    ids = [rule.id for rule in loaded]
    if len(set(ids)) != len(ids):
        raise ValueError(f"secret rules: ids used twice: {sorted({i for i in ids if ids.count(i) > 1})}")
    trees = [_parse(rule.regex) for rule in loaded]
    keywords = sorted({word for rule in loaded for word in rule.keywords})
    keyword_id = {word: n for n, word in enumerate(keywords)}
    starts = [_starts(tree) for tree in trees]
    literals: dict[str, set[int]] = {}
    for index, found in enumerate(starts):
        for literal in found or ():
            literals.setdefault(literal, set()).add(index)
    for word in keywords:
        literals.setdefault(word, set())
    at_start = {  # a literal found → the rules starting with it or a shorter one, the keywords it begins with
        literal: (tuple(sorted({r for size in range(2, len(literal) + 1) for r in literals.get(literal[:size], ())})),
                  tuple((keyword_id[literal[:size]], size) for size in range(1, len(literal) + 1)
                        if literal[:size] in keyword_id))
        for literal in literals}
    for rule in loaded:
        if rule.lead and _max_width(_parse(rule.lead), rule.id) >= CONTEXT:
            raise ValueError(f"secret rules: rule {rule.id!r} reads more context than the stream keeps ({CONTEXT})")
    each = _Lazy(lambda index: regex.compile(loaded[index].regex), len(loaded))
    shared: dict[str, Any] = {}  # an allowlist's regex, compiled once for all the rules that share it
    return Compiled(
        rules=loaded, each=each,
        secrets=_Lazy(lambda index: tuple(n for name, n in each[index].groupindex.items() if name.startswith("secret")),
                      len(loaded)),
        tails=tuple(regex.compile(f"(?:{rule.tail})*") if rule.tail else None for rule in loaded),
        untils=tuple(regex.compile(rule.until) if rule.until else None for rule in loaded),
        checks=_Lazy(lambda index: _checks(loaded[index], keyword_id, shared), len(loaded)),
        horizon=max(_max_width(tree, rule.id) for tree, rule in zip(trees, loaded, strict=True)) + 1,
        until_horizon=max([_max_width(_parse(rule.until), rule.id) for rule in loaded if rule.until] or [0]) + 1,
        starts=re.compile(f"(?=({_trie(sorted(literals))}))"),
        at_start=at_start,
        partial=frozenset(literal[:size] for literal, rs in literals.items() if rs for size in range(1, len(literal))),
        longest=max(map(len, literals)),
        always=tuple(index for index, found in enumerate(starts) if found is None),
        generic=frozenset(index for index, rule in enumerate(loaded) if "generic" in rule.id),
        fragile={index: (tuple(sorted(starts[index] or ())), tree.getwidth()[1])
                 for index, tree in enumerate(trees) if _fragile(tree)})


def _checks(rule: Rule, keyword_id: dict[str, int], shared: dict[str, Any]) -> _Checks | None:
    import re

    import regex

    if rule.entropy is None and not rule.keywords and not rule.allowlists:
        return None

    def compiled(pattern: str) -> regex.Pattern[str]:
        if pattern not in shared:
            shared[pattern] = regex.compile(pattern)
        return shared[pattern]

    allowlists = tuple((a.target, tuple(compiled(p) for p in a.regexes),
                        re.compile(_trie(sorted(a.stopwords))) if a.stopwords else None, a.all)
                       for a in rule.allowlists)
    return _Checks(rule.entropy, tuple(keyword_id[word] for word in rule.keywords), allowlists,
                   regex.compile(f"(?:{rule.lead})\\Z") if rule.lead else None)


def _trie(words: list[str]) -> str:
    """A regex matching any of ``words``, the longest first, as a trie (``re`` tries each letter once)."""
    import re

    tree: dict[str, Any] = {}
    for word in words:
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        branches = [re.escape(char) + emit(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
        return f"(?:{body})?" if "" in node else body

    return emit(tree) or "(?!)"


def _starts(tree: Any) -> set[str] | None:
    """Lower-case strings of 2 to ``LITERAL`` characters, one of which begins every match of the
    parsed pattern ``tree``; None when no such set is known (the rule is then searched everywhere)."""
    import re

    engine: Any = re
    k = engine._constants

    def walk(items: list[Any], size: int) -> set[str]:
        found = step(items, size) if items and size < LITERAL else {""}
        while len(found) > 64:  # too many: the literal starts end sooner
            found = {text[:max(map(len, found)) - 1] for text in found}
        return found

    def step(items: list[Any], size: int) -> set[str]:
        op, arg = items[0]
        rest = items[1:]
        if op is k.AT or op in (k.ASSERT, k.ASSERT_NOT):  # zero width
            return walk(rest, size)
        if op is k.LITERAL:
            return {chr(arg).lower() + more for more in walk(rest, size + 1)}
        if op is k.SUBPATTERN:
            return walk([*arg[-1], *rest], size)
        if size >= 3:  # long enough to be rare: a choice would only multiply the strings
            return {""}
        if op is k.IN and all(kind in (k.LITERAL, k.RANGE) for kind, _ in arg):
            chars = {chr(c).lower() for kind, value in arg
                     for c in ([value] if kind is k.LITERAL else range(value[0], value[1] + 1))}
            if len(chars) <= 8:
                following = walk(rest, size + 1)
                return {char + more for char in chars for more in following}
        if op is k.BRANCH:
            return {found for branch in arg[1] for found in walk([*branch, *rest], size)}
        if op in (k.MAX_REPEAT, k.MIN_REPEAT):
            low, _, body = arg
            return walk(list(body), size) | (walk(rest, size) if low == 0 else set())
        return {""}

    found = walk(list(tree), 0)
    return None if not found or len(found) > 256 or min(map(len, found)) < 2 else found


def _fragile(tree: Any) -> bool:
    """Whether the parsed pattern ``tree`` has a word boundary or a lookbehind after its start:
    ``regex`` may then report no partial match (a stream's text ending inside one) where more
    text would make a match, so a stream holds from where such a rule's literal start came."""
    import re

    engine: Any = re
    k = engine._constants

    def walk(items: list[Any], consumed: bool) -> tuple[bool, bool]:
        for op, arg in items:
            if op is k.AT and arg in (k.AT_BOUNDARY, k.AT_NON_BOUNDARY) or \
                    op in (k.ASSERT, k.ASSERT_NOT) and arg[0] < 0:
                if consumed:
                    return True, consumed
            elif op is k.SUBPATTERN:
                fragile, consumed = walk(list(arg[-1]), consumed)
                if fragile:
                    return True, consumed
            elif op is k.BRANCH:
                results = [walk(list(branch), consumed) for branch in arg[1]]
                if any(fragile for fragile, _ in results):
                    return True, consumed
                consumed = consumed or any(after for _, after in results)
            elif op in (k.MAX_REPEAT, k.MIN_REPEAT):
                fragile, after = walk(list(arg[2]), consumed)
                if fragile or after and walk(list(arg[2]), True)[0]:
                    return True, consumed
                consumed = consumed or after
            elif op not in (k.AT, k.ASSERT, k.ASSERT_NOT):
                consumed = True
        return False, consumed

    return walk(list(tree), False)[0]


def _parse(pattern: str) -> SubPattern:
    """``pattern`` parsed by ``re`` (which has no public API for it): its widths and literal starts."""
    import re

    engine: Any = re
    tree: SubPattern = engine._parser.parse(pattern)
    return tree


def _max_width(tree: SubPattern, rule: str) -> int:
    """The longest text the parsed pattern ``tree`` can match (the rules file promises a bound)."""
    import re

    engine: Any = re
    width: int = tree.getwidth()[1]
    if width >= engine._constants.MAXREPEAT:
        raise ValueError(f"secret rules: rule {rule!r} can match unbounded text; bound every repetition "
                         "and put the credential's open-ended rest in `tail` or `until`")
    return width


def shannon_entropy(text: str) -> float:
    """gitleaks' Shannon entropy of ``text``: over its characters, divided by its length in bytes."""
    if not text:
        return 0.0
    size = len(text.encode("utf-8"))
    counts: dict[str, int] = {}
    for char in text:
        counts[char] = counts.get(char, 0) + 1
    return -sum(count / size * math.log2(count / size) for count in counts.values())
