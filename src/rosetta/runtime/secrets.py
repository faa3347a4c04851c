"""Finding and redacting credentials in text: error messages, logs, transcripts and streamed
answers never carry API keys, and the ``no_secrets_in_output`` guardrail uses the same patterns on
model answers. :data:`SECRET_PATTERNS` is the one table every path reads."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import replace
from functools import cache
from typing import Any

from rosetta.errors import Problem

SECRET_PATTERNS: dict[str, re.Pattern[str]] = {
    "private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"),
    "anthropic key": re.compile(r"\bsk-ant-[A-Za-z0-9_-]{16,}"),
    "openai key": re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{16,}"),
    "google api key": re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"),
    "aws access key": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "github token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    "slack token": re.compile(r"\bxox[abpors]-[A-Za-z0-9-]{10,}"),
    "jwt": re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    "bearer token": re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{16,}"),
}
"""Credential shapes, most specific first (an Anthropic key is also an ``sk-`` key)."""


def find_secrets(text: str) -> list[str]:
    """The kinds of credentials found in ``text`` (empty when none)."""
    return [kind for kind, pattern in SECRET_PATTERNS.items() if pattern.search(text)]


def redact(text: str) -> str:
    """``text`` with every credential replaced by ``[redacted <kind>]``."""
    for kind, pattern in SECRET_PATTERNS.items():
        text = pattern.sub(f"[redacted {kind}]", text)
    return text


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

    Held back is only the text from the first place where a pattern matches, or could still match
    with more text (partial matching on :data:`SECRET_PATTERNS`), to the end: usually nothing or a
    few characters; a private key until its END line (or the end of the stream).
    """

    def __init__(self) -> None:
        self._held = ""

    def feed(self, text: str) -> str:
        """The redacted text that can be sent now."""
        self._held += text
        return self._send(_settled(self._held))

    def flush(self) -> str:
        """The rest, redacted, once the stream has ended."""
        return self._send(len(self._held))

    def _send(self, end: int) -> str:
        text, self._held = self._held[:end], self._held[end:]
        return redact(text)


_WORD = re.compile(r"\w")


def _settled(text: str) -> int:
    """How much of ``text`` more text cannot change the redaction of.

    The cut goes before any match (complete or partial) that reaches the end, and before any match
    overlapping one; and only after a non-word character, where a pattern's ``\\b`` sees what it
    sees at the start of a text, so the two sides redact apart as they would together. Matches
    are looked for at every start, inside other matches too: redacting one kind first can leave
    a key of a later kind that began inside a longer match.
    """
    spans = [m.span() for pattern in _partial_patterns()
             for m in pattern.finditer(text, partial=True, overlapped=True)]
    cut = min((start for start, end in spans if end >= len(text) - 1), default=len(text))  # `$` may stop before "\n"
    while True:
        start = min((start for start, end in spans if start < cut <= end), default=cut)
        while start > 0 and _WORD.match(text[start - 1]):
            start -= 1
        if start == cut:
            return cut
        cut = start


@cache
def _partial_patterns() -> list[Any]:
    """:data:`SECRET_PATTERNS` compiled by ``regex``, which can tell a prefix of a match (``re`` cannot)."""
    import regex

    return [regex.compile(pattern.pattern) for pattern in SECRET_PATTERNS.values()]


def redact_logs() -> None:
    """Redact every log record of the ``rosetta`` logger and its children, at any level, before any
    filter or handler sees it (installed once, when rosetta is imported).

    A record factory rather than a filter on ``rosetta``: a logger's filters never see the records
    of its children. Records with no credential in them are left as they are (message template and
    arguments kept, for handlers that group by template).
    """
    previous = logging.getLogRecordFactory()
    if getattr(previous, "redacts_rosetta", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if record.name == "rosetta" or record.name.startswith("rosetta."):
            try:
                message = record.getMessage()
            except (TypeError, ValueError, KeyError):  # a malformed call: its parts, as the handler would show them
                message = f"{record.msg} {record.args}"
            clean = redact(message)
            if clean != message:
                record.msg, record.args = clean, ()
        return record

    factory.redacts_rosetta = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)
