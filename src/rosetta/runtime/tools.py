"""The tool loop's parts: which calls may run, running them, and the turns that send results back.

A model that calls the agent's tools gets their results and goes on until it answers
(:func:`rosetta.runtime.invoke.plan` drives the loop; this module holds what it needs). Only tools
the definition declares run, and only those ``capabilities.allowed_tools`` allows where it names
any; each call's arguments are validated against the tool's declared JSON Schema first. A refused
call, invalid arguments and a function that raises are all reported back to the model as that
call's result (it may recover), up to a bound of errors per run. Results travel in OpenAI's shape
(an assistant turn with ``tool_calls``, then one ``tool`` message per call), which litellm turns into
Anthropic's ``tool_result`` blocks and Gemini's function responses.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from rosetta.runtime.result import Result

T = TypeVar("T")

RESULT_CHARS = 100_000
"""The most of one tool result sent back to the model (a longer one is cut, saying so)."""


@dataclass(frozen=True)
class ToolCall:
    """One call the model made, and what came of it: ``result`` when its function ran, ``error``
    when it was refused, its arguments were invalid, or it raised (``None`` both: not run)."""

    id: str
    name: str
    arguments: Any
    result: Any = None
    error: str | None = None
    ran: bool = False

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.ran:
            found["result"] = self.result
        if self.error is not None:
            found["error"] = self.error
        return found

    def content(self) -> str:
        """What the model is sent as this call's result."""
        if self.error is not None:
            return f"error: {self.error}"
        text = self.result if isinstance(self.result, str) else json.dumps(self.result, ensure_ascii=False, default=str)
        if len(text) > RESULT_CHARS:
            text = text[:RESULT_CHARS] + f"\n[... {len(text) - RESULT_CHARS:,} characters left out]"
        return text


@dataclass(frozen=True)
class ToolBox:
    """The tools one run may call: the declared ones' schemas, the names allowed to run, and the
    caller's functions (none: the run ends where the model asks for tools, for the caller to answer)."""

    schemas: Mapping[str, dict[str, Any]]
    allowed: frozenset[str]
    functions: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    max_steps: int = 8
    max_errors: int = 3

    def check(self, call: ToolCall) -> ToolCall:
        """``call`` with an error when it may not run: a tool the definition does not declare, one
        ``allowed_tools`` leaves out, no function for it, or arguments its schema refuses."""
        from rosetta.runtime.answers import validate

        if call.name not in self.schemas:
            declared = ", ".join(sorted(self.schemas)) or "none"
            return replace(call, error=f"there is no tool {call.name!r}; the tools are: {declared}")
        if call.name not in self.allowed:
            return replace(call, error=f"the tool {call.name!r} is not allowed here")
        if call.name not in self.functions:
            return replace(call, error=f"the tool {call.name!r} is not available in this run")
        if not isinstance(call.arguments, dict):
            return replace(call, error="the arguments are not a JSON object")
        issues = validate(call.arguments, self.schemas[call.name])
        if issues:
            return replace(call, error="invalid arguments: " + "; ".join(f"{i.path}: {i.message}" for i in issues[:5]))
        return call


@dataclass(frozen=True)
class RunTools:
    """A step of an invocation plan: run these calls' functions (those without an error), several
    at once, each for at most ``timeout`` seconds (the call's timeout), and send back the calls with
    their results."""

    calls: tuple[ToolCall, ...]
    functions: Mapping[str, Callable[..., Any]]
    timeout: float | None = None

    def overran(self, call: ToolCall) -> ToolCall:
        """``call`` when its function has not returned in time: the model is told, the run goes on."""
        return replace(call, error=f"the tool did not return within {self.timeout:g} s (the call's timeout)", ran=True)


def run_tools(step: RunTools) -> list[ToolCall]:
    """:class:`RunTools` for a blocking run: the calls of one turn run concurrently in threads (an
    async function runs to completion in its thread's own event loop). A function still running at
    the timeout is left to finish in its thread; its call is answered with the timeout."""
    # by position, not id: a model may give two calls one id
    runnable = [(n, call) for n, call in enumerate(step.calls) if call.error is None]
    pool = ThreadPoolExecutor(max_workers=min(max(len(runnable), 1), 16), thread_name_prefix="rosetta-tool")
    try:
        futures = {n: pool.submit(_run, step.functions[call.name], call) for n, call in runnable}
        wait(futures.values(), timeout=step.timeout)
        done = {n: future.result() if future.done() else step.overran(call)
                for (n, call), future in zip(runnable, futures.values(), strict=True)}
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return [done.get(n, call) for n, call in enumerate(step.calls)]


async def arun_tools(step: RunTools) -> list[ToolCall]:
    """:class:`RunTools` for asyncio: async functions awaited together, blocking ones in threads;
    one still running at the timeout is cancelled (a thread is left to finish) and its call answered
    with the timeout."""
    async def bounded(call: ToolCall) -> ToolCall:
        try:
            return await asyncio.wait_for(_arun(step.functions[call.name], call), step.timeout)
        except TimeoutError:
            return step.overran(call)

    runnable = [(n, call) for n, call in enumerate(step.calls) if call.error is None]
    results = await asyncio.gather(*(bounded(call) for _, call in runnable))
    done = {n: ran for (n, _), ran in zip(runnable, results, strict=True)}
    return [done.get(n, call) for n, call in enumerate(step.calls)]


def _run(function: Callable[..., Any], call: ToolCall) -> ToolCall:
    try:
        value = function(**call.arguments)
        if inspect.isawaitable(value):
            value = asyncio.run(_awaited(value))
    except Exception as error:  # the model is told, and may call again
        return replace(call, error=_failure(error), ran=True)
    return replace(call, result=value, ran=True)


async def _arun(function: Callable[..., Any], call: ToolCall) -> ToolCall:
    try:
        if inspect.iscoroutinefunction(function):
            value = await function(**call.arguments)
        else:
            value = await asyncio.to_thread(function, **call.arguments)
            if inspect.isawaitable(value):
                value = await value
    except Exception as error:  # the model is told, and may call again
        return replace(call, error=_failure(error), ran=True)
    return replace(call, result=value, ran=True)


async def _awaited(value: Awaitable[T]) -> T:
    return await value


def _failure(error: Exception) -> str:
    from rosetta.runtime.secrets import redact

    return redact(f"the tool raised {type(error).__name__}: {error}")[:2000]


def file_reader(folder: str | os.PathLike[str], *, limit: int = 256 * 1024) -> Callable[[str], str]:
    """A ``read_file(path)`` tool confined to ``folder``: ``path`` is relative to it and must stay in
    it — no ``..`` out, no absolute path, no symlink on the way, a plain file of at most ``limit``
    bytes — and the file's UTF-8 text comes back (undecodable bytes replaced). A path it refuses
    raises, and the loop reports that to the model as the call's error. For agents that read the
    code or documents they work on (the bundled code-reviewer declares it)."""
    from rosetta.fileio import read_regular_bytes, trusted_path

    root = Path(os.path.abspath(folder))
    if not root.is_dir():
        raise NotADirectoryError(f"{root} is not a folder")

    def read_file(path: str) -> str:
        relative = Path(path)
        if relative.is_absolute() or ".." in relative.parts:
            raise PermissionError(f"{path} is not a path inside the folder under review (relative, no '..')")
        found = trusted_path(root / relative, root)  # refuses a symlink at any level, and anything but a file
        if not found.exists():
            raise FileNotFoundError(f"no file {path}")
        return read_regular_bytes(found, limit=limit).decode("utf-8", errors="replace")

    return read_file


def assistant_turn(content: str | None, calls: list[ToolCall]) -> dict[str, Any]:
    """The model's turn that asked for ``calls``, as the next request repeats it."""
    return {"role": "assistant", "content": content or None, "tool_calls": [
        {"id": call.id, "type": "function",
         "function": {"name": call.name, "arguments": call.arguments if isinstance(call.arguments, str)
                      else json.dumps(call.arguments, ensure_ascii=False)}} for call in calls]}


def result_turns(calls: list[ToolCall]) -> list[dict[str, Any]]:
    """One ``tool`` message per call, in the order the model made them."""
    return [{"role": "tool", "tool_call_id": call.id, "content": call.content()} for call in calls]


def pending_calls(result: Result[Any]) -> list[dict[str, Any]]:
    """The calls a run that ended asking for tools (``Result.wants_tools``) waits on: those of its
    last response, none of which ran."""
    if not result.wants_tools:
        return []
    pending = []
    for call in reversed(result.tool_calls):
        if "result" in call or "error" in call:
            break
        pending.append(call)
    return pending[::-1]


def manual_hint(names: list[str]) -> str:
    """What the person pasting a prompt with tools into a chat is told (manual mode)."""
    return (f"this agent declares tools ({', '.join(names)}): when the model replies CALL <tool> <arguments>, run "
            "that tool yourself and paste RESULT <tool>: <its result> back into the chat; give rosetta only the "
            "final answer")
