"""Log records without credentials: rosetta's own loggers always, and the loggers of the libraries
a model call goes through (litellm, openai, anthropic, httpx, httpcore) while rosetta runs a call.
At DEBUG those record request bodies and raw responses, and litellm logs each streamed delta on its
own, so a key split across deltas is in no record whole: below WARNING their records are dropped
during calls unless the user opts in.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from rosetta.runtime.secrets import redact

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
_raised: dict[logging.Logger, int] = {}  # the call libraries' top loggers raised to WARNING, and their own levels
_lock = threading.Lock()


@contextmanager
def redacting_logs(names: tuple[str, ...] = CALL_LOGGERS) -> Iterator[None]:
    """While the block runs, redact the records of ``names`` and their children, whatever their
    level and handlers: every logger of theirs that exists when the block starts gets the filter;
    one a library creates during the block (openai's and httpcore's, on a process's first request)
    inherits its top logger's level, raised to WARNING for the block unless the user keeps DEBUG
    records (:data:`PROVIDER_DEBUG_LOGS`), so its records below WARNING are dropped too.

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
        if os.environ.get(PROVIDER_DEBUG_LOGS) != "1":  # a logger created during the call (openai's, imported
            for name in names:  # on the first request) has no filter yet: its parent's level drops its DEBUG
                logger = logging.getLogger(name)
                if logger not in _raised and logger.getEffectiveLevel() < logging.WARNING:
                    _raised[logger] = logger.level
                    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        with _lock:
            _calls -= 1
            if not _calls:
                for logger in _filtered:
                    logger.removeFilter(_FILTER)
                _filtered.clear()
                for logger, level in _raised.items():
                    logger.setLevel(level)
                _raised.clear()


def _loggers(names: tuple[str, ...]) -> list[logging.Logger]:
    children = tuple(f"{name}." for name in names)
    return [logger for name, logger in list(logging.Logger.manager.loggerDict.items())
            if (name in names or name.startswith(children)) and isinstance(logger, logging.Logger)]
