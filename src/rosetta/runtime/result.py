"""What a run gives back and how it is told to run: the :class:`Result` (typed by the agent's
output type), each :class:`Attempt`, the :class:`ModelCallError` raised when no model produced a
valid answer, and the :class:`RetryPolicy`. Their own module, below everything that produces them
(the runner, its drivers, conversations and reviews), so none of those needs another to name them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from rosetta.errors import Problem, RosettaError
from rosetta.providers.policy import ErrorKind
from rosetta.runtime.secrets import redact_problems

if TYPE_CHECKING:
    from rosetta.runtime.answers import Issue
    from rosetta.runtime.verdicts import Review

@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff for transient errors; ``Retry-After`` wins when the server sends one,
    up to ``cap`` (a longer one is cut to ``cap``, and the log and the attempt's error say so)."""

    attempts: int = 4  # calls per model for transient errors, the first included
    base: float = 0.5  # seconds before the first retry
    multiplier: float = 2.0
    cap: float = 20.0  # longest single wait
    timeout: float = 60.0  # per call
    queue_timeout: float = 300.0
    """Longest wait for one of the endpoint's in-flight slots (``rate_limits.<provider>.max_in_flight``)
    before the model is given up (kind ``busy``: the next model is tried). Not part of ``timeout``:
    a spike queues here; a slot that stays taken this long is held by calls that hang, or by
    streams neither read to the end nor closed."""

    def delay(self, retry: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``retry`` (1-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.cap)
        return min(self.base * self.multiplier ** (retry - 1), self.cap)


class Outcome(StrEnum):
    """How one call ended: answered (the first four) or failed as a provider's failure is
    classified (:class:`~rosetta.providers.policy.ErrorKind`'s first nine, same values). A ``str``."""

    OK = "ok"  # a valid answer (perhaps repaired to read it: the attempt's ``error`` says how)
    INVALID = "invalid"  # an answer that does not validate: corrected up to validation_retries times
    CUT_OFF = "cut_off"  # an invalid answer cut off at the token limit (corrected like INVALID; issues say so)
    TOOL_CALLS = "tool_calls"  # the model asked for tools the run had no functions for: the caller answers them
    TRANSIENT = "transient"
    LOCAL = "local"
    HARD = "hard"
    DENIED = "denied"
    CREDENTIALS = "credentials"  # found before the call: never sent
    REFUSED = "refused"
    CONTEXT = "context"
    BUSY = "busy"  # never sent
    UNAVAILABLE = "unavailable"  # never sent


ANSWERED = frozenset({Outcome.OK, Outcome.INVALID, Outcome.CUT_OFF, Outcome.TOOL_CALLS})
"""Attempt outcomes of calls the provider answered: each one paid for (budgets count them)."""


@dataclass(frozen=True)
class Attempt:
    """One call: which model, how it ended, and how long it took."""

    model: str
    outcome: Outcome  # a plain string or an ErrorKind of the same value is taken as its Outcome
    error: str | None  # what went wrong; for an "ok" answer, what was repaired to read it (salvage.note)
    latency_s: float
    waited_s: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcome", Outcome(self.outcome))  # ValueError on a kind no call ends with


def paid_calls(attempts: list[Attempt]) -> int:
    """How many of ``attempts`` the provider answered: what budgets and call counts charge."""
    return sum(1 for attempt in attempts if attempt.outcome in ANSWERED)


OutputT = TypeVar("OutputT")
"""The type of a valid answer's ``output``: the agent's ``output_type`` where one was given (a bare
``Result`` is ``Result[Any]``)."""


@dataclass(frozen=True)
class Result(Generic[OutputT]):
    """A model's answer and how it was obtained. Frozen: each stage that adds to it (who answered,
    output rules, a review) makes a new one with :func:`dataclasses.replace`, so a Result a caller
    holds never changes under them."""

    output: OutputT  # when valid: an instance of the agent's output type (structured agents) or the text;
    # when not, what could be read of the answer, untyped (as ``data``)
    raw: str
    data: Any
    model: str
    artifact: str
    attempts: list[Attempt] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)  # prompt, completion and total tokens; cached_tokens
    # (read from the provider's prompt cache) and cache_write_tokens (written to it) when the cache was at work
    cost: float | None = None
    latency_s: float = 0.0
    issues: tuple[Issue, ...] = ()
    escalated: bool = False
    post_checks: list[str] = field(default_factory=list)  # output rules left for the caller to check
    state: dict[str, Any] = field(default_factory=dict)  # provider state a next turn passes back
    review: Review | None = None  # when run(..., review=...) graded the answer
    first_review: Review | None = None  # the review of the first answer, when a failed review made it retry
    retried: bool = False  # regenerated once after a failed review (retry_once=True)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # the agent's own tools called, every attempt
    # (id, name, arguments, and the result or error of each that ran)
    tool_messages: list[dict[str, Any]] = field(default_factory=list)  # the tool turns sent back, in order
    agent: str = ""  # the agent that answered (rosetta.record_outcome logs under its name)
    project: str | None = None  # that agent's project root (rosetta.record_outcome logs under its .rosetta/)
    version: str | None = None  # content_sha256 of the artifact that answered; None for the uncompiled render
    arm: str | None = None  # "control" | "treatment" when an experiment routed the call (run(..., user_id=...))
    experiment: str | None = None  # that experiment's id
    logprobs: list[dict[str, Any]] | None = None  # the answer's tokens with their log-probabilities, when asked for
    overrides: dict[str, Any] = field(default_factory=dict)  # compiled request parameters this call replaced

    @property
    def valid(self) -> bool:
        return not self.issues

    @property
    def wants_tools(self) -> bool:
        """The run ended where the model asked for tools it was given no functions for: the calls
        are in ``tool_calls`` (the last ones without a ``result``), for the caller to answer
        (``Conversation.send_tool_results``). Not an invalid answer: no correction was spent."""
        return bool(self.attempts) and self.attempts[-1].outcome is Outcome.TOOL_CALLS


class ModelCallError(RosettaError):
    """A model could not produce a valid answer; ``attempts`` says what happened each time."""

    def __init__(self, problems: Problem | list[Problem] | str, attempts: list[Attempt] | None = None,
                 kind: ErrorKind | str = ErrorKind.HARD, missing: tuple[str, ...] = ()) -> None:
        super().__init__(redact_problems(problems))  # they quote provider errors and answers
        self.attempts = list(attempts or [])
        self.kind = ErrorKind(kind)
        self.missing = tuple(missing)  # the unset variables holding the keys it lacked (kind "credentials")

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, (self.problems, self.attempts, self.kind, self.missing))
