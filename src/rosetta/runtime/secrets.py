"""Finding and redacting credentials in text: error messages, logs, transcripts and streamed
answers never carry API keys, and the ``no_secrets_in_output`` guardrail uses the same rules on
model answers. The rules are data (``secret_rules.toml`` beside this module, each following a
gitleaks or detect-secrets rule); :func:`rules` reads them, and every path here redacts with them.

One scanner serves whole texts and streams alike (:func:`redact` is a stream fed the whole text at
once), so a streamed answer redacts exactly as the whole answer would, wherever it was cut. The
scan is linear: each rule's own pattern is bounded, so the stream holds back at most the longest
credential start, and a credential's unbounded rest (its ``tail`` or ``until``) is consumed as it
arrives, never searched again.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from rosetta.errors import Problem

RULES_FILE = "secret_rules.toml"
CONTEXT = 8
"""Characters kept before the unsent text: a rule's lookbehind (``\\b``, ``(?<!...)``) sees them."""


@dataclass(frozen=True)
class Rule:
    """One credential shape of ``secret_rules.toml``."""

    id: str
    kind: str
    source: str
    regex: str
    tail: str | None = None
    until: str | None = None

    @property
    def label(self) -> str:
        return f"[redacted {self.kind}]"


@dataclass(frozen=True)
class _Compiled:
    """The rules compiled, plus what the stream needs to know of them."""

    rules: tuple[Rule, ...]
    each: tuple[Any, ...]  # regex.Pattern of each rule (one search per rule: each finds its literal start fast)
    tails: tuple[Any, ...]  # a run of the rule's tail units, or None
    untils: tuple[Any, ...]
    horizon: int  # longest rule match, plus the one character a rule may look past it
    until_horizon: int


def rules() -> tuple[Rule, ...]:
    """The credential rules, in the order they are tried."""
    return _compiled().rules


@cache
def _compiled() -> _Compiled:
    import re
    import tomllib
    from importlib import resources

    import regex

    data = tomllib.loads(resources.files("rosetta.runtime").joinpath(RULES_FILE).read_text(encoding="utf-8"))
    loaded = tuple(Rule(**entry) for entry in data["rules"])
    return _Compiled(
        rules=loaded,
        each=tuple(regex.compile(rule.regex) for rule in loaded),
        tails=tuple(regex.compile(f"(?:{rule.tail})*") if rule.tail else None for rule in loaded),
        untils=tuple(regex.compile(rule.until) if rule.until else None for rule in loaded),
        horizon=max(_max_width(re, rule.regex, rule.id) for rule in loaded) + 1,
        until_horizon=max([_max_width(re, rule.until, rule.id) for rule in loaded if rule.until] or [0]) + 1)


def _max_width(re: Any, pattern: str, rule: str) -> int:
    """The longest text ``pattern`` can match (the rules file promises a bound)."""
    width: int = re._parser.parse(pattern).getwidth()[1]  # re has no public API for this
    if width >= re._constants.MAXREPEAT:
        raise ValueError(f"{RULES_FILE}: rule {rule!r} can match unbounded text; bound every repetition "
                         "and put the credential's open-ended rest in `tail` or `until`")
    return width


def find_secrets(text: str) -> list[str]:
    """The kinds of credentials found in ``text``, in order of appearance (empty when none)."""
    stream = SecretStream()
    stream.flush_text(text)
    return stream.kinds


def redact(text: str) -> str:
    """``text`` with every credential replaced by ``[redacted <kind>]``."""
    return SecretStream().flush_text(text)


def strings(value: Any) -> Iterator[str]:
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


def find_secrets_in(value: Any) -> list[str]:
    """The kinds of credentials found in any string of JSON-like ``value``."""
    return list(dict.fromkeys(kind for text in strings(value) for kind in find_secrets(text)))


def redact_data(value: Any) -> Any:
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
        self._inside: int | None = None  # the rule whose credential is still going on
        self._after_label = False  # what was sent last is a label: `]` precedes the unsent text
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
        compiled, text, at, sent = _compiled(), self._text, self._at, []
        found: dict[int, Any] = {}  # each rule's next match in this text, from before `at`
        while True:
            if self._inside is not None:
                at, done = self._consume(compiled, text, at, final)
                if not done:
                    break
                self._inside, self._after_label = None, True
            hit = None
            if self._after_label:
                hit = _glued(compiled, text, at, final)
                if hit is _HOLD:
                    break
                self._after_label = False
            if hit is None:
                index, match = _next_match(compiled, text, at, found)
                if not final:
                    start = match.start() if match else len(text)
                    undecided = _first_undecided(compiled, text, at, start)
                    if undecided is not None or match is None or not _decided(compiled, text, index, match):
                        stop = undecided if undecided is not None else start
                        sent.append(text[at:stop])
                        at = stop
                        break
                elif match is None:
                    sent.append(text[at:])
                    at = len(text)
                    break
                hit = _span(index, match, 0)
            index, start, end, secret_start, secret_end = hit
            rule = compiled.rules[index]
            sent += [text[at:start], self._kept(text[start:secret_start]), rule.label,
                     self._kept(text[secret_end:end])]
            self.kinds += [rule.kind] if rule.kind not in self.kinds else []
            at = end
            if rule.tail or rule.until:
                self._inside = index
            else:
                self._after_label = secret_end == end
        keep = max(at - CONTEXT, 0)
        self._text, self._at = text[keep:], at - keep
        return "".join(sent)

    def _kept(self, part: str) -> str:
        """A part of a match kept beside its secret group (``postgres://USER:``), redacted on its
        own: the user of a URL can be a token too."""
        if not part:
            return part
        inner = SecretStream()
        clean = inner.flush_text(part)
        self.kinds += [kind for kind in inner.kinds if kind not in self.kinds]
        return clean

    def _consume(self, compiled: _Compiled, text: str, at: int, final: bool) -> tuple[int, bool]:
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


Span = tuple[int, int, int, int, int]
"""(rule, start, end, start and end of what is redacted)."""

_HOLD: Span = (-1, -1, -1, -1, -1)
"""What `_glued` answers while more text could still decide."""


def _span(index: int, match: Any, offset: int) -> Span:
    """(rule, start, end, start and end of what is redacted) of a rule's ``match``, ``offset`` on."""
    secret = "secret" if match.groupdict().get("secret") is not None else 0
    return (index, match.start() + offset, match.end() + offset, match.start(secret) + offset,
            match.end(secret) + offset)


def _glued(compiled: _Compiled, text: str, at: int, final: bool) -> Span | None:
    """A credential starting at ``at``, right after a label, as the text sent reads: there a `]`
    precedes it, so a key glued to the one just redacted (``...ab3sk-ant-...``) starts a word and
    is redacted too, never sent. ``_HOLD`` while more text could still decide it."""
    end = min(len(text), at + compiled.horizon + 1)
    open_end = not final and end == len(text)
    probe = "]" + text[at:end]  # a rule looks one character back (\b, (?<!...)): the `]` is all it sees
    for index, pattern in enumerate(compiled.each):
        match = pattern.match(probe, 1, partial=open_end)
        if match is None:
            continue
        if open_end and (match.partial or match.end() >= len(probe)):
            return _HOLD
        return _span(index, match, at - 1)
    return None


def _next_match(compiled: _Compiled, text: str, at: int, found: dict[int, Any]) -> tuple[int, Any]:
    """The first rule match from ``at`` (the earliest start; at the same start, the first rule),
    as (rule index, match). ``found`` keeps each rule's last answer: a match from an earlier place
    that starts at or after ``at`` is still that rule's first, so each rule scans the text once."""
    best, best_index = None, -1
    for index, pattern in enumerate(compiled.each):
        match = found.get(index, False)
        if match is False or (match is not None and match.start() < at):
            match = found[index] = pattern.search(text, at)
        if match is not None and (best is None or match.start() < best.start()):
            best, best_index = match, index
    return best_index, best


def _decided(compiled: _Compiled, text: str, index: int, match: Any) -> bool:
    """Whether more text cannot change ``match`` (of rule ``index``): a character past its end has
    been seen (a rule looks at most one character ahead), and no rule tried before it could still
    match there."""
    if match.end() >= len(text):
        return False
    return not any(earlier.match(text, match.start(), partial=True) for earlier in compiled.each[:index])


def _first_undecided(compiled: _Compiled, text: str, at: int, before: int) -> int | None:
    """The first place before ``before`` where more text could make a credential start, if any.

    Only the last ``horizon`` characters can be such places: a match starting earlier would
    already be whole. ``regex`` reports a partial match (one that reaches the end of the text) only
    when no whole match follows, so each search ends where the previous one found something, and a
    place it flags may be one more text rules out (it is held back a little longer, never sent
    too soon).
    """
    zone, first = max(at, len(text) - compiled.horizon), None
    for pattern in compiled.each:
        end = before if first is None else first
        while zone < end:
            found = pattern.search(text, zone, end, partial=True)
            if found is None or found.start() >= end:
                break
            first = found.start()
            if found.partial:
                break
            end = found.start()
    return first


# -- logs --------------------------------------------------------------------------------------

CALL_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm", "openai", "anthropic", "httpx", "httpcore")
"""Loggers of the libraries a model call goes through: at DEBUG they record request bodies (the
inputs) and raw responses. :func:`redacting_logs` redacts them while rosetta runs a call."""


def _redact_record(record: logging.LogRecord) -> None:
    """``record`` with its message (and formatted traceback) redacted; left as it is when clean, so
    handlers that group by template keep the template and arguments."""
    try:
        message = record.getMessage()
    except (TypeError, ValueError, KeyError):  # a malformed call: its parts, as the handler would show them
        message = f"{record.msg} {record.args}"
    clean = redact(message)
    if clean != message:
        record.msg, record.args = clean, ()
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact(record.exc_text)


ROSETTA_LOGGERS = ("rosetta", "rosetta.settings", "rosetta.local", "rosetta.local.llama_cpp", "rosetta.optimize",
                   "rosetta.providers.adapter", "rosetta.providers.catalog", "rosetta.runtime",
                   "rosetta.rollout.outcomes")
"""Every logger rosetta logs to (a test checks the source names no other)."""


def redact_logs() -> None:
    """Redact every record of rosetta's own loggers, at any level, before any handler sees it
    (installed once, when rosetta is imported): a :class:`RedactingFilter` on each of
    :data:`ROSETTA_LOGGERS`. A logger's filters see only the records logged on it, never its
    children's, hence one per logger. The process's record factory and the application's own
    loggers and handlers are left alone; :func:`redacting_logs` covers the call's libraries.
    """
    for name in ROSETTA_LOGGERS:
        logger = logging.getLogger(name)
        if _OWN not in logger.filters:
            logger.addFilter(_OWN)


class RedactingFilter(logging.Filter):
    """Redacts each record it sees (a filter may change the record it passes). On a handler it
    covers every record that handler writes, any library's, at any time: the one line for an
    application that logs litellm or httpx at DEBUG outside rosetta's calls too is
    ``handler.addFilter(RedactingFilter())``."""

    def filter(self, record: logging.LogRecord) -> bool:
        _redact_record(record)
        return True


PROVIDER_DEBUG_LOGS = "ROSETTA_PROVIDER_DEBUG_LOGS"
"""Set to 1 to keep the call's libraries' records below WARNING during rosetta's calls (each is
redacted on its own, so a key split across litellm's streamed deltas may appear in pieces)."""


class CallRecords(RedactingFilter):
    """On the call's libraries' loggers while rosetta's calls run: records at WARNING and above are
    redacted; those below are dropped unless the user sets :data:`PROVIDER_DEBUG_LOGS` to 1.
    litellm logs every streamed delta at DEBUG, one record each, so a key split across deltas is in
    no single record a rule could match; no per-record filter can redact what it never sees whole."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING and os.environ.get(PROVIDER_DEBUG_LOGS) != "1":
            return False
        return super().filter(record)


_FILTER = CallRecords()  # on the call's libraries' loggers, while calls run
_OWN = RedactingFilter()  # on rosetta's own loggers, always
_calls = 0  # calls running now, in every thread and event loop
_filtered: list[logging.Logger] = []
_lock = threading.Lock()


@contextmanager
def redacting_logs(names: tuple[str, ...] = CALL_LOGGERS) -> Iterator[None]:
    """While the block runs, redact the records of ``names`` and their children, whatever their
    level and handlers: every logger of theirs that exists when the block starts (one a library
    creates during the block, as httpcore does on its first request, is covered from the next on).

    A filter on each logger, attached when the first concurrent call starts and removed when the
    last one ends: no global state outside calls (:class:`RedactingFilter` on a handler covers
    them always).
    """
    global _calls
    with _lock:
        _calls += 1
        for logger in _loggers(names):  # looked up at every call: a library may add loggers later
            if _FILTER not in logger.filters:  # first: a library's own filter (litellm's) may redact a key's
                logger.filters.insert(0, _FILTER)  # name and leave its value, which no rule finds without it
                _filtered.append(logger)
    try:
        yield
    finally:
        with _lock:
            _calls -= 1
            if not _calls:
                for logger in _filtered:
                    logger.removeFilter(_FILTER)
                _filtered.clear()


def _loggers(names: tuple[str, ...]) -> list[logging.Logger]:
    children = tuple(f"{name}." for name in names)
    return [logger for name, logger in list(logging.Logger.manager.loggerDict.items())
            if (name in names or name.startswith(children)) and isinstance(logger, logging.Logger)]
