"""Driving a plan (see :func:`rosetta.runtime.invoke.plan`): its calls made blocking, awaited or
streamed, each inside its endpoint's gate and a ``rosetta.llm_call`` span, and its waits slept.
One plan, three drivers, so a run, an async run and a stream send the same requests."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Callable, Generator
from typing import TYPE_CHECKING, Any, TypeVar

from rosetta.runtime.invoke import Call, Wait, classify
from rosetta.runtime.usage import response_cost
from rosetta.runtime.limits import GateTimeout
from rosetta.runtime.stream import Finished
from rosetta.runtime.tools import RunTools, arun_tools, run_tools
from rosetta.runtime.tracing import annotate, span, usage_attributes

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from rosetta.runtime.salvage import AComplete, Complete

log = logging.getLogger("rosetta.runtime")

T = TypeVar("T")

Steps = Generator[Call | Wait | RunTools, Any, T]
"""A plan (or a chain of plans over several models): Call, Wait and RunTools steps, then a return value."""


def drive(steps: Steps[T], *, complete: Complete, sleep: Callable[[float], None] = time.sleep) -> T:
    """Run ``steps`` with blocking calls and sleeps; return what the plan returns."""
    silent = drive_streaming(steps, complete=complete, sleep=sleep, stream=False)
    try:
        while True:
            next(silent)  # yields no text when nothing streams
    except StopIteration as done:
        value: T = done.value
        return value
    finally:
        silent.close()  # interrupted (Ctrl-C): end the plan here, not when the collector finds it


async def adrive(steps: Steps[T], *, acomplete: AComplete) -> T:
    """:func:`drive` for asyncio. A cancelled run closes its plan at once, in its own task, so the
    run's span ends (and its context is detached) where it began, not in whatever context the
    garbage collector later runs in."""
    silent = adrive_streaming(steps, acomplete=acomplete, stream=False)
    try:
        async for item in silent:
            if isinstance(item, Finished):
                value: T = item.value
                return value
    finally:
        await silent.aclose()
    raise AssertionError("a plan's driver ends with Finished")


def drive_streaming(steps: Steps[T], *, complete: Complete, sleep: Callable[[float], None] = time.sleep,
                    stream: bool = True) -> Generator[str, None, T]:
    """:func:`drive`, streaming the first call: yields its text as it arrives (the same request a
    plain run sends, plus ``stream``), then sends the assembled response back into the plan like
    any other; the call after each round of tool results streams too (the model's next turn), other
    later calls (retries, corrections, fallbacks) are plain. Returns the plan's value.

    A reader that stops early closes this generator (``break`` drops it; ``close()`` says so
    explicitly): the stream's response is closed then and there, its slot freed and the plan ended."""
    reply: Any = None
    pending = stream  # the first call is still to stream
    try:
        while True:
            step = steps.send(reply)
            if isinstance(step, Wait):
                sleep(step.seconds)
                reply = None
                continue
            if isinstance(step, RunTools):
                with span("rosetta.tools", **{"rosetta.tool_calls": len(step.calls)}):
                    reply = run_tools(step)
                pending = stream  # the model's next turn streams as its first did
                continue
            try:
                if step.gate is not None:
                    step.gate.acquire(step.queue_timeout)
            except GateTimeout as error:  # nothing was sent: the plan decides what comes next
                reply = error
                continue
            try:
                marks = {"rosetta.stream": pending} if stream else {}
                with span("rosetta.llm_call", **_call_attributes(step), **marks) as current, step.out():
                    if pending:  # the slot stays held until the stream ends
                        pending = False
                        reply = yield from _streamed_reply(complete, step)
                    else:
                        reply = _reply(complete, step)
                    _annotate_call(current, reply)
            finally:
                if step.gate is not None:
                    step.gate.release()
    except StopIteration as done:
        value: T = done.value
        return value
    finally:
        steps.close()  # a no-op once the plan returned or raised


async def adrive_streaming(steps: Steps[Any], *, acomplete: AComplete,
                           stream: bool = True) -> AsyncGenerator[str | Finished, None]:
    """:func:`drive_streaming` for asyncio: yields the first call's text as it arrives, then one
    :class:`~rosetta.runtime.stream.Finished` holding the plan's value."""
    import asyncio

    reply: Any = None
    pending = stream
    try:
        while True:
            try:
                step = steps.send(reply)
            except StopIteration as done:
                yield Finished(done.value)
                return
            if isinstance(step, Wait):
                await asyncio.sleep(step.seconds)
                reply = None
                continue
            if isinstance(step, RunTools):
                with span("rosetta.tools", **{"rosetta.tool_calls": len(step.calls)}):
                    reply = await arun_tools(step)
                pending = stream  # the model's next turn streams as its first did
                continue
            try:  # queueing for a slot costs none of the call's timeout
                if step.gate is not None:
                    await step.gate.acquire_async(step.queue_timeout)
            except GateTimeout as error:  # nothing was sent: the plan decides what comes next
                reply = error
                continue
            try:
                marks = {"rosetta.stream": pending} if stream else {}
                with span("rosetta.llm_call", **_call_attributes(step), **marks) as current, step.out():
                    if pending:  # the slot stays held until the stream ends
                        pending = False
                        collected: list[Any] = []
                        async for text in _astreamed_reply(acomplete, step, collected):
                            yield text
                        reply = collected[0]
                    else:
                        try:
                            reply = await acomplete(**step.kwargs)
                        except Exception as error:  # litellm raises many classes; classify() sorts them
                            reply = error
                    _annotate_call(current, reply)
            finally:
                if step.gate is not None:
                    step.gate.release()
    finally:
        steps.close()  # a no-op once the plan returned or raised


def _reply(complete: Complete, step: Call) -> object:
    try:
        return complete(**step.kwargs)
    except Exception as error:  # litellm raises many classes; classify() sorts them
        return error


def _streamed_reply(complete: Complete, step: Call) -> Generator[str, None, Any]:
    """The streamed call's text deltas, then litellm's response assembled from its chunks (None
    when there were none: the plan takes that as an empty response)."""
    from rosetta.local.litellm_offline import import_litellm

    chunks, stream, finished = [], None, False
    try:
        stream = complete(**{**step.kwargs, "stream": True})
        for chunk in stream:
            chunks.append(chunk)
            text = getattr(chunk.choices[0].delta, "content", None) if chunk.choices else None
            if text:
                yield text
        finished = True
        return import_litellm().stream_chunk_builder(chunks, messages=step.kwargs.get("messages"))
    except Exception as error:  # classified like any call; the plan retries
        return error
    finally:  # also when the reader stops early (GeneratorExit): then the rest is not read
        _close_stream(stream, finished=finished)


async def _astreamed_reply(acomplete: AComplete, step: Call,
                           collected: list[Any]) -> AsyncGenerator[str, None]:
    """:func:`_streamed_reply` for asyncio: yields the text deltas, and leaves the assembled
    response (or the error) in ``collected``."""
    from rosetta.local.litellm_offline import import_litellm

    chunks, stream, finished = [], None, False
    try:
        stream = await acomplete(**{**step.kwargs, "stream": True})
        async for chunk in stream:
            chunks.append(chunk)
            text = getattr(chunk.choices[0].delta, "content", None) if chunk.choices else None
            if text:
                yield text
        finished = True
        collected.append(import_litellm().stream_chunk_builder(chunks, messages=step.kwargs.get("messages")))
    except Exception as error:  # classified like any call; the plan retries
        collected.append(error)
    finally:  # also when the reader stops early: then the rest is not read
        await _aclose_stream(stream, finished=finished)


async def _aclose_stream(stream: object, *, finished: bool) -> None:
    """:func:`_close_stream` for an asynchronous stream: the same parts, closed by awaiting their
    ``aclose()`` or ``close()`` (OpenAI's ``AsyncStream.close`` is a coroutine)."""
    import inspect

    inner = getattr(stream, "completion_stream", None)
    lines = getattr(inner, "streaming_response", None)
    try:
        if finished and lines is not None and hasattr(lines, "__anext__"):
            async for _ in lines:
                pass
        for part in (lines, inner):
            close = getattr(part, "aclose", None) or getattr(part, "close", None)
            if callable(close):
                closing = close()
                if inspect.isawaitable(closing):
                    await closing
    except Exception as error:  # noqa: BLE001 (best effort: the answer, or the error, is already in hand)
        log.debug("closing a stream failed: %s", error)


def _close_stream(stream: object, *, finished: bool) -> None:
    """Close a stream's HTTP response (or the embedded model's generation) now, whichever way the
    stream ended: finished, failed, or abandoned by its reader.

    Left open, a response keeps its socket and pooled connection until the garbage collector finds
    it, and a collection that runs while this thread holds the connection pool's lock (inside the
    next request) deadlocks on that lock. litellm wraps each provider's stream differently: OpenAI's
    ``openai.Stream`` (``close()`` closes its response), the Anthropic reader's line iterator over
    the response (closing it closes the body), the embedded model's generator (closing it stops the
    generation). A finished Anthropic stream has its last lines read first (its reader stops at the
    stop reason), so httpx ends the body normally and the connection is kept for the next call; an
    unfinished one is closed unread, and httpcore drops its connection."""
    inner = getattr(stream, "completion_stream", None)
    lines = getattr(inner, "streaming_response", None)
    try:
        if finished and lines is not None and hasattr(lines, "__next__"):
            for _ in lines:
                pass
        for part in (lines, inner):
            close = getattr(part, "close", None)
            if callable(close):
                close()
    except Exception as error:  # noqa: BLE001 (best effort: the answer, or the error, is already in hand)
        log.debug("closing a stream failed: %s", error)


def _call_attributes(step: Call) -> dict[str, Any]:
    return {"gen_ai.system": str(step.kwargs.get("model", "")).split("/", 1)[0],
            "gen_ai.request.model": step.kwargs.get("model"), "rosetta.attempt": step.attempt,
            "rosetta.artifact_id": step.artifact}


def _annotate_call(current: Span | None, reply: object) -> None:
    if current is None:
        return
    if isinstance(reply, BaseException):
        annotate(current, **{"rosetta.outcome": classify(reply), "error.type": type(reply).__name__})
        return
    annotate(current, **{"rosetta.outcome": "ok", **usage_attributes(getattr(reply, "usage", None) or {},
                                                                     response_cost(reply))})
