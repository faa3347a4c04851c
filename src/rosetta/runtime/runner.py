"""One call path for every way of running an agent: a chain over the fallback models, each step
:func:`~rosetta.runtime.invoke.plan` on that model's own selected prompt, driven by blocking calls
(``run``), awaited ones (``arun``), a stream (``stream``) or a single explicit prompt (``run_prompt``).

Because all of them drive the same steps, a streamed call sends exactly the request ``run()``
sends (timeout, limits and health included), and a fallback or correction behaves the same way
whichever driver asked. Input guardrails run before any token is spent; output rules, typing and
the agent's ``fallback_behavior`` run on every Result.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncGenerator, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rosetta.errors import Problem, UsageError
from rosetta.local.project import LocalSettings
from rosetta.providers.credentials import MissingCredentials
from rosetta.providers.model_entries import CatalogModel
from rosetta.providers.policy import ErrorKind
from rosetta.render.prompt import RenderedPrompt
from rosetta.runtime import salvage
from rosetta.runtime.options import RunOptions
from rosetta.runtime.result import Attempt, ModelCallError, Outcome, Result
from rosetta.runtime.selector import Selection, Selector
from rosetta.runtime.stream import Finished
from rosetta.runtime.traffic import Traffic

if TYPE_CHECKING:
    from opentelemetry.trace import Span
    from pydantic import BaseModel

    from rosetta.definition.models import AgentSpec
    from rosetta.runtime.salvage import AComplete, Complete
    from rosetta.runtime.tools import ToolBox

log = logging.getLogger("rosetta.runtime")

INVALID_ANSWER = "invalid_answer"
"""The ``rosetta_event`` of the warning logged per answer that does not validate, so commands that
score many answers can count these warnings instead of printing each."""

def default_validation_retries(prompt: RenderedPrompt) -> int:
    """Corrections after an answer that does not validate, when the caller sets none: the runtime
    policy of the prompt's model class (``providers/runtime_policy.yaml``)."""
    from rosetta.providers.policy import validation_retries

    return validation_retries(prompt.model_class)


@dataclass
class _ChainState:
    """What one run has learned so far (kept per call: a Runner serves concurrent calls)."""

    model: Callable[[str], CatalogModel]  # model id → its catalog entry (Runner.model)
    attempts: list[Attempt] = field(default_factory=list)
    failures: list[Problem] = field(default_factory=list)  # one per model of the chain, first to last
    kinds: list[str] = field(default_factory=list)  # how each of them failed ("skipped": too small a window)
    missing: list[str] = field(default_factory=list)  # the unset key variables of models skipped for them
    overflow_window: int | None = None  # the largest window that overflowed

    def error(self, agent: str, kind: ErrorKind) -> Exception:
        """The ModelCallError that ends the run: what happened to every model tried, in order; when
        no model had credentials here, of kind ``credentials``, naming every variable to set."""
        from rosetta.providers.credentials import fix_hint

        missing = tuple(dict.fromkeys(self.missing))
        if kind is ErrorKind.HARD and len(self.failures) == 1:
            return ModelCallError(self.failures, self.attempts, kind)
        hint = "each model's failure follows, first to last"
        if kind is ErrorKind.HARD:
            headline = f"{agent}: the last model refused the request, after {len(self.failures) - 1} failed before it"
        elif set(self.kinds) == {ErrorKind.CREDENTIALS}:
            kind, headline = ErrorKind.CREDENTIALS, f"{agent}: no model of the chain has credentials here" + (
                f" ({', '.join(f'${name}' for name in missing)} not set)" if missing else "")
        else:
            headline = f"{agent}: every model of the chain failed"
        if missing:
            hint += f"; {fix_hint(missing)}"
        return ModelCallError([Problem(headline, hint=hint), *self.failures], self.attempts, kind, missing)

    def too_small(self, selection: Selection) -> bool:
        """After a context-window overflow, skip models whose window is no larger."""
        if self.overflow_window is None:
            return False
        window = self.model(selection.model).context_window
        if window <= self.overflow_window:
            self.failures.append(Problem(f"{selection.model}: skipped, its {window:,}-token window is no larger "
                                         "than one that overflowed", field="model"))
            self.kinds.append("skipped")
            return True
        return False


class Runner:
    """Runs one agent, from what that takes: its ``name``, its ``selector`` (each model's prompt),
    its project's ``traffic`` (rate limits and health), its definition's ``spec`` and model
    ``preferences`` (read when first needed), the project ``root``, the project settings its
    embedded-model calls carry (``local``) and the definition file (``source``, named by input-rule
    errors)."""

    def __init__(self, name: str, selector: Selector, traffic: Traffic, *, spec: Callable[[], AgentSpec | None],
                 preferences: Callable[[], list[str]], root: Path, local: LocalSettings, source: Path | None,
                 output_type: type | None = None) -> None:
        self.name, self.selector, self.traffic, self.output_type = name, selector, traffic, output_type
        self._spec, self.preferences, self.root, self.local, self.source = spec, preferences, root, local, source
        self._models: dict[str, type[BaseModel]] = {}
        self._targets: dict[str, CatalogModel] = {}

    @property
    def spec(self) -> AgentSpec | None:
        """The definition's frontmatter (None for an agent known only by its artifacts)."""
        return self._spec()

    # -- drivers ---------------------------------------------------------------------------

    def run(self, inputs: Mapping[str, Any], chain: list[str], options: RunOptions, *, complete: Complete | None = None,
            messages: list[dict[str, Any]] | None = None) -> Result[Any]:
        """The first model of ``chain`` that answers (blocking)."""
        from rosetta.runtime.drive import drive

        return drive(self.steps(inputs, chain, options, messages), complete=complete or salvage.completion)

    async def arun(self, inputs: Mapping[str, Any], chain: list[str], options: RunOptions, *,
                   acomplete: AComplete | None = None, messages: list[dict[str, Any]] | None = None) -> Result[Any]:
        """:meth:`run` for asyncio."""
        from rosetta.runtime.drive import adrive

        return await adrive(self.steps(inputs, chain, options, messages), acomplete=acomplete or salvage.acompletion)

    def text(self, inputs: Mapping[str, Any], chain: list[str], options: RunOptions, *,
             complete: Complete | None = None, messages: list[dict[str, Any]] | None = None,
             ) -> Generator[str, None, Result[Any]]:
        """The first call's text as it arrives, then (as the generator's value) the Result (see
        :func:`~rosetta.runtime.drive.drive_streaming`). Under ``no_secrets_in_output`` the text is
        redacted as it streams, as the Result is (with ``on_secret="fail"`` the Result then raises).
        A model that cannot stream, or an agent whose output rules must see the whole answer, sends
        its answer whole."""
        from rosetta.runtime.drive import drive, drive_streaming

        steps, complete = self.steps(inputs, chain, options, messages), complete or salvage.completion
        if not self.selector.target(chain[0]).capabilities.streaming or self._holds_answer():
            return drive(steps, complete=complete)
        text = drive_streaming(steps, complete=complete)
        return (yield from (_redacted(text) if self._redacts() else text))

    async def atext(self, inputs: Mapping[str, Any], chain: list[str], options: RunOptions, *,
                    acomplete: AComplete | None = None, messages: list[dict[str, Any]] | None = None,
                    ) -> AsyncGenerator[str | Finished, None]:
        """:meth:`text` for asyncio: the text, then one :class:`~rosetta.runtime.stream.Finished`."""
        from rosetta.runtime.drive import adrive, adrive_streaming

        steps, acomplete = self.steps(inputs, chain, options, messages), acomplete or salvage.acompletion
        if not self.selector.target(chain[0]).capabilities.streaming or self._holds_answer():
            yield Finished(await adrive(steps, acomplete=acomplete))
            return
        text = adrive_streaming(steps, acomplete=acomplete)
        try:
            async for item in (_aredacted(text) if self._redacts() else text):
                yield item
        finally:
            await text.aclose()

    def _redacts(self) -> bool:
        from rosetta.runtime.guardrails import NO_SECRETS

        spec = self.spec
        return spec is not None and any(rule.rule == NO_SECRETS for rule in spec.guardrails.output_rules)

    def _holds_answer(self) -> bool:
        """Whether an output rule's expression must see the whole answer before any of it is shown
        (``action: redact`` or ``block``): such an agent streams its answer once checked."""
        spec = self.spec
        return spec is not None and any(rule.pattern is not None and rule.action in ("redact", "block")
                                        for rule in spec.guardrails.output_rules)

    def run_prompt(self, prompt: RenderedPrompt, inputs: Mapping[str, Any], options: RunOptions, *,
                   complete: Complete | None = None, label: str = "candidate",
                   messages: list[dict[str, Any]] | None = None) -> Result[Any]:
        """Answer ``inputs`` with an explicit ``prompt`` on its own model, and no fallback chain:
        the optimizer scores candidates here, so a prompt scores the same at compile time as when
        the runtime later serves it from its artifact."""
        from rosetta.runtime.drive import drive
        from rosetta.runtime.invoke import plan

        spec = self.check_inputs(inputs)
        selection = Selection(model=prompt.model, kind=label, artifact=None, reason=label, prompt=prompt,
                              artifact_id=label)
        result = drive(plan(prompt, inputs, **self.plan_options(selection, options, messages)),
                       complete=complete or salvage.completion)
        return self.finish(result, selection, spec, [], options)

    def run_manual(self, inputs: Mapping[str, Any], chain: list[str], options: RunOptions, *,
                   prompt_file: str | os.PathLike[str] | None, answer: str | None,
                   answer_file: str | os.PathLike[str] | None) -> Result[Any]:
        """Manual (copy/paste) mode: write the readable prompt of ``chain[0]`` to ``prompt_file``,
        read the answer from ``answer``, ``answer_file`` or standard input, and validate it."""
        import sys

        from rosetta.fileio import write_atomic
        from rosetta.runtime.answers import read_answer
        from rosetta.fileio import encodable
        from rosetta.runtime.invoke import typed

        spec = self.spec  # the input rules ran when the chain was made
        selection = self.selector.select(chain[0], None, options.user_id)
        prompt_file = Path(prompt_file or f"{self.name}-prompt.md")
        write_atomic(prompt_file, encodable(selection.prompt.render_for_display(inputs)))
        log.info("%s: manual mode, prompt written to %s", self.name, prompt_file)
        if selection.prompt.tool_specs:
            from rosetta.runtime.tools import manual_hint

            log.warning("%s: %s", self.name, manual_hint([spec.name for spec in selection.prompt.tool_specs]))
        if answer is None:
            answer = Path(answer_file).read_text(encoding="utf-8") if answer_file else sys.stdin.read()
        output, parsed = typed(self.output_model(selection), read_answer(answer, selection.prompt))
        result = Result(output=output, raw=answer, data=parsed.data, model="manual", artifact=selection.artifact_id,
                        attempts=[Attempt("manual", Outcome.OK if parsed.valid else Outcome.INVALID, None, 0.0)],
                        issues=parsed.issues)
        return self.finish(result, selection, spec, [], options)

    # -- the chain -------------------------------------------------------------------------

    def chain(self, inputs: Mapping[str, Any], model: str | None, fallbacks: Sequence[str] | None) -> list[str]:
        """The models to try, in order, after the input rules passed (no model is called otherwise)."""
        self.check_inputs(inputs)
        preferences = fallbacks if fallbacks is not None else self.preferences()
        chain = list(dict.fromkeys(([model] if model else []) + list(preferences)))
        if not chain:
            raise UsageError(Problem(f"{self.name}: no model to run",
                                     hint="pass model=... or set model_preferences"))
        return chain

    def check_inputs(self, inputs: Mapping[str, Any]) -> AgentSpec | None:
        """Apply the agent's input rules (raising GuardrailError); returns its spec."""
        spec = self.spec
        if spec is not None:
            from rosetta.runtime.guardrails import check_inputs

            check_inputs(spec.guardrails.input_validation, spec.input_names, inputs, self.name,
                         source=self.source)
        return spec

    def steps(self, inputs: Mapping[str, Any], chain: list[str], options: RunOptions,
              messages: list[dict[str, Any]] | None) -> Generator[Any, Any, Result[Any]]:
        """The whole run as plan steps: each model of ``chain`` in turn, on its own selected prompt,
        until one answers; returns the finished Result or raises ModelCallError."""
        from rosetta.runtime.invoke import plan
        from rosetta.runtime.log_redaction import redacting_logs
        from rosetta.runtime.tracing import span

        spec, state = self.spec, _ChainState(self.model)
        with span("rosetta.run", **{"rosetta.agent": self.name, "gen_ai.request.model": chain[0]}) as current, \
                redacting_logs():  # litellm's, openai's and httpx's DEBUG records quote inputs and answers
            for name in chain:
                selection = self.selector.select(name, None, options.user_id)
                if state.too_small(selection):
                    continue
                try:
                    result = yield from plan(selection.prompt, inputs,
                                             **self.plan_options(selection, options, messages))
                except ModelCallError as error:
                    self._record_failure(error, selection, state)
                    continue
                return _traced(current, self.finish(result, selection, spec, state.attempts, options))
            raise state.error(self.name, ErrorKind.EXHAUSTED)

    def plan_options(self, selection: Selection, options: RunOptions,
                     messages: list[dict[str, Any]] | None) -> dict[str, Any]:
        """The keyword arguments of :func:`~rosetta.runtime.invoke.plan` for one model: the model's
        own endpoint and key (the caller's ``api_base`` / ``api_key`` win), ``extra`` where it
        replaces nothing the compiled prompt set, then ``overrides``."""
        from rosetta.runtime.options import request_params

        retries = options.validation_retries
        if retries is None:
            retries = default_validation_retries(selection.prompt)
        params = request_params(options, selection.prompt.request_parameters())
        model = self.model(selection.model)
        if model.provider == "local":  # the project's weights, cache and threads, wherever the process stands
            params["metadata"] = self.local.metadata(params.get("metadata"))
        try:
            connection = model.connection()
        except MissingCredentials as missing:
            if options.api_key is None:  # nothing was sent: the next model of the chain is tried
                raise ModelCallError(missing.problems, [], ErrorKind.CREDENTIALS, missing.variables) from None
            base = model.endpoint.url(model.id) if model.endpoint is not None else None
            connection = {"api_base": base} if base else {}
        return {"artifact": selection.artifact_id, "policy": options.retry_policy(), "validation_retries": retries,
                "retry_temperature": options.retry_temperature, "output_model": self.output_model(selection),
                "params": {**connection, **options.connection(), **params}, "messages": messages,
                "limiter": options.limiter or self.traffic.limiter, "health": options.health or self.traffic.health,
                "toolbox": self.toolbox(selection.prompt, options)}

    def toolbox(self, prompt: RenderedPrompt, options: RunOptions) -> ToolBox:
        """The tools this run may call on ``prompt``: those it declares, less any
        ``capabilities.allowed_tools`` leaves out, with the caller's functions; a function for a
        tool the definition does not declare is a UsageError before anything is sent."""
        from rosetta.runtime.tools import ToolBox

        schemas = {spec.name: spec.parameters for spec in prompt.tool_specs}
        functions = dict(options.tools or {})
        unknown = sorted(set(functions) - set(schemas))
        if unknown:
            raise UsageError(Problem(f"{self.name} declares no tool {unknown[0]!r}; only declared tools run",
                                     field=f"tools.{unknown[0]}", expected=", ".join(sorted(schemas)) or "no tools",
                                     hint="declare it under `tools:` in the definition (name, description, "
                                          "parameters), or leave it out of tools="))
        allowed = set(schemas)
        spec = self.spec
        if spec is not None and spec.capabilities.allowed_tools:
            allowed &= set(spec.capabilities.allowed_tools)
        return ToolBox(schemas, frozenset(allowed), functions, options.max_tool_steps, options.max_tool_errors)

    def finish(self, result: Result[Any], selection: Selection, spec: AgentSpec | None, attempts: list[Attempt],
               options: RunOptions) -> Result[Any]:
        """The Result as the caller gets it: earlier attempts first, who answered, output rules
        applied (credentials redacted from every field the model wrote, not only ``raw``), and the
        agent's fallback_behavior for invalid answers."""
        from rosetta.runtime.answers import read_answer
        from rosetta.runtime.guardrails import NO_SECRETS, apply_output_rules
        from rosetta.runtime.invoke import typed

        rules = spec.guardrails.output_rules if spec is not None else ()
        on_secret = options.on_secret
        raw, post_checks = apply_output_rules(rules, result.raw, on_secret=on_secret)
        result = replace(result, attempts=attempts + result.attempts, agent=self.name, version=selection.version,
                         project=str(self.root), arm=selection.arm, experiment=selection.experiment,
                         overrides=dict(options.overrides), post_checks=post_checks)
        if any(rule.rule == NO_SECRETS for rule in rules):
            raw, result = _redact_beyond_raw(result, raw, on_secret, selection.prompt)
        if raw != result.raw and result.wants_tools:  # the text beside a request for tools: no answer to read
            result = replace(result, raw=raw, logprobs=None)
        elif raw != result.raw:
            output, redacted = typed(self.output_model(selection), read_answer(raw, selection.prompt))
            result = replace(result, output=output, raw=raw, data=redacted.data, issues=redacted.issues,
                             logprobs=None)  # its tokens spell what was redacted
        return result if result.valid else self._on_invalid(result, spec)

    def model(self, model_id: str) -> CatalogModel:
        """``model_id``'s entry in the project's catalog, as the selector resolved it."""
        if model_id not in self._targets:
            self._targets[model_id] = self.selector.target(model_id)
        return self._targets[model_id]

    def output_model(self, selection: Selection) -> type[BaseModel] | None:
        """The pydantic model typing the selected prompt's answers, once per schema: the agent's
        ``output_type`` (checked against the schema), else one built from the schema."""
        schema = selection.prompt.output_schema
        if schema is None and self.output_type is None:
            return None
        key = repr(sorted((schema or {}).items()))
        if key not in self._models:
            if self.output_type is not None:
                from rosetta.runtime.output_type import check_output_type

                check_output_type(self.output_type, schema, agent=self.name,
                                  source=selection.artifact or (str(self.source) if self.source else None))
                self._models[key] = self.output_type
            else:
                from rosetta.schema_types import model_from_schema

                self._models[key] = model_from_schema(schema or {}, name="Output")
        return self._models[key]

    def _record_failure(self, error: ModelCallError, selection: Selection, state: _ChainState) -> None:
        state.attempts += error.attempts
        state.kinds.append(error.kind)
        state.missing += error.missing
        state.failures.append(Problem(error.problems[0].message if error.problems[0].message.startswith(
            selection.model) else f"{selection.model}: {error.problems[0].message}", field="model",
            hint=error.problems[0].hint))
        if error.kind is ErrorKind.HARD:  # the request itself was refused: another model would not fix it
            raise state.error(self.name, ErrorKind.HARD) from None
        if error.kind is ErrorKind.CONTEXT:
            window = self.model(selection.model).context_window
            state.overflow_window = max(state.overflow_window or 0, window)
        log.warning("%s: %s; trying the next model", self.name, error.problems[0].message)

    def _on_invalid(self, result: Result[Any], spec: AgentSpec | None) -> Result[Any]:

        behaviour = spec.guardrails.fallback_behavior.value if spec is not None else "warn_and_retry"
        issues = "; ".join(f"{i.path}: {i.message}" for i in result.issues)
        if behaviour == "warn_and_halt":
            raise ModelCallError(Problem(f"{self.name} on {result.model}: the answer never validated: {issues}",
                                         hint="guardrails.fallback_behavior is warn_and_halt"),
                                 result.attempts, ErrorKind.INVALID)
        log.warning("%s on %s: returning an answer that does not validate (%s)", self.name, result.model,
                    issues, extra={"rosetta_event": INVALID_ANSWER})
        return replace(result, escalated=behaviour == "escalate_to_user")


def _redact_beyond_raw(result: Result[Any], raw: str, on_secret: str,
                       prompt: RenderedPrompt) -> tuple[str, Result[Any]]:
    """Under ``no_secrets_in_output``, the rest of what the model wrote: its tool calls, the
    provider state (reasoning text, thinking blocks) and the decoded answer, where a JSON escape
    (``AKIA\\u0049...``) can hide a key from ``raw``. Redacts them, or raises GuardrailError with
    ``on_secret="fail"``; returns the answer text to keep (re-encoded from the redacted data when
    only the decoded data showed a key) and the Result with those fields redacted."""
    import json

    from rosetta.runtime.answers import decode_json, read_answer
    from rosetta.runtime.guardrails import GuardrailError
    from rosetta.runtime.secrets import find_secrets_in, redact_data

    decoded = result.data if result.data is not None else decode_json(raw)[0]  # also beside a request for tools
    written = [call.get("arguments") for call in result.tool_calls]  # what the model wrote, not what tools returned
    kinds = find_secrets_in([decoded, written, result.state])
    if not kinds:
        return raw, result
    if on_secret == "fail":
        raise GuardrailError(Problem(f"the answer contains credentials ({', '.join(kinds)})",
                                     field="guardrails.output_filtering",
                                     hint="the answer was discarded; nothing was returned"))
    result = replace(result, tool_calls=redact_data(result.tool_calls), state=redact_data(result.state), logprobs=None)
    if isinstance(decoded, str) or not find_secrets_in(read_answer(raw, prompt).data):
        return raw, result  # the data is the text, or what `raw` decodes to now that its keys are redacted
    return json.dumps(redact_data(decoded), ensure_ascii=False), result


def _redacted(text: Generator[str, None, Any]) -> Generator[str, None, Any]:
    """``text`` with credentials redacted as it streams, a key split across chunks included (the
    end held back, at most, is sent when the run ends); returns what ``text`` returns."""
    from rosetta.runtime.secrets import SecretStream

    secrets = SecretStream()
    while True:
        try:
            chunk = next(text)
        except StopIteration as done:
            rest = secrets.flush()
            if rest:
                yield rest
            return done.value
        sent = secrets.feed(chunk)
        if sent:
            yield sent


async def _aredacted(text: AsyncGenerator[str | Finished, None]) -> AsyncGenerator[str | Finished, None]:
    """:func:`_redacted` for an asynchronous stream: the held-back end is sent before its Finished."""
    from rosetta.runtime.secrets import SecretStream

    secrets = SecretStream()
    async for chunk in text:
        if isinstance(chunk, Finished):
            rest = secrets.flush()
            if rest:
                yield rest
            yield chunk
            return
        sent = secrets.feed(chunk)
        if sent:
            yield sent


def _traced(current: Span | None, result: Result[Any]) -> Result[Any]:
    """Record a run's outcome on its ``rosetta.run`` span (a no-op without OpenTelemetry)."""
    from rosetta.runtime.tracing import annotate, usage_attributes

    annotate(current, **{"gen_ai.response.model": result.model, "rosetta.artifact_id": result.artifact,
                         "rosetta.attempts": len(result.attempts), "rosetta.valid": result.valid,
                         "rosetta.latency_s": result.latency_s, **usage_attributes(result.usage, result.cost)})
    return result
