"""OpenTelemetry spans for runs and model calls, when ``opentelemetry-api`` is installed.

Without it nothing is imported and :func:`span` costs one dict lookup. With it, spans go to
whatever tracer provider the application configured (none configured: OpenTelemetry's no-op).
Attribute names follow the GenAI semantic conventions where one exists, ``rosetta.*`` otherwise.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

_tracer: list[Tracer | None] = []  # [] until looked up, then [tracer or None]


def _get_tracer() -> Tracer | None:
    if not _tracer:
        try:
            present = importlib.util.find_spec("opentelemetry.trace") is not None
        except (ImportError, ValueError):
            present = False
        if present:
            from opentelemetry import trace

            from rosetta.__about__ import __version__

            _tracer.append(trace.get_tracer("rosetta", __version__))
        else:
            _tracer.append(None)
    return _tracer[0]


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[Span | None]:
    """A span named ``name``, current while the block runs (``None`` without OpenTelemetry or when
    nothing records it); ``None`` attributes are left out.

    An exception leaving the block is recorded on the span and marks it as an error. A block in a
    generator a stream's reader abandoned (``async for ... break`` without ``aclose``) ends where
    the generator is finalized, often another task: the span ends there, and the context it made
    current is left to the task that attached it (detaching it elsewhere fails, and OpenTelemetry
    logs that at ERROR).
    """
    tracer = _get_tracer()
    if tracer is None:
        yield None
        return
    from opentelemetry import context, trace

    current = tracer.start_span(name, attributes=_clean(attributes))
    token = context.attach(trace.set_span_in_context(current))
    owner = _owner()
    try:
        yield current if current.is_recording() else None  # no SDK configured: skip the attribute work
    except BaseException as error:
        if current.is_recording():
            current.record_exception(error)
            current.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        raise
    finally:
        if _owner() == owner:
            context.detach(token)
        current.end()


def _owner() -> tuple[int, int | None]:
    """The thread, and the asyncio task if any, that code runs in: a context attached in one is
    detached in the same one."""
    import asyncio
    import threading

    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running event loop
        task = None
    return threading.get_ident(), None if task is None else id(task)


def annotate(current: Span | None, **attributes: Any) -> None:
    """Add attributes known only after the work (tokens, cost, outcome) to a span from :func:`span`."""
    if current is not None:
        current.set_attributes(_clean(attributes))


def usage_attributes(usage: object, cost: float | None) -> dict[str, Any]:
    """Token counts and cost in the attribute names the GenAI conventions use."""
    def get(key: str) -> object:
        return usage.get(key) if isinstance(usage, dict) else getattr(usage, key, None)

    return {"gen_ai.usage.input_tokens": get("prompt_tokens"), "gen_ai.usage.output_tokens": get("completion_tokens"),
            "rosetta.cost_usd": cost}


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if isinstance(v, (str, bool, int, float))}
