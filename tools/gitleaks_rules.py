"""Convert gitleaks' rules into rosetta's credential rules (``secret_rules_gitleaks.toml``).

    python tools/gitleaks_rules.py [SOURCE] [--output PATH] [--version TAG] [--name NAME]
    python tools/gitleaks_rules.py [SOURCE] --check      # exit 1 when the generated file is stale
    python tools/gitleaks_rules.py --check --recorded     # offline: the file is what this script makes
                                                          # of the gitleaks rules recorded in it

SOURCE is a path or an https URL of gitleaks' ``config/gitleaks.toml`` (default: the raw file of
the tag below); ``--name`` records another name for it (the URL a local copy came from). Why:
rosetta redacts credentials from answers, logs and transcripts (``rosetta.runtime.secrets``); its
own rules cover a few shapes by hand, and this script keeps the rest in step with a maintained
source, gitleaks' ~220 rules. To update, point it at a newer tag (``--version``), review the diff
of the generated file, and run tests/runtime/test_gitleaks_rules.py (every rule against examples
drawn from its own regex).

gitleaks runs each Go (RE2) regex over whole files; rosetta's scanner serves streams too, so each
rule must follow the format in ``secret_rules.toml``'s header: every repetition bounded and none
nested, nothing looked at past the match's end, the credential's open-ended rest as a ``tail``.
The conversion, rule by rule:

* Go syntax becomes Python's (``(?i)`` inside a group becomes ``(?i:...)``, POSIX classes, ``\\z``);
  each regex starts with ``(?a)``: ``\\w``, ``\\d`` and ``\\b`` are ASCII, as in Go.
* The boundary gitleaks checks after a secret (``(?:[\\x60'"\\s;]|\\\\[nr]|$)``, ``\\b``) is dropped: it
  looks past the end. So a longer look-alike is redacted too (see ``tail``), and a shorter one may
  match first; the scanner then takes the longer match at the same place, and a credential that
  starts inside one it redacted still counts.
* The lazy context before an identifier (``[\\w.-]{0,50}?``) and an unbounded lead (``\\bcurl\\b.*``)
  are dropped; the match starts at the identifier (for a dropped lead, the rule's keyword must have
  come before). An allowlist that reads the whole match still sees the dropped context (``lead``).
* The secret's capture group becomes ``(?P<secret>...)`` (``secret2``... where alternatives each
  have one); other groups stop capturing. A group whose text is a fixed literal is checked here,
  once (jwt-base64); one that repeats redacts the whole match (microsoft-teams-webhook).
* An unbounded repetition ``X*``, ``X+``, ``X{m,}`` is bounded at ``CAP`` more than its minimum
  (``CAP_SPACE`` for white space); one that can end the secret also becomes the ``tail`` (a longer
  credential is redacted whole), and so does a bounded one (``X{m,n}`` stays, so entropy and
  allowlists read the secret gitleaks reads). A lazy run over any text to a fixed end
  (``[\\s\\S-]{64,}?KEY-----``) becomes ``until``.
* A fixed count of a group that repeats inside, ``(?:-[0-9]{10,13}){3}``, is written out.
* A character class that matches a quote or white space also matches it escaped once or twice
  (``\\"``, ``\\\\\\"``, ``\\n``), around the secret and in it: text here is often JSON or a Python repr (a
  request body, a streamed delta in a DEBUG log), and gitleaks' rules read files.
* Where an identifier is followed by a run of optional context and an operator (gitleaks'
  "semi-generic" rules), a lookahead first checks that an operator comes within the run's reach:
  ``key`` in prose then fails at once. A ``\\b`` after the match's start becomes lookarounds, which
  ``regex`` can tell a partial (streamed) match by.
* ``entropy``, ``keywords`` and the allowlists (stopwords; regexes on the secret or the match) are
  kept as data, with gitleaks' global allowlist, and the scanner applies them as gitleaks does; an
  allowlist that needs a file path or the whole line cannot apply to text and is left out (a note
  says so). So is a rule's ``path``.
* Rule ids become ``gitleaks:<id>``; labels are the id in words, or, for a shape rosetta had a rule
  for, its label (``KINDS``). Rules are ordered the more specific (the longer least match) first,
  gitleaks' generic rule last.

A rule that cannot be converted faithfully is listed, with the reason, in the generated file's
header and under ``[[skipped]]``; each rule also records what gitleaks says (``[rules.gitleaks]``),
the converter's input, so ``--check --recorded`` needs no network (and ``--check`` with SOURCE
compares against the source itself). gitleaks is MIT-licensed (Copyright (c) 2019 Zachary Rice);
its notice is repeated in the generated file.

Only the standard library and ``regex`` (the scanner's engine, to check each converted rule).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import re
import sys
import tomllib
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import regex

VERSION = "v8.30.0"
SOURCE = f"https://raw.githubusercontent.com/gitleaks/gitleaks/{VERSION}/config/gitleaks.toml"
OUTPUT = Path(__file__).resolve().parents[1] / "src" / "rosetta" / "runtime" / "secret_rules_gitleaks.toml"
CAP = 256
"""How far past its minimum an unbounded repetition may go (the stream holds back at most the
longest rule match, so this bounds it)."""
CAP_SPACE = 32
"""The same for a run of white space (indentation, the space around an operator)."""
UNROLL = 8
"""The largest fixed count of a group with a repetition inside that is written out."""

KINDS = {
    "github-pat": "github token", "github-oauth": "github token", "github-app-token": "github token",
    "github-refresh-token": "github token", "github-fine-grained-pat": "github token",
    "stripe-access-token": "stripe key", "twilio-api-key": "twilio key", "sendgrid-api-token": "sendgrid key",
    "pypi-upload-token": "pypi token", "npm-access-token": "npm token", "slack-webhook-url": "slack webhook",
    "huggingface-access-token": "hugging face token", "huggingface-organization-api-token": "hugging face token",
    "slack-bot-token": "slack token", "slack-user-token": "slack token", "slack-legacy-token": "slack token",
    "slack-legacy-bot-token": "slack token", "slack-legacy-workspace-token": "slack token",
    "slack-config-access-token": "slack token", "slack-config-refresh-token": "slack token",
    "slack-app-token": "slack token", "private-key": "private key", "jwt": "jwt", "jwt-base64": "jwt",
    "discord-api-token": "discord token", "discord-client-secret": "discord token",
    "anthropic-api-key": "anthropic key", "anthropic-admin-api-key": "anthropic key", "openai-api-key": "openai key",
    "gcp-api-key": "google api key", "aws-access-token": "aws access key", "gitlab-pat": "gitlab token",
    "gitlab-pat-routable": "gitlab token",
}
"""Labels for rules that take over from rosetta's own (a credential keeps its label, whichever
rule finds it); any other rule's label is its id in words."""

MIT = """\
gitleaks (https://github.com/gitleaks/gitleaks), MIT License, Copyright (c) 2019 Zachary Rice.
Permission is hereby granted, free of charge, to any person obtaining a copy of this software and
associated documentation files (the "Software"), to deal in the Software without restriction,
including without limitation the rights to use, copy, modify, merge, publish, distribute,
sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions: The above copyright notice and this
permission notice shall be included in all copies or substantial portions of the Software.
THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT
NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES
OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN
CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE."""


class Unconvertible(Exception):
    """A rule (or allowlist regex) this script cannot turn into the format faithfully."""


# -- characters --------------------------------------------------------------------------------------

MAX_CHAR = 0x10FFFF
Ranges = tuple[tuple[int, int], ...]


def _norm(ranges: list[tuple[int, int]]) -> Ranges:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return tuple(merged)


def _complement(ranges: Ranges) -> Ranges:
    out, at = [], 0
    for lo, hi in ranges:
        if lo > at:
            out.append((at, lo - 1))
        at = hi + 1
    if at <= MAX_CHAR:
        out.append((at, MAX_CHAR))
    return tuple(out)


def _folded(ranges: Ranges) -> Ranges:
    """``ranges`` with the other case of each ASCII letter (what ``(?i)`` matches under ``(?a)``)."""
    extra = []
    for lo, hi in ranges:
        for a, b, shift in ((65, 90, 32), (97, 122, -32)):
            if lo <= b and hi >= a:
                extra.append((max(lo, a) + shift, min(hi, b) + shift))
    return _norm([*ranges, *extra])


def _has(ranges: Ranges, char: str) -> bool:
    return any(lo <= ord(char) <= hi for lo, hi in ranges)


def _contains(ranges: Ranges, sub: Ranges) -> bool:
    return all(any(lo <= a and b <= hi for lo, hi in ranges) for a, b in sub)


def _minus(ranges: Ranges, sub: Ranges) -> Ranges:
    return _norm([(a, b) for a, b in _complement(_norm([*_complement(ranges), *sub]))])


DIGIT: Ranges = ((48, 57),)
WORD: Ranges = _norm([(48, 57), (65, 90), (95, 95), (97, 122)])
SPACE: Ranges = _norm([(9, 10), (12, 13), (32, 32)])  # Go's \s: no \v
ALNUM: Ranges = _norm([(48, 57), (65, 90), (97, 122)])
POSIX: dict[str, Ranges] = {
    "alnum": ALNUM, "alpha": _norm([(65, 90), (97, 122)]), "ascii": ((0, 127),), "blank": ((9, 9), (32, 32)),
    "cntrl": ((0, 31), (127, 127)), "digit": DIGIT, "graph": ((33, 126),), "lower": ((97, 122),),
    "print": ((32, 126),), "punct": _norm([(33, 47), (58, 64), (91, 96), (123, 126)]), "space": ((9, 13), (32, 32)),
    "upper": ((65, 90),), "word": WORD, "xdigit": _norm([(48, 57), (65, 70), (97, 102)]),
}
QUOTES = "\"'`"
WHITE = " \t\n\r"


def _char(code: int, in_class: bool) -> str:
    char = chr(code)
    named = {9: r"\t", 10: r"\n", 11: r"\v", 12: r"\f", 13: r"\r"}
    if code in named:
        return named[code]
    if code < 32 or code == 127 or code > 126:
        return f"\\x{code:02x}" if code < 256 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
    special = "\\]^-[" if in_class else "\\.^$*+?{}[]|()"
    return "\\" + char if char in special else char


def _class_body(ranges: Ranges) -> str:
    parts = []
    for short, named in ((r"\w", WORD), (r"\d", DIGIT)):
        if _contains(ranges, named):
            parts.append(short)
            ranges = _minus(ranges, named)
    for lo, hi in ranges:
        parts.append("".join(_char(code, True) for code in range(lo, hi + 1)) if hi - lo < 3 else
                     f"{_char(lo, True)}-{_char(hi, True)}")
    return "".join(parts)


def _class_text(ranges: Ranges) -> str:
    """A Python class for ``ranges`` (under ``(?a)``), the shorter of ``[...]`` and ``[^...]``."""
    if ranges == ((0, MAX_CHAR),):
        return r"[\s\S]"
    if ranges == ((0, 9), (11, MAX_CHAR)):
        return "."
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _char(ranges[0][0], False)
    positive, negative = _class_body(ranges), "^" + _class_body(_complement(ranges))
    if positive in (r"\w", r"\d"):
        return positive
    return f"[{negative if len(negative) < len(positive) else positive}]"


# -- the syntax tree ----------------------------------------------------------------------------------

@dataclass
class Chars:
    """One character of ``ranges``; ``fold``: case-insensitively; ``dotall``: ``.`` under ``(?s)``."""

    ranges: Ranges
    fold: bool = False
    dotall: bool = False

    def cased(self) -> bool:
        """Whether the case mode changes what it matches."""
        return _folded(self.ranges) != self.ranges


@dataclass
class Assert:
    """A zero-width check: ``^``, ``$``, ``\\b``, ``\\B``, ``\\A``, ``\\z``, or a lookaround written out."""

    kind: str


@dataclass
class Seq:
    items: list[Any]


@dataclass
class Alt:
    branches: list[Any]


@dataclass
class Group:
    body: Any
    index: int | None = None  # capture number, None when not capturing
    name: str | None = None


@dataclass
class Rep:
    body: Any
    lo: int
    hi: int | None
    lazy: bool = False


@dataclass
class Escaped:
    """A character class outside the secret whose quotes and white space may come escaped, once
    or twice (``\\"``, ``\\\\"`` or ``\\\\\\"``; ``\\n`` or ``\\\\n``): one to three backslashes before a quote
    or before n, r or t, each such escape one character of the class (so its repetition's bound
    holds)."""

    chars: Chars

    def text(self, fold: bool) -> str:
        ranges = self.chars.ranges
        white = any(_has(ranges, char) for char in WHITE)
        escaped = "".join(q for q in QUOTES if _has(ranges, q)) + ("nrt" if white else "")
        units = [emit(self.chars, fold)] + [f"{slashes}[{escaped}]" for slashes in ("\\\\", "\\\\" * 2, "\\\\" * 3)]
        return f"(?:{'|'.join(units)})"


class Parser:
    """Go RE2 syntax (what gitleaks' config uses) into the tree above."""

    def __init__(self, pattern: str) -> None:
        self.text, self.at, self.groups = pattern, 0, 0
        self.fold = self.dotall = False

    def parse(self) -> Any:
        node = self.alternation()
        if self.at < len(self.text):
            raise Unconvertible(f"unexpected {self.text[self.at]!r} at {self.at}")
        return node

    def peek(self, ahead: int = 0) -> str:
        return self.text[self.at + ahead] if self.at + ahead < len(self.text) else ""

    def alternation(self) -> Any:
        branches = [self.sequence()]
        while self.peek() == "|":
            self.at += 1
            branches.append(self.sequence())
        return branches[0] if len(branches) == 1 else Alt(branches)

    def sequence(self) -> Seq:
        items: list[Any] = []
        while self.peek() and self.peek() not in "|)":
            atom = self.atom()
            if atom is None:
                continue
            items.append(self.quantified(atom))
        return Seq(items)

    def quantified(self, atom: Any) -> Any:
        while True:
            char = self.peek()
            if char in ("*", "+", "?"):
                self.at += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[char]
            elif char == "{" and (found := re.match(r"\{(\d+)(,(\d*))?\}", self.text[self.at:])):
                self.at += found.end()
                lo = int(found[1])
                hi = lo if found[2] is None else (int(found[3]) if found[3] else None)
            else:
                return atom
            lazy = self.peek() == "?"
            self.at += lazy
            atom = Rep(atom, lo, hi, lazy)

    def atom(self) -> Any:
        char = self.peek()
        self.at += 1
        if char == "(":
            return self.group()
        if char == "[":
            return Chars(self.char_class(), self.fold)
        if char == ".":
            return Chars(((0, MAX_CHAR),) if self.dotall else ((0, 9), (11, MAX_CHAR)), self.fold, self.dotall)
        if char in "^$":
            return Assert(char)
        if char == "\\":
            return self.escape(in_class=False)
        return Chars(((ord(char), ord(char)),), self.fold)

    def group(self) -> Any:
        saved = (self.fold, self.dotall)
        index = name = None
        if self.peek() == "?":
            if (found := re.match(r"\?P?<(\w+)>", self.text[self.at:])):
                self.at += found.end()
                self.groups += 1
                index, name = self.groups, found[1]
            else:
                found = re.match(r"\?([imsU]*)(?:-([imsU]*))?([:)])", self.text[self.at:])
                if not found:
                    raise Unconvertible(f"unknown group syntax at {self.at}")
                self.at += found.end()
                for flag, on in [*((f, True) for f in found[1]), *((f, False) for f in found[2] or "")]:
                    if flag == "i":
                        self.fold = on
                    elif flag == "s":
                        self.dotall = on
                    else:
                        raise Unconvertible(f"flag {flag!r} is not supported")
                if found[3] == ")":  # (?i): the rest of the enclosing group
                    return None
        else:
            self.groups += 1
            index = self.groups
        body = self.alternation()
        if self.peek() != ")":
            raise Unconvertible("unbalanced parenthesis")
        self.at += 1
        self.fold, self.dotall = saved
        return Group(body, index, name)

    def escape(self, in_class: bool) -> Any:
        char = self.peek()
        self.at += 1
        classes = {"d": DIGIT, "w": WORD, "s": SPACE}
        if char.lower() in classes:
            ranges = classes[char.lower()]
            ranges = _complement(ranges) if char.isupper() else ranges
            return ranges if in_class else Chars(ranges, self.fold)
        if not in_class and char in ("b", "B", "A", "z"):
            return Assert("\\" + char)
        if char == "x":
            found = re.match(r"\{([0-9a-fA-F]+)\}|([0-9a-fA-F]{2})", self.text[self.at:])
            if not found:
                raise Unconvertible("bad \\x escape")
            self.at += found.end()
            code = int(found[1] or found[2], 16)
        elif char in "nrtfva":
            code = ord({"n": "\n", "r": "\r", "t": "\t", "f": "\f", "v": "\v", "a": "\a"}[char])
        elif char.isalnum():
            raise Unconvertible(f"escape \\{char} is not supported")
        else:
            code = ord(char)
        ranges = ((code, code),)
        return ranges if in_class else Chars(ranges, self.fold)

    def char_class(self) -> Ranges:
        negate = self.peek() == "^"
        self.at += negate
        items: list[tuple[int, int]] = []
        first = True
        while True:
            char = self.peek()
            if not char:
                raise Unconvertible("unterminated class")
            if char == "]" and not first:
                self.at += 1
                break
            first = False
            if char == "[" and (found := re.match(r"\[:(\^?)(\w+):\]", self.text[self.at:])):
                self.at += found.end()
                ranges = POSIX[found[2]]
                items += _complement(ranges) if found[1] else ranges
                continue
            low = self.class_char()
            if isinstance(low, tuple) and len(low) != 1 or self.peek() != "-" or self.peek(1) in ("]", ""):
                items += low
                continue
            self.at += 1
            high = self.class_char()
            if len(high) != 1:
                raise Unconvertible("bad class range")
            items.append((low[0][0], high[0][1]))
        ranges = _norm(items)
        if self.fold:
            ranges = _folded(ranges)  # Go folds a class when it is parsed
        return _complement(ranges) if negate else ranges

    def class_char(self) -> Ranges:
        char = self.peek()
        self.at += 1
        if char == "\\":
            found = self.escape(in_class=True)
            assert isinstance(found, tuple)
            return found
        return ((ord(char), ord(char)),)


# -- walking the tree ------------------------------------------------------------------------------

def _children(node: Any) -> list[Any]:
    if isinstance(node, Seq):
        return node.items
    if isinstance(node, Alt):
        return node.branches
    if isinstance(node, (Group, Rep)):
        return [node.body]
    return []


def _walk(node: Any) -> Iterator[Any]:
    yield node
    for child in _children(node):
        yield from _walk(child)


def _map(node: Any, change: Any) -> Any:
    """``node`` rebuilt bottom-up, each node passed through ``change``."""
    if isinstance(node, Seq):
        node = Seq([_map(item, change) for item in node.items])
    elif isinstance(node, Alt):
        node = Alt([_map(branch, change) for branch in node.branches])
    elif isinstance(node, (Group, Rep)):
        node = replace(node, body=_map(node.body, change))
    return change(node)


def _nullable(node: Any) -> bool:
    if isinstance(node, Chars):
        return False
    if isinstance(node, (Assert,)):
        return True
    if isinstance(node, Escaped):
        return False
    if isinstance(node, Seq):
        return all(_nullable(item) for item in node.items)
    if isinstance(node, Alt):
        return any(_nullable(branch) for branch in node.branches)
    if isinstance(node, Group):
        return _nullable(node.body)
    assert isinstance(node, Rep)
    return node.lo == 0 or _nullable(node.body)


def _literal(node: Any) -> str | None:
    """The one string ``node`` matches, case-sensitively, or None."""
    if isinstance(node, Chars):
        if len(node.ranges) == 1 and node.ranges[0][0] == node.ranges[0][1] and not (node.fold and node.cased()):
            return chr(node.ranges[0][0])
        return None
    if isinstance(node, Seq):
        parts = [_literal(item) for item in node.items]
        return None if any(part is None for part in parts) else "".join(parts)  # type: ignore[arg-type]
    if isinstance(node, Group):
        return _literal(node.body)
    if isinstance(node, Rep) and node.lo == node.hi:
        body = _literal(node.body)
        return None if body is None else body * node.lo
    return None


def _width(node: Any) -> int | None:
    """The longest text ``node`` matches (None: unbounded)."""
    if isinstance(node, Chars):
        return 1
    if isinstance(node, Escaped):
        return 4
    if isinstance(node, Assert):
        return 0
    if isinstance(node, Seq):
        widths = [_width(item) for item in node.items]
        return None if None in widths else sum(widths)  # type: ignore[arg-type]
    if isinstance(node, Alt):
        widths = [_width(branch) for branch in node.branches]
        return None if None in widths else max(widths)  # type: ignore[type-var]
    if isinstance(node, Group):
        return _width(node.body)
    assert isinstance(node, Rep)
    body = _width(node.body)
    return None if body is None or node.hi is None else body * node.hi


# -- emitting Python syntax --------------------------------------------------------------------------

def _wants_fold(node: Any) -> bool | str | None:
    """The case mode ``node`` needs: True or False, None when it does not matter, "mixed" otherwise."""
    if isinstance(node, Chars):
        return node.fold if node.cased() else None
    if isinstance(node, Escaped):
        return _wants_fold(node.chars)
    modes = {_wants_fold(child) for child in _children(node)} - {None}
    if not modes:
        return None
    return modes.pop() if len(modes) == 1 else "mixed"


def emit(node: Any, fold: bool = False) -> str:
    """Python ``re``/``regex`` syntax for ``node``, where ``fold`` is the case mode around it."""
    if isinstance(node, Chars):
        text = _class_text(node.ranges)
        if node.dotall:
            text = "(?s:.)"
        if node.cased() and node.fold != fold:
            return f"(?{'i' if node.fold else '-i'}:{text})"
        return text
    if isinstance(node, Escaped):
        return node.text(fold)
    if isinstance(node, Assert):
        return {"$": r"\Z", r"\z": r"\Z"}.get(node.kind, node.kind)
    if isinstance(node, Alt):
        return "|".join(emit(branch, fold) for branch in node.branches)
    if isinstance(node, Seq):
        out: list[str] = []
        run: list[Any] = []
        run_mode: Any = None

        def close() -> None:
            if run:
                inner = "".join(emit(item, run_mode) for item in run)
                out.append(f"(?{'i' if run_mode else '-i'}:{inner})")
                run.clear()

        for item in node.items:
            mode = _wants_fold(item)
            if mode in (None, "mixed") and not run or mode == fold and not run:
                out.append(emit(item, fold))
            elif run and (mode is None or mode == run_mode):
                run.append(item)
            elif mode in (True, False) and mode != fold:
                close()
                run_mode = mode
                run.append(item)
            else:
                close()
                out.append(emit(item, fold))
        close()
        return "".join(out)
    if isinstance(node, Group):
        body = emit(node.body, fold)
        if node.name is not None:
            return f"(?P<{node.name}>{body})"
        return f"({body})" if node.index is not None else f"(?:{body})"
    assert isinstance(node, Rep)
    inner = node.body
    while isinstance(inner, Group) and inner.index is None and inner.name is None or \
            isinstance(inner, Seq) and len(inner.items) == 1:
        inner = inner.body if isinstance(inner, Group) else inner.items[0]
    body = emit(inner, fold)
    if not isinstance(inner, (Chars, Escaped, Group)):
        body = f"(?:{body})"
    if node.hi is not None and node.lo == node.hi:
        count = "" if node.lo == 1 else f"{{{node.lo}}}"
    else:
        count = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((node.lo, node.hi)) or \
            f"{{{node.lo},{'' if node.hi is None else node.hi}}}"
    return body + count + ("?" if node.lazy and count else "")


def _simplify(node: Any) -> Any:
    """``node`` without the groups that only grouped (case is kept by each character)."""
    def flatten(node: Any) -> Any:
        if isinstance(node, Group) and node.index is None and node.name is None and isinstance(node.body, Group) \
                and node.body.index is None and node.body.name is None:
            return node.body
        if isinstance(node, Seq):
            items: list[Any] = []
            for item in node.items:
                plain = isinstance(item, Group) and item.index is None and item.name is None
                if plain and isinstance(item.body, Seq):
                    items += item.body.items
                elif plain and isinstance(item.body, (Chars, Escaped, Assert)):
                    items.append(item.body)
                else:
                    items.append(item)
            return Seq(items)
        return node

    return _map(node, flatten)


def python_regex(pattern: str, secret_group: int = 0) -> str:
    """gitleaks' Go regex ``pattern`` in Python syntax, as is (for allowlists and examples); the
    rule's ``secretGroup``, if it names one, is named ``secret``."""
    def name(node: Any) -> Any:
        return Group(node.body, node.index, "secret") if isinstance(node, Group) and node.index == secret_group \
            and secret_group else node

    return "(?a)" + emit(_simplify(_map(Parser(pattern).parse(), name)))


# -- converting a rule -----------------------------------------------------------------------------

@dataclass
class Converted:
    """One converted rule: the fields of its ``[[rules]]`` entry, and what was changed."""

    regex: str
    tail: str | None
    lead: str | None
    entropy: float | None
    notes: list[str] = field(default_factory=list)
    until: str | None = None


def shannon(data: str) -> float:
    """gitleaks' entropy: over characters, divided by the length in bytes."""
    if not data:
        return 0.0
    size = len(data.encode("utf-8"))
    counts: dict[str, int] = {}
    for char in data:
        counts[char] = counts.get(char, 0) + 1
    return -sum(count / size * math.log2(count / size) for count in counts.values())


def _top_groups(node: Any, inside: bool = False) -> Iterator[tuple[Group, bool]]:
    """Capture groups not inside another, with whether a repetition repeats them."""
    if isinstance(node, Group) and node.index is not None:
        yield node, inside
        return
    if isinstance(node, Rep):
        yield from _top_groups(node.body, inside or node.hi is None or node.hi > 1)
        return
    for child in _children(node):
        yield from _top_groups(child, inside)


def _choose_secret(tree: Any, rule: dict[str, Any], statically_allowed: Any, notes: list[str]) -> tuple[Any, bool]:
    """``tree`` with the secret's groups named ``secret``, ``secret2``...; others stop capturing.
    Returns (tree, whether the secret is fixed literals checked here, so the rule needs no entropy)."""
    wanted = rule.get("secretGroup", 0)
    if wanted:
        secrets = [group for group in _walk(tree) if isinstance(group, Group) and group.index == wanted]
    else:
        tops = list(_top_groups(tree))
        if any(repeated for _, repeated in tops):
            notes.append("its capture group repeats (a part of the match): the whole match is redacted")
        secrets = [group for group, repeated in tops if not repeated]
    static = bool(secrets) and all(_literal(group) is not None for group in secrets)
    if static:  # gitleaks checks the group's fixed text: do it now, keep the branches that pass
        failing = {id(group) for group in secrets if statically_allowed(_literal(group))}

        def prune(node: Any) -> Any:
            if isinstance(node, Alt):
                kept = [b for b in node.branches if not any(id(g) in failing for g in _walk(b))]
                if not kept:
                    raise Unconvertible("every alternative's fixed secret fails gitleaks' checks")
                return Alt(kept)
            return node

        if failing:
            notes.append(f"{len(failing)} alternatives whose fixed secret fails gitleaks' entropy or allowlist "
                         "are left out")
        tree = _map(tree, prune)
        secrets = []
        notes.append("its secret groups are fixed literals, checked once here: the whole match is redacted")
    chosen = {id(group): n for n, group in enumerate(secrets)}
    return _mark(tree, chosen), static


def _mark(node: Any, chosen: dict[int, int]) -> Any:
    """A copy of ``node`` whose chosen groups carry their secret name already."""
    if isinstance(node, Group):
        body = _mark(node.body, chosen)
        if id(node) in chosen:
            n = chosen[id(node)]
            return Group(body, 0, "secret" if n == 0 else f"secret{n + 1}")
        return Group(body)
    if isinstance(node, Seq):
        return Seq([_mark(item, chosen) for item in node.items])
    if isinstance(node, Alt):
        return Alt([_mark(branch, chosen) for branch in node.branches])
    if isinstance(node, Rep):
        return replace(node, body=_mark(node.body, chosen))
    return node


def _is_secret(node: Any) -> bool:
    return isinstance(node, Group) and node.name is not None and node.name.startswith("secret")


def _secret_groups(node: Any) -> list[Group]:
    return [n for n in _walk(node) if _is_secret(n)]


def _unroll(node: Any) -> Any:
    """A fixed count of a group with a repetition inside, written out (a nested repetition is not
    allowed; ``(?:-[0-9]{10,13}){3}`` is three of them)."""
    if isinstance(node, Rep) and node.hi is not None and node.lo == node.hi and 1 < node.hi <= UNROLL and \
            any(isinstance(inner, Rep) and (inner.hi is None or inner.hi > 1) for inner in _walk(node.body)):
        return Seq([node.body] * node.lo)
    return node


def _is_boundary(node: Any) -> bool:
    """What gitleaks checks after a secret: an assertion, or a choice that includes the text's end."""
    if isinstance(node, Assert):
        return True
    if isinstance(node, Group) and not _is_secret(node):
        body = node.body
        branches = body.branches if isinstance(body, Alt) else [body]
        return any(isinstance(b, Seq) and len(b.items) == 1 and isinstance(b.items[0], Assert) or
                   isinstance(b, Assert) for b in branches)
    return False


def _drop_trailing(node: Any, notes: list[str]) -> Any:
    """``node`` without the boundary checks at its end (they look past the match)."""
    if isinstance(node, Seq):
        items = list(node.items)
        dropped = False
        while items and _is_boundary(items[-1]):
            items.pop()
            dropped = True
        if dropped and "the boundary after the secret is dropped (it looks past the match)" not in notes:
            notes.append("the boundary after the secret is dropped (it looks past the match)")
        if items:
            items[-1] = _drop_trailing(items[-1], notes)
        return Seq(items)
    if isinstance(node, Alt):
        return Alt([_drop_trailing(branch, notes) for branch in node.branches])
    if isinstance(node, Group):
        return replace(node, body=_drop_trailing(node.body, notes))
    return node


def _drop_lead(node: Any, notes: list[str], has_keywords: bool) -> tuple[Any, Any]:
    """``node`` without the context before its identifier: leading lazy repetitions
    (``[\\w.-]{0,50}?``), and an unbounded lead before the secret (``\\bcurl\\b.*...``) when a
    keyword must have come before. Returns (node, the first lazy lead dropped, or None)."""
    lead = None
    if isinstance(node, Alt):
        branches = [_drop_lead(branch, notes, has_keywords) for branch in node.branches]
        return Alt([branch for branch, _ in branches]), next((lead for _, lead in branches if lead), None)
    seq = node if isinstance(node, Seq) else Seq([node])
    items = list(seq.items)
    while True:
        if items and isinstance(items[0], Rep) and items[0].lazy and items[0].lo == 0:
            lead = lead or items.pop(0)
            continue
        if items and isinstance(items[0], Group) and not _is_secret(items[0]) and isinstance(items[0].body, Seq):
            inner = items[0].body.items
            if inner and isinstance(inner[0], Rep) and inner[0].lazy and inner[0].lo == 0:
                lead = lead or inner[0]
                items[0] = Group(Seq(inner[1:]))
                continue
        break
    note = "the context before its identifier ([\\w.-]{0,50}?) is dropped: the match starts there"
    if lead is not None and note not in notes:
        notes.append(note)
    secret_at = next((n for n, item in enumerate(items) if _secret_groups(item)), 0)  # none: all is secret
    unbounded = [n for n, item in enumerate(items[:secret_at])
                 if any(isinstance(r, Rep) and r.hi is None and _any_text(r.body) for r in _walk(item))]
    if unbounded and has_keywords:
        cut = unbounded[-1] + 1
        notes.append(f"its unbounded lead ({emit(Seq(items[:cut]))}) is dropped: a keyword must come before")
        items = items[cut:]
    return Seq(items), lead


def _any_text(node: Any) -> bool:
    """Whether ``node`` is one character of (nearly) any kind: ``.``, ``[\\s\\S]``."""
    return isinstance(node, Chars) and _contains(node.ranges, ((0, 9), (11, MAX_CHAR)))


def _until(node: Any) -> tuple[Any, Any]:
    """A match that runs lazily over any text to a fixed end (``[\\s\\S]{64,}?KEY-----``) as
    (its start, the end as ``until``); (node, None) for any other."""
    if not isinstance(node, Seq) or _secret_groups(node):
        return node, None
    for n, item in enumerate(node.items):
        if isinstance(item, Rep) and item.lazy and item.hi is None and _any_text(item.body):
            rest = Seq(node.items[n + 1:])
            if rest.items and _width(rest) is not None and not _nested(rest) and \
                    not any(isinstance(r, Rep) and r.hi is None for r in _walk(rest)):
                return Seq([*node.items[:n], Rep(item.body, item.lo, item.lo)]), rest
    return node, None


def _bound(node: Any) -> Any:
    if isinstance(node, Rep) and node.hi is None:
        space = isinstance(node.body, Chars) and _contains(SPACE, node.body.ranges)
        return replace(node, hi=node.lo + (CAP_SPACE if space else CAP))
    return node


def _trailing(node: Any) -> list[Rep]:
    """The repetitions of one character that can end a match of ``node``."""
    if isinstance(node, Rep):
        if isinstance(node.body, Chars) and (node.hi is None or node.hi > 1):
            return [node]
        return _trailing(node.body)
    if isinstance(node, Group):
        return _trailing(node.body)
    if isinstance(node, Alt):
        return [rep for branch in node.branches for rep in _trailing(branch)]
    if isinstance(node, Seq):
        found: list[Rep] = []
        for item in reversed(node.items):
            found += _trailing(item)
            if not _nullable(item):
                break
        return found
    return []


def _secret_ends(node: Any) -> list[Any]:
    """The secret groups that can end a match of ``node`` (the whole match when it has none)."""
    if _is_secret(node):
        return [node]
    if isinstance(node, Group):
        return _secret_ends(node.body)
    if isinstance(node, Alt):
        return [g for branch in node.branches for g in _secret_ends(branch)]
    if isinstance(node, Seq):
        for item in reversed(node.items):
            found = _secret_ends(item)
            if found or not _nullable(item):
                return found
    return []


def _escape_context(node: Any) -> Any:
    """A class matching a quote or white space (and no backslash) may match it escaped too
    (``Escaped``): around the secret, and in it where it holds them (a YAML value's indentation)."""
    if isinstance(node, Chars):
        if _has(node.ranges, "\\") or not any(_has(node.ranges, q) for q in QUOTES + WHITE):
            return node
        return Escaped(node)
    if isinstance(node, Seq):
        return Seq([_escape_context(item) for item in node.items])
    if isinstance(node, Alt):
        return Alt([_escape_context(branch) for branch in node.branches])
    if isinstance(node, (Group, Rep)):
        return replace(node, body=_escape_context(node.body))
    return node


def _inner_boundaries(node: Any) -> Any:
    """``node`` with each ``\\b`` after something else in the match as lookarounds: ``regex``
    misreports a partial match (a stream's text ending there) at a ``\\b`` it cannot decide yet."""
    def rewrite(node: Any) -> Any:
        if not isinstance(node, Seq):
            return node
        items = list(node.items)
        for n in range(1, len(items)):
            if isinstance(items[n], Assert) and items[n].kind == r"\b":
                after = items[n + 1] if n + 1 < len(items) else None
                before = items[n - 1]
                if isinstance(after, Chars) and _contains(WORD, _first_chars(after)):
                    items[n] = Assert(r"(?<!\w)")
                elif isinstance(before, Chars) and _contains(WORD, before.ranges):
                    items[n] = Assert(r"(?!\w)")
                else:
                    items[n] = Assert(r"(?:(?<=\w)(?!\w)|(?<!\w)(?=\w))")
        return Seq(items)

    return _map(node, rewrite)


def _first_chars(node: Any) -> Ranges:
    """The characters a match of ``node`` can begin with."""
    if isinstance(node, Chars):
        return _folded(node.ranges) if node.fold else node.ranges
    if isinstance(node, Escaped):
        return _norm([*_first_chars(node.chars), (92, 92)])
    if isinstance(node, Seq):
        found: list[tuple[int, int]] = []
        for item in node.items:
            found += _first_chars(item)
            if not _nullable(item):
                break
        return _norm(found)
    if isinstance(node, Alt):
        return _norm([r for branch in node.branches for r in _first_chars(branch)])
    if isinstance(node, (Group, Rep)):
        return _first_chars(node.body)
    return ()


def _chars(node: Any) -> Ranges:
    """Every character a match of ``node`` can hold."""
    if isinstance(node, Chars):
        return _folded(node.ranges) if node.fold else node.ranges
    if isinstance(node, Escaped):
        return _norm([*_chars(node.chars), (92, 92), *_class_ranges("nrt\"'`")])
    return _norm([r for child in _children(node) for r in _chars(child)])


def _class_ranges(chars: str) -> Ranges:
    return _norm([(ord(c), ord(c)) for c in chars])


def _reach(node: Any) -> Any:
    """``node`` with a cheap check before a run of optional context that, over the characters the
    run may hold, a required operator comes within its reach (``key`` in prose, with no ``=``
    after it, fails at once instead of trying each way to split the run); the operator's
    characters are none of the run's, so the check decides nothing the run would not, and reads
    no further than the run would."""
    if isinstance(node, Alt):
        return Alt([_reach(branch) for branch in node.branches])
    if not isinstance(node, Seq):
        return node
    items = node.items
    for start in range(1, len(items)):
        end = start
        while end < len(items) and isinstance(items[end], Rep) and items[end].lo == 0:
            end += 1
        if end == start or end == len(items) or _nullable(items[end]):
            continue
        ops = _first_chars(items[end])
        run = _norm([r for item in items[start:end] for r in _chars(item)])
        reach = sum(_width(item) or 0 for item in items[start:end])
        if ops and len(_class_text(ops)) <= 12 and not _overlap(run, ops):
            check = Assert(f"(?={_class_text(run)}{{0,{reach}}}+{_class_text(ops)})")  # possessive: ops are not run
            return Seq([*items[:start], check, *items[start:]])
    return node


def _overlap(a: Ranges, b: Ranges) -> bool:
    return any(lo <= hi2 and lo2 <= hi for lo, hi in a for lo2, hi2 in b)


def _nested(node: Any, inside: bool = False) -> bool:
    if isinstance(node, Rep):
        if inside and (node.hi is None or node.hi > 1):
            return True
        return _nested(node.body, inside or node.hi is None or node.hi > 1)
    return any(_nested(child, inside) for child in _children(node))


def convert_rule(rule: dict[str, Any], global_allowed: Any) -> Converted:
    """Rule ``rule`` of gitleaks' config (as parsed) in rosetta's format; raises Unconvertible."""
    if "regex" not in rule:
        raise Unconvertible("it has no regex: it flags files by their path alone")
    notes: list[str] = []
    tree = Parser(rule["regex"]).parse()
    entropy = rule.get("entropy") or None

    def statically_allowed(secret: str) -> bool:
        return bool(entropy is not None and shannon(secret) <= entropy or global_allowed(secret))

    tree, static = _choose_secret(tree, rule, statically_allowed, notes)
    if static:
        entropy = None
    tree = _map(tree, _unroll)
    tree = _drop_trailing(tree, notes)
    tree, lead = _drop_lead(tree, notes, bool(rule.get("keywords")))
    tree, until = _until(tree)
    if until is not None:
        notes.append("its lazy run over any text to a fixed end becomes `until` (the end's first match)")
    if any(isinstance(r, Rep) and r.hi is None for r in _walk(tree)):
        notes.append(f"an unbounded repetition is bounded at {CAP} more than its minimum ({CAP_SPACE} for white space)")
    tree = _map(tree, _bound)
    tail = None
    if until is None:
        ends = _secret_ends(tree) if _secret_groups(tree) else [tree]
        reps = [rep for end in ends for rep in _trailing(end)]
        if reps:
            tail = _class_text(_norm([r for rep in reps for r in (_folded(rep.body.ranges) if rep.body.fold
                                                                   else rep.body.ranges)]))
    if _secret_groups(tree):
        tree = _escape_context(tree)
    tree = _inner_boundaries(_reach(_simplify(tree)))
    if _nested(tree):
        raise Unconvertible("a repetition repeats inside another (so a match could take more than linear time)")
    if isinstance(tree, Seq) and not tree.items:
        raise Unconvertible("nothing is left once its context is dropped")
    if _width(tree) is None:
        raise Unconvertible("it can still match unbounded text")
    text = "(?a)" + emit(tree)
    for engine in (re, regex):
        try:
            engine.compile(text)
        except Exception as error:  # noqa: BLE001  (either engine's error: the rule is not usable)
            raise Unconvertible(f"{engine.__name__} cannot compile the conversion: {error}") from None
    if rule.get("path"):
        notes.append(f"its path condition ({rule['path']}) is not applied: text here has no file name")
    lead_text = None
    if lead is not None and any(a.get("regexTarget") == "match" for a in rule.get("allowlists", [])):
        lead_text = "(?a)" + emit(Rep(lead.body, lead.lo, lead.hi))
    until_text = None if until is None else "(?a)" + emit(_simplify(until))
    return Converted(text, tail, lead_text, entropy, notes, until_text)


def convert_allowlist(allowlist: dict[str, Any], notes: list[str]) -> dict[str, Any] | None:
    """A gitleaks allowlist as data the scanner applies, or None when it cannot apply to text."""
    target = allowlist.get("regexTarget", "secret")
    if allowlist.get("paths") or allowlist.get("commits"):
        if allowlist.get("condition", "OR").upper() == "AND" or \
                not (allowlist.get("regexes") or allowlist.get("stopwords")):
            notes.append("an allowlist that needs a file path or commit is left out")
            return None
    if target == "line" and allowlist.get("regexes"):
        notes.append("an allowlist on the whole line is left out (a line goes on past the match)")
        allowlist = {**allowlist, "regexes": []}
        if not allowlist.get("stopwords"):
            return None
    converted: dict[str, Any] = {}
    if allowlist.get("regexes"):
        converted["target"] = target
        converted["regexes"] = [python_regex(pattern) for pattern in allowlist["regexes"]]
    if allowlist.get("stopwords"):
        converted["stopwords"] = [word.lower() for word in allowlist["stopwords"]]
    if allowlist.get("condition", "OR").upper() == "AND" and len(converted) > 1:
        converted["all"] = True
    return converted or None


def kind(rule_id: str) -> str:
    return KINDS.get(rule_id, rule_id.replace("-", " "))


# -- the generated file ----------------------------------------------------------------------------

def toml_string(text: str) -> str:
    """``text`` as a TOML string: plain where it can be, else literal (regexes), else escaped."""
    if not any(char in text for char in '"\\') and all(char >= " " for char in text):
        return f'"{text}"'
    if "'''" not in text and not text.endswith("'") and "\n" not in text and "\r" not in text:
        return f"'''{text}'''"
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") \
        .replace("\t", "\\t")
    return f'"{escaped}"'


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list):
        if sum(len(toml_value(item)) for item in value) < 80:
            return "[" + ", ".join(toml_value(item) for item in value) + "]"
        return "[\n" + "".join(f"    {toml_value(item)},\n" for item in value) + "]"
    raise TypeError(type(value))


def toml_table(name: str, values: dict[str, Any], array: bool = False) -> str:
    head = f"[[{name}]]" if array else f"[{name}]"
    lines = [head]
    nested = []
    for key, value in values.items():
        if isinstance(value, dict):
            nested.append((key, value, False))
        elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            nested += [(key, item, True) for item in value]
        elif value is not None:
            lines.append(f"{key} = {toml_value(value)}")
    text = "\n".join(lines) + "\n"
    for key, value, is_array in nested:
        text += toml_table(f"{name}.{key}", value, is_array)
    return text


GITLEAKS_FIELDS = ("regex", "secretGroup", "entropy", "keywords", "path", "allowlists")


def generate(config: dict[str, Any], source: str, version: str, digest: str) -> str:
    """The generated file's text for gitleaks' ``config`` (as parsed)."""
    glob = config.get("allowlist", {})
    global_regexes = [regex.compile(python_regex(p)) for p in glob.get("regexes", [])]
    global_words = [w.lower() for w in glob.get("stopwords", [])]

    def global_allowed(secret: str) -> bool:
        return any(p.search(secret) for p in global_regexes) or any(w in secret.lower() for w in global_words)

    entries: list[tuple[tuple[bool, int, str], str]] = []
    skipped: list[tuple[str, str, dict[str, Any]]] = []
    for rule in config["rules"]:
        recorded = {key: rule[key] for key in GITLEAKS_FIELDS if key in rule}
        try:
            converted = convert_rule(rule, global_allowed)
        except Unconvertible as why:
            skipped.append((rule["id"], str(why), recorded))
            continue
        notes = list(converted.notes)
        allowlists = [a for a in (convert_allowlist(a, notes) for a in rule.get("allowlists", [])) if a]
        entry: dict[str, Any] = {
            "id": f"gitleaks:{rule['id']}", "kind": kind(rule["id"]), "source": f"gitleaks {rule['id']}",
            "regex": converted.regex, "tail": converted.tail, "until": converted.until, "lead": converted.lead,
            "entropy": converted.entropy, "keywords": [k.lower() for k in rule.get("keywords", [])] or None,
            "gitleaks_regex": python_regex(rule["regex"], rule.get("secretGroup", 0)), "notes": notes or None,
            "allowlists": allowlists or None, "gitleaks": recorded}
        engine: Any = re  # re has no public API for a pattern's width
        shortest = engine._parser.parse(converted.regex).getwidth()[0]
        entries.append((("generic" in rule["id"], -shortest, rule["id"]), toml_table("rules", entry, array=True)))
    global_entry: dict[str, Any] = {
        "regexes": [python_regex(p) for p in glob.get("regexes", [])] or None,
        "stopwords": global_words or None,
        "gitleaks": {key: glob[key] for key in ("regexes", "stopwords") if key in glob}}
    header = [
        "# GENERATED by tools/gitleaks_rules.py: do not edit; change the script (or its source) and rerun it.",
        "#",
        f"# From gitleaks' config/gitleaks.toml, {version}: {source}",
        f"# sha256 {digest}",
        f"# {len(config['rules']) - len(skipped)} of its {len(config['rules'])} rules converted; the rest, and why"
        " (each is under [[skipped]] too):",
        *(f"#   {rule_id}: {why}" for rule_id, why, _ in skipped),
        "#",
        "# The format is secret_rules.toml's (see its header); runtime/secrets.py tries these after rosetta's",
        "# own rules. Besides: `entropy` (a secret of lower Shannon entropy is no match), `keywords` (the",
        "# rule counts only once one of them, in any case, has come in the text), `allowlists` (a",
        "# secret or match they allow is no match), `lead` (the dropped context an allowlist on the",
        "# match also reads), `gitleaks_regex` (gitleaks' regex in Python syntax: tests draw examples",
        "# from it), `notes` (where the rule differs from gitleaks'), and [rules.gitleaks], what",
        "# gitleaks' config says (the script's input). [allowlist] applies to every rule here.",
        "#",
        *(f"# {line}" for line in MIT.splitlines()),
        "",
        f"source = {toml_string(source)}",
        f"version = {toml_string(version)}",
        f"sha256 = {toml_string(digest)}",
        "",
    ]
    rules_text = [text for _, text in sorted(entries)]  # at the same start the first rule wins: the more specific first
    rules_text += [toml_table("skipped", {"id": rule_id, "reason": why, "gitleaks": recorded}, array=True)
                   for rule_id, why, recorded in skipped]
    return "\n".join(header) + "\n" + toml_table("allowlist", global_entry) + "\n" + "\n".join(rules_text)


def read_source(source: str) -> bytes:
    if source.startswith("https://"):
        with urllib.request.urlopen(source, timeout=60) as response:  # noqa: S310  (https only)
            return bytes(response.read())
    if "://" in source:
        raise SystemExit(f"{source}: only a path or an https URL")
    return Path(source).read_bytes()


def recorded_config(path: Path) -> tuple[dict[str, Any], str, str, str]:
    """gitleaks' config as the generated file at ``path`` records it: (config, source, version, sha256)."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    rules = [{"id": entry["id"].removeprefix("gitleaks:"), **entry["gitleaks"]}
             for entry in [*data.get("rules", []), *data.get("skipped", [])]]
    return {"allowlist": data["allowlist"].get("gitleaks", {}), "rules": rules}, data["source"], data["version"], \
        data["sha256"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", nargs="?", default=SOURCE, help="path or https URL of gitleaks' config/gitleaks.toml")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--version", help="the gitleaks tag SOURCE is (default: read from a raw.githubusercontent URL)")
    parser.add_argument("--name", help="the source to record in the header (default: SOURCE)")
    parser.add_argument("--check", action="store_true", help="exit 1 when OUTPUT differs from what SOURCE gives")
    parser.add_argument("--recorded", action="store_true",
                        help="convert the gitleaks rules recorded in OUTPUT instead of SOURCE (no network)")
    args = parser.parse_args(argv)
    if args.recorded:
        config, name, version, digest = recorded_config(args.output)
    else:
        raw = read_source(args.source)
        config, digest = tomllib.loads(raw.decode("utf-8")), hashlib.sha256(raw).hexdigest()
        name = args.name or args.source
        tag = re.search(r"/gitleaks/gitleaks/([^/]+)/config/", name)
        version = args.version or (tag[1] if tag else "unknown")
    text = generate(config, name, version, digest)
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: rerun python tools/gitleaks_rules.py", file=sys.stderr)
            return 1
        print(f"{args.output} is up to date")
        return 0
    args.output.write_text(text, encoding="utf-8")
    lines = text.splitlines()
    print(f"wrote {args.output}: {lines.count('[[rules]]')} rules, {lines.count('[[skipped]]')} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
