"""Calling one model with one rendered prompt: transient-error retries with backoff, answer
validation with one corrective retry (more for open models), and a :class:`Result` that records
every attempt.

The retry policy is ours, not litellm's: ``num_retries`` would retry 400s and 401s with no wait,
and the OpenAI SDK's own retries would stack on top, so both are switched off per call. What a
failure means (retried, moved past, or the end of the run) is data: the ``errors`` table of
``providers/runtime_policy.yaml``, read by :func:`classify`.
"""

from __future__ import annotations

import email.utils
import errno
import logging
import math
import time
from collections.abc import Generator, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import timezone
from typing import TYPE_CHECKING, Any

from rosetta.errors import Problem

if TYPE_CHECKING:
    from pydantic import BaseModel
from rosetta.providers.credentials import MissingCredentials, check_credentials, missing_credentials
from rosetta.providers.policy import ErrorKind, ErrorKinds
from rosetta.render.prompt import RenderedPrompt
from rosetta.runtime.answers import (
    MAX_ISSUES,
    Answer,
    Issue,
    answer_text,
    answered_in_tool,
    correction_message,
    quoted_answer,
    read_answer,
    tool_calls,
)
from rosetta.runtime.health import ProviderHealth
from rosetta.runtime.limits import Gate, RateLimiter, credential_key
from rosetta.runtime.salvage import note
from rosetta.runtime.result import Attempt, ModelCallError, Outcome, Result, RetryPolicy
from rosetta.runtime.secrets import redact
from rosetta.runtime.tools import RunTools, ToolBox, ToolCall, assistant_turn, result_turns
from rosetta.runtime.usage import add_usage, response_cost

log = logging.getLogger("rosetta.runtime")

LOCAL_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.EADDRNOTAVAIL, errno.ENOBUFS, errno.ENOMEM})
"""OS errors in the cause chain that are this machine out of file descriptors, ports or buffers (the
classes that say the same, ``errors.causes.local`` of ``providers/runtime_policy.yaml``, are data)."""


class EmptyResponse(Exception):
    """A provider's success status without an answer: no choices, a choice with no message, or a
    message with no text and no tool call (streamed or whole). The provider failed to answer, as
    with a 5xx: transient, so the call is retried, counted against the endpoint's health, and the
    chain moves on once the retries are spent."""


class Refusal(Exception):
    """The model declined to answer (the message's ``refusal``): not retried on the same model,
    the next model of the chain is tried (kind ``refused``)."""


class ContentFiltered(Exception):
    """The provider's content filter withheld the answer (``finish_reason: content_filter``): a
    content-policy outcome, like a ContentPolicyViolationError (kind ``hard``: the run ends)."""


def classify(error: BaseException) -> ErrorKind:
    """``transient``, ``local``, ``denied``, ``credentials``, ``hard``, ``context`` or ``busy`` for an
    exception a completion call raised (or a driver sent back), as the ``errors`` table of
    ``providers/runtime_policy.yaml`` says: from the cause chain first (what the SDK raised under
    litellm's wrapper), then by HTTP status where the error has one, else by class.

    ``transient`` is the provider failing (429, 5xx, a read timeout or a dropped connection once the
    request was sent, a 200 with no answer): retried, and counted by the health breaker. ``local``
    is this process out of connections: retried after a backoff, never held against the endpoint.
    ``denied`` (401, 402, 403, 404) belongs to one endpoint's key or model, and ``credentials`` to
    a provider this environment has no key for: neither is retried, the next model is tried;
    ``hard`` (any other 4xx) ends the run.
    """
    from rosetta.providers.policy import error_kinds

    kinds = error_kinds()
    kind = _cause_kind(error, kinds)
    if kind is not None:
        return kind
    names = [cls.__name__ for cls in type(error).__mro__]  # most specific first
    status = _status(error)
    if status is not None and kinds.before_status.isdisjoint(names):
        kind = kinds.by_status(status)
        if kind is not None:
            return kind
    kind = next((kinds.classes[name] for name in names if name in kinds.classes), None)
    if kind is not None:
        return kind
    return ErrorKind.TRANSIENT if isinstance(error, (TimeoutError, ConnectionError)) else ErrorKind.HARD


def _status(error: BaseException) -> int | None:
    """The HTTP status the provider answered with, when the error carries one."""
    status = getattr(error, "status_code", None)
    if status is None:
        status = getattr(getattr(error, "response", None), "status_code", None)
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def _cause_kind(error: BaseException, kinds: ErrorKinds) -> ErrorKind | None:
    """The kind of the first link of the chain a traceback shows (litellm re-raises inside
    ``except``, so its links are implicit contexts) that ``kinds.causes`` names, or that is an OS
    error in :data:`LOCAL_ERRNOS` (``local``); None when no link is."""
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        kind = kinds.of_link(link)
        if kind is None and isinstance(link, OSError) and link.errno in LOCAL_ERRNOS:
            kind = ErrorKind.LOCAL
        if kind is not None:
            return kind
        link = link.__cause__ if link.__cause__ is not None else (
            None if link.__suppress_context__ else link.__context__)
    return None


def retry_after(error: BaseException, now: float | None = None) -> float | None:
    """The server's ``Retry-After`` in seconds (a number of seconds, or an HTTP date, then counted
    from ``now``, a Unix time), when it sent one that reads as either."""
    headers = getattr(error, "litellm_response_headers", None) or getattr(
        getattr(error, "response", None), "headers", None) or {}
    value = headers.get("retry-after") if hasattr(headers, "get") else None
    if not isinstance(value, str | int | float):
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(str(value))
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # "-0000": UTC, the only zone HTTP dates use
            when = when.replace(tzinfo=timezone.utc)
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(seconds, 0.0) if math.isfinite(seconds) else None


@dataclass(frozen=True)
class Call:
    """A step of an invocation plan: make this completion call (attempt ``attempt`` on its model)."""

    kwargs: dict[str, Any]
    attempt: int = 1
    artifact: str = ""
    gate: Gate | None = None  # the endpoint's in-flight bound: the driver holds a slot while the request is out
    queue_timeout: float | None = None  # longest wait for that slot; then the driver sends back GateTimeout
    health: ProviderHealth | None = None  # told while the request is out (a call still out has not failed)
    endpoint: str = ""

    def out(self) -> AbstractContextManager[None]:
        """What the driver holds while the request is out (sent, its response not yet back)."""
        return self.health.sending(self.endpoint) if self.health is not None else nullcontext()


@dataclass(frozen=True)
class Wait:
    """A step of an invocation plan: wait this long before the next call."""

    seconds: float


def plan(
    prompt: RenderedPrompt,
    inputs: Mapping[str, Any],
    *,
    artifact: str,
    policy: RetryPolicy = RetryPolicy(),
    validation_retries: int = 1,
    retry_temperature: float = 0.2,
    output_model: type | None = None,
    params: Mapping[str, Any] | None = None,
    messages: list[dict[str, Any]] | None = None,
    limiter: RateLimiter | None = None,
    health: ProviderHealth | None = None,
    toolbox: ToolBox | None = None,
) -> Generator[Call | Wait | RunTools, Any, Result[Any]]:
    """The retry logic, free of network I/O: yields :class:`Call` (send back the response, or the
    exception it raised) and :class:`Wait` steps, and returns the :class:`Result`; the drivers of
    :mod:`rosetta.runtime.drive` make its calls blocking, awaited or streamed, so all behave alike.

    ``messages`` replaces the rendered turn (a conversation's history plus its new user turn);
    ``limiter`` paces calls per API key and ``health`` stops calling an endpoint that cools down.
    A provider this environment has no key for ends the plan before any call or wait.

    Each response (:func:`_respond`: transient errors retried inside) is one of three things: a
    request for the agent's tools — with ``toolbox`` functions, a :class:`RunTools` step runs them
    and their results go back for another response (at most ``toolbox.max_steps`` rounds); without,
    the run ends there (attempt outcome ``tool_calls``) for the caller to answer —, a valid answer,
    or an invalid one, corrected up to ``validation_retries`` times.
    """
    kwargs = prompt.to_litellm(inputs, messages=messages)
    kwargs.update(params or {})
    kwargs.update(num_retries=0, max_retries=0, timeout=policy.timeout)
    refused = missing_credentials(kwargs)
    if refused is not None:  # nothing to send: no request, no retry, no wait, no health record
        kind = classify(refused)
        raise ModelCallError(Problem(f"{prompt.model}: {refused.problems[0].message}", field="model", hint=refused.hint),
                             [Attempt(prompt.model, Outcome(kind), _safe_message(refused), 0.0)], kind, refused.variables)
    endpoint = credential_key(kwargs)
    prompt_tokens = prompt.tokens.get("total", 0) if messages is None else _estimate_tokens(messages)
    attempts: list[Attempt] = []
    usage: dict[str, int] = {}
    cost = 0.0
    started = time.monotonic()
    called: list[dict[str, Any]] = []  # the agent's own tool calls, over every attempt
    corrections = tool_steps = tool_errors = 0
    exchanged: list[dict[str, Any]] = []  # the tool turns, as sent: a conversation's history keeps them
    while True:
        outcome = yield from _respond(prompt, kwargs, artifact=artifact, policy=policy, attempts=attempts,
                                      limiter=limiter, health=health, endpoint=endpoint, prompt_tokens=prompt_tokens)
        add_usage(usage, outcome)
        cost += response_cost(outcome)
        reply = outcome.choices[0].message
        asked = [ToolCall(**call) for call in tool_calls(reply)]
        answer = read_answer(answer_text(reply, prompt), prompt)
        requested = bool(asked) and not answered_in_tool(reply, prompt)  # the agent's tools, not the answer's
        if requested and toolbox is not None and toolbox.functions:
            tool_steps += 1
            if tool_steps > toolbox.max_steps:
                rounds = f"{toolbox.max_steps} round{'s' if toolbox.max_steps != 1 else ''}"
                raise ModelCallError(Problem(f"{prompt.model}: still calling tools after {rounds} of tool results; "
                                             "stopped", field="max_tool_steps",
                                             hint="raise max_tool_steps, or check that the tools return what the "
                                                  "model needs to answer"), attempts, ErrorKind.TOOL_STEPS)
            ran = yield RunTools(tuple(toolbox.check(call) for call in asked), toolbox.functions, policy.timeout)
            called += [call.to_dict() for call in ran]
            tool_errors += sum(call.error is not None for call in ran)
            if tool_errors > toolbox.max_errors:
                failed = next(call for call in reversed(ran) if call.error is not None)
                raise ModelCallError(Problem(f"{prompt.model}: {tool_errors} tool calls failed (the last, "
                                             f"{failed.name}: {failed.error})", field="max_tool_errors",
                                             hint="fix the tool or its declared schema, or raise max_tool_errors"),
                                     attempts, ErrorKind.TOOL_ERRORS)
            exchanged += [assistant_turn(answer.raw, asked), *result_turns(list(ran))]
            kwargs["messages"] = [*kwargs["messages"], *exchanged[-1 - len(ran):]]
            continue
        called += [call.to_dict() for call in asked]
        if requested and not (answer.valid and answer.raw.strip()):  # no answer beside the calls: the caller
            attempts[-1] = replace(attempts[-1], outcome=Outcome.TOOL_CALLS)  # answers them (send_tool_results)
            answer = Answer(answer.raw, None)
            break
        if answer.valid:
            break
        cut = _cut_off(outcome, kwargs)  # what the caller is told; the model's correction quotes its own issues
        shown = ([cut] if cut else []) + list(answer.issues[:MAX_ISSUES])
        issues = redact("; ".join(f"{i.path}: {i.message}" for i in shown)
                        + (f"; and {len(answer.issues) - MAX_ISSUES} more" if len(answer.issues) > MAX_ISSUES else ""))
        attempts[-1] = Attempt(prompt.model, Outcome.CUT_OFF if cut else Outcome.INVALID, issues, attempts[-1].latency_s,
                               attempts[-1].waited_s)
        if corrections == validation_retries:
            if cut:
                answer = replace(answer, issues=(cut, *answer.issues))
            break
        corrections += 1
        kwargs["messages"] = [*kwargs["messages"], {"role": "assistant", "content": quoted_answer(answer)},
                              {"role": "user", "content": correction_message(answer)}]
        if prompt.sampling_params:  # a model that rejects temperature gets the correction alone
            kwargs["temperature"] = min(kwargs.get("temperature", retry_temperature), retry_temperature)
    output, answer = typed(output_model, answer)
    if not answer.valid and attempts[-1].outcome is Outcome.OK:  # the typed model refused what the schema took
        attempts[-1] = replace(attempts[-1], outcome=Outcome.INVALID, error=answer.issues[0].message)
    return Result(output=output, raw=answer.raw, data=answer.data, model=prompt.model, artifact=artifact,
                  attempts=attempts, usage=usage, cost=cost, latency_s=time.monotonic() - started,
                  issues=answer.issues, state=provider_state(outcome), tool_calls=called, tool_messages=exchanged,
                  logprobs=_logprobs(outcome) if kwargs.get("logprobs") else None)


def _respond(prompt: RenderedPrompt, kwargs: dict[str, Any], *, artifact: str, policy: RetryPolicy,
             attempts: list[Attempt], limiter: RateLimiter | None, health: ProviderHealth | None, endpoint: str,
             prompt_tokens: int) -> Generator[Call | Wait, Any, Any]:
    """One response to ``kwargs``: the call, retried after transient and local errors with backoff
    (each attempt appended to ``attempts``); raises ModelCallError when the model is done for."""
    waited = 0.0
    for number in range(1, policy.attempts + 1):
        cooling = health.cooling(endpoint) if health is not None else 0.0
        if cooling:
            attempts.append(Attempt(prompt.model, Outcome.UNAVAILABLE, f"provider cooling down ({cooling:.1f}s left)",
                                    0.0, waited))
            raise ModelCallError(Problem(f"{prompt.model}: skipped, {endpoint.split('#')[0]} failed too often "
                                         f"recently; cooling down for {cooling:.1f}s more", field="model",
                                         hint=_HINTS[ErrorKind.UNAVAILABLE]), attempts, ErrorKind.UNAVAILABLE)
        reservation = limiter.reserve(kwargs, prompt_tokens) if limiter is not None else None
        if reservation is not None and reservation.wait > 0:
            waited += reservation.wait
            yield Wait(reservation.wait)
        began = time.monotonic()
        started = health.clock() if health is not None else began  # outcomes count by when calls started
        outcome = yield Call(dict(kwargs), len(attempts) + 1, artifact,
                             limiter.gate(kwargs) if limiter is not None else None, policy.queue_timeout,
                             health, endpoint)
        outcome = _unusable(outcome, prompt) or outcome
        if isinstance(outcome, BaseException):
            kind = classify(outcome)
            message = _safe_message(outcome)
            asked = retry_after(outcome) if kind is ErrorKind.TRANSIENT else None
            if asked is not None and asked > policy.cap:  # said, not cut short silently
                message += f" (the server asked to wait {asked:.0f}s; RetryPolicy.cap allows {policy.cap:g}s)"
            attempts.append(Attempt(prompt.model, Outcome(kind), message, time.monotonic() - began, waited))
            if limiter is not None:
                limiter.settle(reservation, 0 if kind is not ErrorKind.TRANSIENT else None)
            if health is not None and kind is ErrorKind.TRANSIENT:
                health.record(endpoint, failed=True, started=started)
            if kind is ErrorKind.CREDENTIALS:  # the SDK found no key: name the variables, as before a call
                found = check_credentials(prompt.model, kwargs)
                raise ModelCallError(Problem(f"{prompt.model}: {message}", field="model", hint=(
                    MissingCredentials(found.provider, found.missing).hint if found.missing
                    else _HINTS[kind])), attempts, kind, found.missing)
            if kind not in (ErrorKind.TRANSIENT, ErrorKind.LOCAL) or number == policy.attempts:
                raise ModelCallError(Problem(f"{prompt.model}: {message}", field="model",
                                             hint=_HINTS.get(kind)), attempts, kind)
            waited = policy.delay(number, asked)
            (log.warning if asked is not None and asked > waited else log.info)(
                "%s: %s; retrying in %.2fs", prompt.model, message, waited)
            yield Wait(waited)
            continue
        attempts.append(Attempt(prompt.model, Outcome.OK, note(outcome), time.monotonic() - began, waited))
        if prompt.model.startswith("local/"):  # an embedded model's slow answer: say how to set its threads
            from rosetta.local.threads import slow_call

            slow_call(prompt.model, attempts[-1].latency_s)
        if limiter is not None:
            limiter.settle(reservation, getattr(getattr(outcome, "usage", None), "total_tokens", None))
        if health is not None:
            health.record(endpoint, failed=False, started=started)
        return outcome
    raise AssertionError("policy.attempts is at least 1")


def typed(output_model: type[BaseModel] | None, answer: Answer) -> tuple[Any, Answer]:
    """The output of a valid ``answer``, typed by ``output_model``, and the answer; an issue per
    field the typed model refuses though the schema took it (a lone surrogate such as ``"\\ud800"``
    in a string: pydantic takes only text UTF-8 can write), so the answer comes back untyped and
    invalid instead of lost to a traceback."""
    if not answer.valid or output_model is None or answer.data is None:
        return answer.data, answer
    unwritable = _unwritable(answer.data)  # pydantic takes some (a string without limits), then cannot dump them
    if unwritable:
        return answer.data, replace(answer, issues=tuple(
            Issue(path, "holds a lone surrogate (such as \\ud800): no unicode character UTF-8 can write")
            for path in unwritable))
    from pydantic import ValidationError

    try:
        return output_model.model_validate(answer.data), answer
    except ValidationError as error:
        issues = tuple(Issue(redact("$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}"
                                                  for part in found["loc"])), redact(found["msg"]))
                       for found in error.errors(include_input=False))
        return answer.data, replace(answer, issues=issues)


def _cut_off(response: Any, kwargs: Mapping[str, Any]) -> Issue | None:
    """The issue of an answer the token limit cut off (``finish_reason: length``), else None: an
    invalid answer said to be cut off, not only "no JSON value found" (a local model's decoder also
    ends a looping answer so; a correction may still break the loop, so it is corrected as usual)."""
    if getattr(response.choices[0], "finish_reason", None) != "length":
        return None
    limit = kwargs.get("max_completion_tokens") or kwargs.get("max_tokens")
    return Issue("$", f"the answer was cut off at the token limit (finish_reason length"
                      f"{f', max_tokens {limit}' if limit else ''}) before it was complete; raise it with "
                      "overrides={'max_tokens': ...}")


def _unwritable(data: object) -> list[str]:
    """The JSON paths of the strings in ``data`` (keys included) that UTF-8 cannot encode."""
    found, stack = [], [("$", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                found.append(path)
        elif isinstance(value, dict):
            stack.extend((f"{path}.{key}", item) for key, item in value.items())
            stack.extend((path, key) for key in value if isinstance(key, str))
        elif isinstance(value, list):
            stack.extend((f"{path}[{n}]", item) for n, item in enumerate(value))
    return sorted(set(found))


def _logprobs(response: Any) -> list[dict[str, Any]] | None:
    """``choices[0].logprobs.content`` as plain dicts (OpenAI's shape), or None when absent."""
    content = getattr(getattr(response.choices[0], "logprobs", None), "content", None)
    if not content:
        return None
    return [entry if isinstance(entry, dict) else entry.model_dump() for entry in content]


def _unusable(response: object, prompt: RenderedPrompt) -> Exception | None:
    """Why a response holds no answer to read — no choices, no message, a refusal, an answer the
    content filter withheld, or nothing at all — as the exception whose kind decides what happens
    next; None for a response with an answer (text, structured output or tool calls). The one place
    this is decided, for every call path: whole or streamed, run, stream or chat."""
    if isinstance(response, BaseException):
        return None
    choices = getattr(response, "choices", None)
    if not choices:
        return EmptyResponse("the provider answered with no choices (an empty or malformed response)")
    message = getattr(choices[0], "message", None)
    if message is None:
        return EmptyResponse("the provider's first choice holds no message (a malformed response)")
    if answer_text(message, prompt).strip() or tool_calls(message):
        return None
    refusal = getattr(message, "refusal", None) or (getattr(message, "provider_specific_fields", None) or {}).get(
        "refusal")  # litellm keeps OpenAI's refusal among the provider's own fields
    if isinstance(refusal, str) and refusal.strip():
        return Refusal(f"the model refused: {refusal.strip()}")
    if getattr(choices[0], "finish_reason", None) == "content_filter":
        return ContentFiltered("the provider's content filter withheld the answer (finish_reason content_filter)")
    return EmptyResponse("the model's answer is empty: no text and no tool call")


_HINTS: dict[ErrorKind, str] = {
    ErrorKind.CREDENTIALS: "not retried: no credentials for this provider were found (its SDK looked in the environment, "
                   "its profiles and the machine's role); the next model of the chain, if any, was tried; "
                   "`rosetta doctor` shows which providers have credentials here",
    ErrorKind.HARD: "not retried, and no other model is tried: fix the request (bad request, content policy)",
    ErrorKind.DENIED: "not retried: this endpoint refused the key, or does not serve the model (401, 402, 403, 404); "
              "the next model of the chain, if any, was tried; check this provider's API key, its "
              "permissions and the model id",
    ErrorKind.TRANSIENT: "the provider kept failing; the next model in the fallback chain is tried",
    ErrorKind.BUSY: "every in-flight slot of this endpoint stayed taken (rate_limits.<provider>.max_in_flight): calls "
            "that hang, or streams neither read to the end nor closed, hold them; close streams you stop "
            "reading (stream.close()), or raise max_in_flight or RetryPolicy.queue_timeout",
    ErrorKind.LOCAL: "no connection could be opened in time (this machine's pool or sockets ran out); lower "
             "rate_limits.<provider>.max_in_flight, or raise the timeout",
    ErrorKind.CONTEXT: "the prompt does not fit this model's context window",
    ErrorKind.REFUSED: "not retried: the model declined to answer; the next model of the chain, if any, was tried",
    ErrorKind.UNAVAILABLE: "the next model in the fallback chain is tried; the provider is called again after the cool-down",
}


def _safe_message(error: BaseException) -> str:
    """The error's first line, with anything that looks like a key removed."""
    text = redact(str(error)).strip()  # the whole message first: a private key spans lines
    return f"{type(error).__name__}: {text.splitlines()[0] if text else type(error).__name__}"[:300]


def provider_state(response: Any) -> dict[str, Any]:
    """What a provider needs back on the next turn (response id, thinking blocks, signatures), as JSON."""
    import json

    state: dict[str, Any] = {}
    if getattr(response, "id", None):
        state["response_id"] = response.id
    message = response.choices[0].message
    for name in ("provider_specific_fields", "thinking_blocks", "reasoning_content"):
        value = getattr(message, name, None)
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if v is not None}  # e.g. OpenAI's {"refusal": None}
        if value:
            state[name] = json.loads(json.dumps(value, default=str))
    return state


def _estimate_tokens(messages: list[dict[str, Any]]) -> int:
    """About four characters a token: enough to pace a conversation's calls."""
    return sum(len(str(m.get("content") or "")) for m in messages) // 4 + 4 * len(messages)
