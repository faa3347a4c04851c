"""The options of one call, typed: :class:`RunOptions` is what ``run``, ``arun``, ``stream``,
``chat`` and ``run_manual`` accept, the same object (or the same keywords) on every path.

Why one object: options used to travel as ``**kwargs`` that every path unpacked differently, so a
typo or an option one path did not know became a request parameter, found only by the provider's
400. Here an unknown keyword is a :class:`~rosetta.errors.UsageError` naming the nearest option,
and provider parameters pass only through the explicit ``extra`` mapping. What rosetta decided at
compile time (temperature, max tokens, structured output, tools) is changed only through
``overrides``, which the :class:`~rosetta.runtime.result.Result` records.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rosetta.errors import Problem, UsageError

if TYPE_CHECKING:
    from rosetta.runtime.health import ProviderHealth
    from rosetta.runtime.result import RetryPolicy
    from rosetta.runtime.limits import RateLimiter
    from rosetta.runtime.rubric import Rubric

PROVIDER_PARAMETERS = frozenset({
    "temperature", "top_p", "top_k", "min_p", "max_tokens", "max_completion_tokens", "seed", "stop", "n",
    "response_format", "tools", "tool_choice", "parallel_tool_calls", "logprobs", "top_logprobs", "presence_penalty",
    "frequency_penalty", "logit_bias", "reasoning_effort", "thinking", "user", "metadata", "mock_response",
    "api_version", "extra_headers"})
"""Common litellm parameters: passed as options by mistake, they are pointed to ``extra`` /
``overrides`` rather than to the option whose name is nearest."""

RESERVED = frozenset({"model", "messages", "stream"})
"""Request keys no option may set: the runtime owns them (the model of the chain, the rendered
conversation, and whether the call streams, which :meth:`Agent.stream` decides)."""


@dataclass(frozen=True)
class RunOptions:
    """How one call runs. Every field has a default, so ``RunOptions()`` is a plain call.

    ``fallbacks``: the models tried after ``model`` (default: the definition's model preferences;
    ``[]`` for none). ``policy`` / ``timeout``: transient-error retries, backoff and the per-call
    timeout (``timeout`` replaces ``policy.timeout``). ``validation_retries``: corrections after an
    answer that does not validate (default: the model class's policy). ``on_secret``: what
    ``no_secrets_in_output`` does with a credential in an answer. ``review`` / ``retry_once`` /
    ``review_model``: grade the answer against a rubric, and regenerate once when it fails.
    ``record_dir`` / ``raw_transcripts``: write the prompt, answer and conversation there.
    ``user_id``: the experiment arm. ``api_base`` / ``api_key``: the endpoint and key to call
    (default: the model's declared or environment ones). ``extra``: provider parameters passed to
    litellm as they are. ``overrides``: parameters the compiled prompt sets, replaced for this call
    (recorded in ``Result.overrides``). ``limiter`` / ``health``: the rate limits and provider
    health to use instead of the project's. ``tools``: the functions of the tools the definition
    declares, by name: a model that calls them gets their results and goes on until it answers
    (``max_tool_steps`` rounds at most; up to ``max_tool_errors`` refused, invalid or raising calls
    are reported back to it). Without them a run ends where the model asks for tools
    (``Result.wants_tools``), and ``chat().send_tool_results`` answers them.
    """

    fallbacks: Sequence[str] | None = None
    policy: RetryPolicy | None = None
    timeout: float | None = None
    validation_retries: int | None = None
    retry_temperature: float = 0.2
    on_secret: Literal["redact", "fail"] = "redact"
    review: Rubric | str | Sequence[Any] | Mapping[str, Any] | None = None
    retry_once: bool = False
    review_model: str | None = None
    record_dir: str | os.PathLike[str] | None = None
    raw_transcripts: bool = False
    user_id: object | None = None
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)  # never printed
    extra: Mapping[str, Any] = field(default_factory=dict)
    overrides: Mapping[str, Any] = field(default_factory=dict)
    limiter: RateLimiter | None = None
    health: ProviderHealth | None = None
    tools: Mapping[str, Callable[..., Any]] | None = None
    max_tool_steps: int = 8
    max_tool_errors: int = 3

    def __post_init__(self) -> None:
        if self.fallbacks is not None:
            if isinstance(self.fallbacks, str) or not all(isinstance(m, str) and m for m in self.fallbacks):
                _refuse("fallbacks", self.fallbacks, "a list of model ids, e.g. ['openai/gpt-4o']")
            object.__setattr__(self, "fallbacks", tuple(self.fallbacks))
        if self.policy is not None:
            from rosetta.runtime.result import RetryPolicy

            if not isinstance(self.policy, RetryPolicy):
                _refuse("policy", self.policy, "a rosetta.RetryPolicy, e.g. RetryPolicy(attempts=2, timeout=30)")
        if self.on_secret not in ("redact", "fail"):
            _refuse("on_secret", self.on_secret, '"redact" or "fail"')
        if self.validation_retries is not None and (
                not isinstance(self.validation_retries, int) or isinstance(self.validation_retries, bool)
                or self.validation_retries < 0):
            _refuse("validation_retries", self.validation_retries, "a whole number >= 0")
        if self.timeout is not None and (isinstance(self.timeout, bool) or not isinstance(self.timeout, int | float)
                                         or self.timeout <= 0):
            _refuse("timeout", self.timeout, "seconds, a number > 0")
        if self.tools is not None:
            if not isinstance(self.tools, Mapping) or not all(
                    isinstance(name, str) and callable(function) for name, function in self.tools.items()):
                _refuse("tools", type(self.tools).__name__, "a mapping of declared tool names to functions, e.g. "
                                                            "{'describe_table': describe_table}")
            object.__setattr__(self, "tools", dict(self.tools))
        for name in ("max_tool_steps", "max_tool_errors"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                _refuse(name, value, "a whole number >= 0")
        if self.retry_once and self.review is None:
            raise UsageError(Problem("retry_once needs a rubric to review against", field="review",
                                     hint="pass review=[...criteria...] as well"))
        if self.review is not None:  # a rubric that cannot be read is refused before any token is spent
            from rosetta.runtime.rubric import Rubric

            object.__setattr__(self, "review", Rubric.of(self.review))
        if self.record_dir is not None:
            object.__setattr__(self, "record_dir", Path(self.record_dir))
        for name in ("extra", "overrides"):
            value = getattr(self, name)
            if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
                _refuse(name, type(value).__name__, "a mapping of litellm parameter names to values")  # not quoted:
                # it may hold a key
            _check_params(name, value)
            object.__setattr__(self, name, dict(value))

    def __repr__(self) -> str:
        """The fields (``api_key`` left out), credentials in ``extra`` or ``overrides`` (a header, a
        key) redacted: an options object may be logged."""
        from rosetta.runtime.secrets import redact

        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
        return redact(f"RunOptions({shown})")

    @classmethod
    def of(cls, options: RunOptions | None = None, keywords: Mapping[str, Any] | None = None) -> RunOptions:
        """``options`` (default: all defaults) with ``keywords`` replacing its fields; a keyword
        that is no option is a UsageError naming the nearest one (and ``extra`` for provider
        parameters), raised before anything is sent."""
        if options is not None and not isinstance(options, RunOptions):
            _refuse("options", options, "a rosetta.RunOptions")
        keywords = dict(keywords or {})
        known = OPTION_NAMES
        for name in keywords:
            if name not in known:
                close = [] if name in PROVIDER_PARAMETERS else difflib.get_close_matches(name, sorted(known), n=1,
                                                                                          cutoff=0.75)
                meant = name if name in PROVIDER_PARAMETERS else next(iter(difflib.get_close_matches(
                    name, sorted(PROVIDER_PARAMETERS), n=1, cutoff=0.75)), name)  # temprature -> temperature
                hint = (f"did you mean {close[0]}=?" if close else
                        f"a provider parameter goes in extra={{{meant!r}: ...}}, one the compiled prompt sets in "
                        f"overrides={{{meant!r}: ...}}")
                raise UsageError(Problem(f"unknown option {name!r}: nothing was sent", field=name,
                                         expected="one of " + ", ".join(sorted(known)), hint=hint))
        base = options if options is not None else cls()
        return replace(base, **keywords) if keywords else base

    def retry_policy(self) -> RetryPolicy:
        """``policy`` (default: :class:`~rosetta.runtime.result.RetryPolicy`) with ``timeout`` applied."""
        from rosetta.runtime.result import RetryPolicy

        policy = self.policy or RetryPolicy()
        return replace(policy, timeout=float(self.timeout)) if self.timeout is not None else policy

    def connection(self) -> dict[str, str]:
        """The caller's endpoint and key, where given (they replace the model's own)."""
        return {name: value for name, value in (("api_base", self.api_base), ("api_key", self.api_key))
                if value is not None}


OPTION_NAMES = frozenset(f.name for f in fields(RunOptions))


def refuse_set(options: RunOptions, names: tuple[str, ...], where: str, hint: str,
               allowed: RunOptions | None = None) -> None:
    """A UsageError, before anything is sent, when ``options`` sets one of ``names`` (away from its
    default, and from ``allowed``'s value where given) on a path that would not use it."""
    defaults = RunOptions()
    for name in names:
        value = getattr(options, name)
        if value != getattr(defaults, name) and (allowed is None or value != getattr(allowed, name)):
            raise UsageError(Problem(f"{where} does not use the option {name}: nothing was sent", field=name,
                                     hint=hint.format(name=name)))


def request_params(options: RunOptions, compiled: Mapping[str, Any]) -> dict[str, Any]:
    """What ``options`` adds to a request whose compiled parameters are ``compiled``: ``extra``,
    refused where it would silently replace one of them, then ``overrides``."""
    clash = sorted(set(options.extra) & set(compiled))
    if clash:
        name = clash[0]
        raise UsageError(Problem(f"{name} is set by the compiled prompt ({compiled[name]!r}); extra does not "
                                 "replace it",
                                 field=f"extra.{name}", hint=f"to change it for this call, pass overrides={{{name!r}: "
                                                             "...} (the Result records it)"))
    return {**options.extra, **options.overrides}


def _check_params(where: str, params: Mapping[str, Any]) -> None:
    for name in params:
        if name in RESERVED or name in ("api_base", "api_key"):
            hint = ("use the option of that name" if name in ("api_base", "api_key") else
                    "the runtime sets it: pick the model with model= or fallbacks=, stream with agent.stream()")
            raise UsageError(Problem(f"{where} cannot set {name!r}", field=f"{where}.{name}", hint=hint))
        if name in OPTION_NAMES:
            raise UsageError(Problem(f"{name!r} is a rosetta option, not a provider parameter", field=f"{where}.{name}",
                                     hint=f"pass {name}=... itself"))


def _refuse(name: str, value: object, expected: str) -> None:
    raise UsageError(Problem(f"option {name}: {value!r} is not valid", field=name, expected=expected))
