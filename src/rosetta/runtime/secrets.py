"""Finding and redacting credentials in text: error messages, logs, transcripts and streamed
answers never carry API keys, and the ``no_secrets_in_output`` guardrail uses the same rules on
model answers (:mod:`rosetta.runtime.secret_rules` reads them; :func:`rules` lists them).

One scanner serves whole texts and streams alike (:func:`redact` is a stream fed the whole text at
once), so a streamed answer redacts exactly as the whole answer would, wherever it was cut. The
scan is linear: each rule's own pattern is bounded, so the stream holds back at most the longest
credential start, and a credential's unbounded rest (its ``tail`` or ``until``) is consumed as it
arrives, never searched again. A rule is searched only from where one of the literals every match
of it starts with has come (one scan of the text finds them all, and gitleaks' keywords), or
everywhere when it has none. gitleaks' checks (keywords, entropy, allowlists) decide a match once
it is certain, so a stream decides as the whole text does; and since a converted rule no longer
looks at what follows its secret, the longer of two matches at one place wins, and a credential
that starts inside one just redacted and goes on past it is redacted too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rosetta.errors import Problem
from rosetta.runtime.secret_rules import CONTEXT, LITERAL, LOWER, Compiled, Rule, compiled_rules, rules, shannon_entropy

if TYPE_CHECKING:
    import regex

__all__ = ["Rule", "SecretStream", "find_secrets", "find_secrets_in", "redact", "redact_data", "redact_problems",
           "rules", "shannon_entropy", "strings"]

def find_secrets(text: str) -> list[str]:
    """The kinds of credentials found in ``text``, in order of appearance (empty when none)."""
    stream = SecretStream()
    stream.flush_text(text)
    return stream.kinds


def redact(text: str) -> str:
    """``text`` with every credential replaced by ``[redacted <kind>]``."""
    return SecretStream().flush_text(text)


def strings(value: object) -> Iterator[str]:
    """Every string in JSON-like ``value``, mapping keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from strings(key)
            yield from strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from strings(item)


def find_secrets_in(value: object) -> list[str]:
    """The kinds of credentials found in any string of JSON-like ``value``."""
    return list(dict.fromkeys(kind for text in strings(value) for kind in find_secrets(text)))


def redact_data(value: object) -> Any:
    """JSON-like ``value`` with every string in it redacted, mapping keys included."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {redact_data(key): redact_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_data(item) for item in value]
    return value


def redact_problems(problems: Problem | list[Problem] | str) -> list[Problem]:
    """``problems``, as :class:`~rosetta.errors.RosettaError` takes them, with every message and
    hint redacted: the runtime's exceptions quote model answers and provider errors."""
    items = [problems] if isinstance(problems, (str, Problem)) else list(problems)
    return [replace(p, message=redact(p.message), hint=p.hint and redact(p.hint))
            for p in (Problem(item) if isinstance(item, str) else item for item in items)]


Span = tuple[int, int, int, int, int]
"""(rule, start, end, start and end of what is redacted)."""

_HOLD: Span = (-1, -1, -1, -1, -1)
"""What `_glued` answers while more text could still decide."""


class SecretStream:
    """Redacts text that arrives in pieces (a streamed answer) without ever sending part of a
    credential: :meth:`feed` returns the text that no later piece can make part of one, and
    :meth:`flush` the rest, so everything returned joins to exactly ``redact(whole text)``.

    Held back is only the text from the first place where a rule could still match with more text
    (at most the longest rule match, see ``secret_rules.toml``); once a credential's start is
    certain its label is sent, and its rest is dropped as it arrives. ``kinds`` lists the kinds
    found so far.
    """

    def __init__(self) -> None:
        self._text = ""  # CONTEXT characters already sent, then the unsent text
        self._at = 0  # where the unsent text starts
        self._base = 0  # where `_text` starts in the whole stream
        self._inside: int | None = None  # the rule whose credential is still going on
        self._after_label = False  # what was sent last is a label: `]` precedes the unsent text
        self._from: dict[int, int] = {}  # rule → where in the stream one of its literal starts first comes
        self._resume: dict[int, int] = {}  # rule → where in the stream it goes on (after a match its checks reject)
        self._rejected: list[tuple[int, int, int]] = []  # (start, end in the stream, rule) of matches checks rejected
        self._scanned = 0  # where in the stream the scan for literal starts goes on
        self._keywords: dict[int, int] = {}  # keyword → where in the stream its first occurrence ends
        self._floor = 0  # where in the stream a credential may start (before the unsent text after a redaction)
        self._begun = 0  # where in this text a literal start may have begun at its end (its length: none)
        self.kinds: list[str] = []

    def feed(self, text: str) -> str:
        """The redacted text that can be sent now."""
        self._text += text
        return self._scan(final=False)

    def flush(self) -> str:
        """The rest, redacted, once the stream has ended."""
        return self._scan(final=True)

    def flush_text(self, text: str) -> str:
        """``text`` as a whole stream: fed and flushed at once."""
        self._text += text
        return self._scan(final=True)

    def _scan(self, final: bool) -> str:
        compiled, text, at, sent = compiled_rules(), self._text, self._at, []
        self._find_starts(compiled, text, final)
        found: dict[int, tuple[int, Any] | None] = {}  # each rule's first credential, in this text
        while True:
            if self._inside is not None:
                at, done = self._consume(compiled, text, at, final)
                if not done:
                    break
                self._inside, self._after_label = None, True
            hit = None
            if self._after_label:
                hit = self._glued(compiled, text, at, final)
                if hit is _HOLD:
                    break
                self._after_label = False
            if hit is None:
                start, index, match = self._next_match(compiled, text, at, found, final)
                if match is None:  # nothing, or a place where more text could still make one start
                    stop = len(text) if start is None else max(start, at)
                    if stop > at:  # sent as it is: nothing may start before its end any more
                        sent.append(text[at:stop])
                        at, self._floor = stop, self._base + stop
                    break
                hit = _span(compiled, index, match, 0)
            index, start, end, secret_start, secret_end = hit
            rule = compiled.rules[index]
            self._floor = self._base + start + 1
            start, secret_start = max(start, at), max(secret_start, at)  # one going on past the last: its rest
            sent += [text[at:start], self._kept(text[start:secret_start]), rule.label,
                     self._kept(text[secret_end:end])]
            self.kinds += [rule.kind] if rule.kind not in self.kinds else []
            at = end
            if rule.until or rule.tail and secret_end == end:
                self._inside = index
            else:
                self._after_label = secret_end == end
        keep = max(min(self._lowest(compiled, at) - CONTEXT, self._scanned - self._base), 0)
        self._text, self._at, self._base = text[keep:], at - keep, self._base + keep
        return "".join(sent)

    def _lowest(self, compiled: Compiled, at: int) -> int:
        """The first place of this text where a credential may still start: ``at``, or, just after
        one was redacted, its start (a credential that starts inside it and goes on past it is
        redacted too, the part past it); never more than the longest rule match back."""
        return min(at, max(self._floor - self._base, at - compiled.horizon, 0))

    def _find_starts(self, compiled: Compiled, text: str, final: bool) -> None:
        """Note, for the text not scanned yet, where each rule's literal starts begin (the rule
        may start a credential there) and where each keyword first ends; and, unless the stream
        has ended, where a literal start may have begun at the text's end (``_begun``)."""
        base = self._base
        begin = max(self._scanned - base, 0)  # a keyword that began in text already sent counts too
        lowered = text.translate(LOWER)  # ASCII only: a literal start is ASCII, and the length stays
        earliest, resume = self._from, self._resume
        for found in compiled.starts.finditer(lowered, begin):
            rules, keywords = compiled.at_start[found[1]]
            place = base + found.start()
            for index in rules:
                if earliest.get(index, place + 1) > place and resume.get(index, 0) <= place:
                    earliest[index] = place
            for keyword, size in keywords:
                self._keywords.setdefault(keyword, place + size)
        self._scanned = base + max(begin, len(text) - compiled.longest + 1)  # a longer one may end later
        self._begun = len(text)
        if not final:  # the longest end of the text that begins a literal start: a rule may start there
            for size in range(min(LITERAL + 1, len(text) - self._at + 1) - 1, 0, -1):  # a rule's: LITERAL at most
                if lowered[len(text) - size:] in compiled.partial:
                    self._begun = len(text) - size
                    break

    def _kept(self, part: str) -> str:
        """A part of a match kept beside its secret group (``postgres://USER:``), redacted on its
        own: the user of a URL can be a token too."""
        if not part:
            return part
        inner = SecretStream()
        clean = inner.flush_text(part)
        self.kinds += [kind for kind in inner.kinds if kind not in self.kinds]
        return clean

    def _consume(self, compiled: Compiled, text: str, at: int, final: bool) -> tuple[int, bool]:
        """Drop what continues the credential of rule ``self._inside`` from ``at``: where it stops,
        and whether that is known (more text could continue it)."""
        index = self._inside
        assert index is not None
        tail = compiled.tails[index]
        if tail is not None:  # a unit needs at most one character more to be decided
            end = tail.match(text, at).end()
            return end, final or end < len(text) - 1
        found = compiled.untils[index].search(text, at)  # the first one ends it, however much follows
        if found is not None or final:
            return (found.end() if found else len(text)), True
        return max(at, len(text) - compiled.until_horizon), False  # an end line may start after this

    def _candidates(self, compiled: Compiled) -> list[int]:
        """The rules that may start a credential in the unsent text, in order."""
        return sorted({*self._from, *compiled.always})

    def _next_match(self, compiled: Compiled, text: str, at: int, found: dict[int, tuple[int, Any] | None],
                    final: bool) -> tuple[int | None, int, Any]:
        """The first credential that goes on past ``at``, or the first place where more text could
        still make one: (its start, rule, its match), the match None for such a place, and
        (None, -1, None) when there is none. At the same place, the first rule; a place still open
        goes first. ``found`` keeps each rule's answer for this text: one from an earlier place that
        starts at or after where credentials may now start still holds, so each rule scans the text
        about once."""
        low = self._lowest(compiled, at)
        while True:
            best: tuple[int, int, Any] | None = None
            for index in self._candidates(compiled):
                first = found.get(index)
                if index not in found or first is not None and (first[0] < low or first[1] is not None and
                                                                first[1].end() <= at):
                    start = max(low, self._from.get(index, 0) - self._base, self._resume.get(index, 0) - self._base)
                    first = found[index] = self._first(compiled, index, text, start, at, final)
                if first is not None and (best is None or _before(first, best)):
                    best = (first[0], index, first[1])
            if self._begun < len(text) and (best is None or self._begun <= best[0]):
                best = (self._begun, -1, None)  # the beginning of a literal start: a rule may start there
            if best is None:
                return None, -1, None
            rejected = self._reconsider(compiled, text, at, low, best)
            if rejected is not None:
                return rejected
            place, index, match = best
            if index < 0:
                return best
            if match is None or index not in compiled.generic:
                return best
            # gitleaks drops a generic finding when another rule's secret holds its secret: give way
            # to one, and wait while one starting before the secret may still turn out to
            _, _, _, secret_start, secret_end = _span(compiled, index, match, 0)
            others = [(rule, first) for rule, first in found.items() if first is not None and
                      place <= first[0] <= secret_start and rule not in compiled.generic and rule != index]
            if any(first[1] is None for _, first in others):
                return place, index, None
            if not any(self._covers(compiled, rule, first[1], text, secret_start, secret_end)
                       for rule, first in others):
                return best
            self._resume[index] = self._base + match.end()
            del found[index]

    @staticmethod
    def _covers(compiled: Compiled, index: int, match: regex.Match[str], text: str, start: int, end: int) -> bool:
        """Whether rule ``index``'s ``match`` redacts ``text[start:end]``: its secret does, with
        the rest its ``tail`` takes."""
        _, _, match_end, secret_start, secret_end = _span(compiled, index, match, 0)
        tail = compiled.tails[index]
        if tail is not None and secret_end == match_end:
            secret_end = tail.match(text, secret_end).end()
        return secret_start <= start and secret_end >= end

    def _reconsider(self, compiled: Compiled, text: str, at: int, low: int,
                    best: tuple[int, int, Any]) -> tuple[int, int, Any] | None:
        """A match a rule's checks rejected, which the ``best`` credential (or place still open)
        starts inside: the text from it on is sent only once that is decided, and then read as
        it will be sent, cut where the credential starts (a secret a stopword or its entropy let
        pass for what followed it is a credential once that is redacted). Returns what comes first
        instead of ``best``, or None."""
        place, base = best[0], self._base
        self._rejected = [entry for entry in self._rejected if entry[0] - base >= low]  # the rest is sent or redacted
        for begin, end, index in self._rejected:
            begin, end = begin - base, end - base
            if begin < place < end:
                if best[2] is None:
                    return begin, -1, None
                cut = compiled.each[index].match(text, begin, place)
                if cut is not None and cut.end() > at and self._accepts(compiled, index, cut, text, 0) and \
                        _span(compiled, index, cut, 0)[4] > at:
                    return begin, index, cut
        return None

    def _first(self, compiled: Compiled, index: int, text: str, start: int, at: int,
               final: bool) -> tuple[int, Any] | None:
        """Where rule ``index`` may first start, from ``start``, a credential that goes on past
        ``at``: (place, its match), the match None where more text could still change what is
        there; None when nowhere (the rule is then left out until its literal start comes again).
        A match its checks reject is no match there, nor one that ends by ``at`` (inside what was
        redacted); the rule goes on from the next character (gitleaks goes on after the match, so
        misses a credential that starts inside one it rejects)."""
        pattern, checks = compiled.each[index], compiled.checks[index]
        if final and checks is not None and checks.keywords and not any(k in self._keywords for k in checks.keywords):
            return None  # the whole text is here, and none of its keywords: no credential of this rule
        hold = None if final or index not in compiled.fragile else self._fragile_hold(compiled, index, text, start)
        first = self._first_from(compiled, index, pattern, text, start, at, final, hold)
        if first is not None and first[1] is None and self._resume.get(index, 0) < self._base + first[0]:
            self._resume[index] = self._base + first[0]  # nothing can start before it: search from there
        return first

    def _first_from(self, compiled: Compiled, index: int, pattern: regex.Pattern[str], text: str, start: int, at: int,
                    final: bool, hold: int | None) -> tuple[int, Any] | None:
        """:meth:`_first`, given the rule's pattern and where a fragile rule waits (``hold``)."""
        while True:
            found = pattern.search(text, start, partial=not final)
            if found is None:  # not even a start: until a literal start of it comes, the rule is left out
                if hold is not None:
                    return hold, None
                self._from.pop(index, None)
                self._resume[index] = self._base + len(text)
                return None
            if hold is not None and hold < found.start():
                return hold, None
            if found.partial or not final and found.end() >= len(text):
                return found.start(), None
            if not final and found.start() > start:  # a match in progress before it is not reported
                early = pattern.search(text, start, found.start(), partial=True)
                if early is not None:
                    return early.start(), None
            if found.end() > at:
                if not self._accepts(compiled, index, found, text, 0):
                    self._rejected.append((self._base + found.start(), self._base + found.end(), index))
                elif _span(compiled, index, found, 0)[4] > at:
                    return found.start(), found
            start = found.start() + 1  # a credential may still start inside it (gitleaks' would go on after it)
            self._resume[index] = self._base + start

    def _fragile_hold(self, compiled: Compiled, index: int, text: str, start: int) -> int | None:
        """For a rule whose partial matches ``regex`` may not report (see ``_fragile``): the first
        place from ``start`` where one of its literal starts came, close enough to the text's end
        for a match from there to go on past it; None when there is none."""
        literals, width = compiled.fragile[index]
        begin = max(start, len(text) - width)
        if not literals:
            return begin if begin < len(text) else None
        lowered = text[begin:].translate(LOWER)
        places = [place for place in (lowered.find(literal) for literal in literals) if place >= 0]
        return begin + min(places) if places else None

    def _accepts(self, compiled: Compiled, index: int, match: regex.Match[str], text: str, offset: int) -> bool:
        """Whether rule ``index``'s checks take ``match`` (of ``text``, which starts ``offset`` into
        the stream's text) for a credential: one of its keywords has come by the match's end, the
        secret's entropy is above the rule's, and no allowlist allows it."""
        checks = compiled.checks[index]
        if checks is None:
            return True
        if checks.keywords:
            end = self._base + offset + match.end()
            if not any(self._keywords.get(keyword, end + 1) <= end for keyword in checks.keywords):
                return False
        group = next((n for n in compiled.secrets[index] if match.start(n) >= 0), 0)
        secret = match.group(group)
        if checks.entropy is not None and shannon_entropy(secret) <= checks.entropy:
            return False
        for target, regexes, stopwords, every in checks.allowlists:
            subject = secret
            if target == "match":
                subject = match.group()
                if checks.lead is not None:
                    lead = checks.lead.search(text, max(0, match.start() - CONTEXT), match.start())
                    subject = (lead.group() if lead else "") + subject
            verdicts = ([any(p.search(subject) for p in regexes)] if regexes else []) + \
                ([stopwords.search(secret.lower()) is not None] if stopwords is not None else [])
            if verdicts and (all(verdicts) if every else any(verdicts)):
                return False
        return True

    def _glued(self, compiled: Compiled, text: str, at: int, final: bool) -> Span | None:
        """A credential starting at ``at``, right after a label, as the text sent reads: there a `]`
        precedes it, so a key glued to the one just redacted (``...ab3sk-ant-...``) starts a word and
        is redacted too, never sent. ``_HOLD`` while more text could still decide it."""
        end = min(len(text), at + compiled.horizon + 1)
        open_end = not final and end == len(text)
        probe = "]" + text[at:end]  # a rule looks one character back (\b, (?<!...)): the `]` is all it sees
        lowered = probe[1:1 + compiled.longest].translate(LOWER)
        if open_end and lowered in compiled.partial:
            return _HOLD  # the text so far begins a literal start
        literal = compiled.starts.match(lowered)  # the rules that may start here, whatever came before
        best: tuple[int, Any] | None = None
        for index in sorted({*compiled.always, *(compiled.at_start[literal[1]][0] if literal else ())}):
            match = compiled.each[index].match(probe, 1, partial=open_end)
            if match is None and open_end and index in compiled.fragile:
                return _HOLD  # regex may not tell a partial match of this rule: wait
            if match is None:
                continue
            if open_end and (match.partial or match.end() >= len(probe)):
                return _HOLD
            if self._accepts(compiled, index, match, probe, at - 1) and (best is None or match.end() > best[1].end()):
                best = (index, match)
        return None if best is None else _span(compiled, best[0], best[1], at - 1)


def _before(first: tuple[int, Any], best: tuple[int, int, Any]) -> bool:
    """Whether a rule's ``first`` credential goes before the ``best`` so far (of a rule tried
    earlier): it starts sooner; or, at the same place, it is still open, or longer (the more
    specific, as a boundary gitleaks checks after a shorter one's secret would have rejected it)."""
    if first[0] != best[0]:
        return first[0] < best[0]
    if first[1] is None or best[2] is None:
        return first[1] is None and best[2] is not None
    return bool(first[1].end() > best[2].end())


def _span(compiled: Compiled, index: int, match: regex.Match[str], offset: int) -> Span:
    """(rule, start, end, start and end of what is redacted) of a rule's ``match``, ``offset`` on:
    the first of its `secret` groups that takes part, or the whole match."""
    group = next((n for n in compiled.secrets[index] if match.start(n) >= 0), 0)
    return (index, match.start() + offset, match.end() + offset, match.start(group) + offset,
            match.end(group) + offset)
