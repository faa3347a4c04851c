"""Driving a plan (see :func:`rosetta.runtime.invoke.plan`): its calls made blocking, awaited or
streamed, each inside its endpoint's gate and a ``rosetta.llm_call`` span, and its waits slept.
One plan, three drivers, so a run, an async run and a stream send the same requests."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator
from contextlib import nullcontext
from typing import Any

from rosetta.runtime.invoke import Call, Wait, classify, response_cost
from rosetta.runtime.tracing import annotate, span, usage_attributes

log = logging.getLogger("rosetta.runtime")

Steps = Generator[Call | Wait, Any, Any]
"""A plan (or a chain of plans over several models): Call and Wait steps, then a return value."""


def drive(steps: Steps, *, complete: Callable[..., Any], sleep: Callable[[float], None] = time.sleep) -> Any:
    """Run ``steps`` with blocking calls and sleeps; return what the plan returns."""
    silent = drive_streaming(steps, complete=complete, sleep=sleep, stream=False)
    try:
        while True:
            next(silent)  # yields no text when nothing streams
    except StopIteration as done:
        return done.value


async def adrive(steps: Steps, *, acomplete: Callable[..., Any]) -> Any:
    """:func:`drive` for asyncio."""
    import asyncio

    reply: Any = None
    try:
        while True:
            step = steps.send(reply)
            if isinstance(step, Wait):
                await asyncio.sleep(step.seconds)
                reply = None
                continue
            async with step.gate or nullcontext():  # queueing for a slot costs none of the call's timeout
                with span("rosetta.llm_call", **_call_attributes(step)) as current:
                    try:
                        reply = await acomplete(**step.kwargs)
                    except Exception as error:  # litellm raises many classes; classify() sorts them
                        reply = error
                    _annotate_call(current, reply)
    except StopIteration as done:
        return done.value


def drive_streaming(steps: Steps, *, complete: Callable[..., Any], sleep: Callable[[float], None] = time.sleep,
                    stream: bool = True) -> Generator[str, None, Any]:
    """:func:`drive`, streaming the first call: yields its text as it arrives (the same request a
    plain run sends, plus ``stream``), then sends the assembled response back into the plan like
    any other; later calls (retries, corrections, fallbacks) are plain. Returns the plan's value."""
    reply: Any = None
    pending = stream  # the first call is still to stream
    try:
        while True:
            step = steps.send(reply)
            if isinstance(step, Wait):
                sleep(step.seconds)
                reply = None
                continue
            marks = {"rosetta.stream": pending} if stream else {}
            with step.gate or nullcontext(), span("rosetta.llm_call", **_call_attributes(step), **marks) as current:
                if pending:  # the slot stays held until the stream ends
                    pending = False
                    reply = yield from _streamed_reply(complete, step)
                else:
                    reply = _reply(complete, step)
                _annotate_call(current, reply)
    except StopIteration as done:
        return done.value


def _reply(complete: Callable[..., Any], step: Call) -> Any:
    try:
        return complete(**step.kwargs)
    except Exception as error:  # litellm raises many classes; classify() sorts them
        return error


def _streamed_reply(complete: Callable[..., Any], step: Call) -> Generator[str, None, Any]:
    """The streamed call's text deltas, then litellm's response assembled from its chunks."""
    from rosetta.providers.litellm_offline import import_litellm

    chunks, stream, ended = [], None, False
    try:
        stream = complete(**{**step.kwargs, "stream": True})
        for chunk in stream:
            chunks.append(chunk)
            text = getattr(chunk.choices[0].delta, "content", None) if chunk.choices else None
            if text:
                yield text
        ended = True
        return import_litellm().stream_chunk_builder(chunks, messages=step.kwargs.get("messages"))
    except Exception as error:  # classified like any call; the plan retries
        ended = True
        return error
    finally:  # also when the caller stops reading early (GeneratorExit): then the rest is not read
        _release_stream(stream, read_rest=ended)


def _release_stream(stream: Any, *, read_rest: bool) -> None:
    """Release a stream's HTTP response. litellm's Anthropic reader stops at the stop reason and
    leaves the last lines of the body unread, so the response stays open until the garbage
    collector finds it, and a collection that runs while this thread holds the connection pool's
    lock (during the next request) deadlocks. Reading the rest of the lines (the closing event,
    then the end of the body) lets httpx close the response as it does for any body read whole;
    a stream its reader abandoned is closed unread instead (httpcore drops the connection)."""
    lines = getattr(getattr(stream, "completion_stream", None), "streaming_response", None)
    if lines is None or not hasattr(lines, "__next__"):
        return
    try:
        if read_rest:
            for _ in lines:
                pass
        else:
            lines.close()
    except Exception as error:  # noqa: BLE001 (best effort: the answer, or the error, is already in hand)
        log.debug("releasing a stream failed: %s", error)




def _call_attributes(step: Call) -> dict[str, Any]:
    return {"gen_ai.system": str(step.kwargs.get("model", "")).split("/", 1)[0],
            "gen_ai.request.model": step.kwargs.get("model"), "rosetta.attempt": step.attempt,
            "rosetta.artifact_id": step.artifact}


def _annotate_call(current: Any, reply: Any) -> None:
    if current is None:
        return
    if isinstance(reply, BaseException):
        annotate(current, **{"rosetta.outcome": classify(reply), "error.type": type(reply).__name__})
        return
    annotate(current, **{"rosetta.outcome": "ok", **usage_attributes(getattr(reply, "usage", None) or {},
                                                                     response_cost(reply))})
