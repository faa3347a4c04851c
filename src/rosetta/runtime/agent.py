"""Picking the prompt for the active model at run time.

``rosetta.load("triage")`` finds the agent's definition and its compiled artifacts; ``prompt_for``
returns, in this order: the artifact for the exact model, an artifact for another model of the same
family, one for the same provider, or the uncompiled RCCF render of the definition. An artifact is
used only when its seal matches and its source files are unchanged; every fallback is logged once
per (agent, model) with its reason, and ``strict`` turns fallbacks into errors.

A ``<model>.rollout.yaml`` beside the exact model's artifact pins which version serves, and may run
an experiment: ``prompt_for(model, user_id=...)`` then gives each user the control or treatment
version, always the same one (see :mod:`rosetta.rollout.routing`). A rollout file that cannot be
used is logged and ignored, never fatal (except in strict mode).

Nothing here imports pydantic, litellm, dspy, optuna or datasets unless the uncompiled fallback is
needed; selected prompts are cached, so repeated calls do no file I/O.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rosetta.compile.artifact import Artifact, ArtifactError, artifact_path, parse_artifact
from rosetta.errors import Location, Problem, RolloutError, UsageError
from rosetta.providers.catalog import CatalogModel, load_catalog
from rosetta.render.prompt import RenderedPrompt
from rosetta.runtime.project import ProjectDirs, project_dirs

log = logging.getLogger("rosetta.runtime")

_MODEL_LINE = re.compile(r"^model: (\S+)$", re.MULTILINE)
_NAME_SUFFIXES = (".md", ".agent.yaml", ".agent.yml", ".markdown")


@dataclass(frozen=True)
class Selection:
    """Which prompt the runtime uses for a model, and why."""

    model: str
    kind: str  # "artifact" | "family" | "provider" | "uncompiled"
    artifact: str | None
    reason: str
    prompt: RenderedPrompt
    artifact_id: str = ""  # the artifact's content_sha256, or "fallback: <reason>"
    version: str | None = None  # the content_sha256 of the artifact used; None for the uncompiled render
    arm: str | None = None  # "control" | "treatment" when an experiment routed the caller
    experiment: str | None = None  # that experiment's id


class Agent:
    """A loaded agent: its definition file, its artifacts, and the prompts chosen so far."""

    def __init__(self, name: str, definition_path: Path | None, dirs: ProjectDirs, strict: bool) -> None:
        self.name = name
        self.definition_path = definition_path
        self.dirs = dirs
        self.strict = strict
        self._artifacts = _index_artifacts(dirs.compiled_dir / name)  # model id → path (no parsing yet)
        self._routes: dict[tuple[str, bool], Any] = {}  # (model, strict) → rosetta.rollout.routing.Route
        self._verified: dict[Path, Artifact | str] = {}  # path → artifact, or why it cannot be used
        self._spec: Any = None
        self._models: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, artifacts={sorted(self._artifacts)})"

    @property
    def artifacts(self) -> dict[str, Path]:
        """Compiled artifacts found for this agent, by model id."""
        return dict(self._artifacts)

    def prompt_for(self, model: str, *, strict: bool | None = None, user_id: object | None = None) -> RenderedPrompt:
        """The prompt to send to ``model`` (see the module docstring for the order); during an
        experiment, the version of ``user_id``'s arm."""
        return self._select(model, strict, user_id).prompt

    def _select(self, model: str, strict: bool | None, user_id: object | None = None) -> Selection:
        key = (model, self.strict if strict is None else strict)
        route = self._routes.get(key)
        if route is None:
            route = self._routes[key] = self._route(model, key[1])
        return route.pick(user_id)

    @property
    def spec(self) -> Any:
        """The definition's frontmatter (parsed on first use; None for artifact-only agents)."""
        if self._spec is None and self.definition_path is not None:
            from rosetta.definition.loader import load_definition

            self._spec = load_definition(self.definition_path, root=self.dirs.root).spec
            for rule in self._spec.guardrails.input_validation:  # said once per agent, not per call
                reason = rule.unenforced(self._spec.input_names)
                if reason:
                    log.warning("%s: input rule %r is not enforced: %s", self.name, rule.rule or rule.field, reason)
        return self._spec

    def model_chain(self) -> list[str]:
        """Models to try, in order: the definition's preferences (or model), else the compiled ones."""
        spec = self.spec
        if spec is not None:
            own = [spec.model] if spec.model and spec.model != "inherit" else []  # Claude Code's "inherit": none
            chain = list(spec.portability.model_preferences) or own
            if chain:
                return chain
        return sorted(self._artifacts)

    def run(self, inputs: Mapping[str, Any], model: str | None = None, *, fallbacks: list[str] | None = None,
            record_dir: str | os.PathLike[str] | None = None, complete: Any = None, user_id: object | None = None,
            **options: Any) -> Any:
        """Answer ``inputs``: the first model of the chain that succeeds, each with its own prompt.

        Transient errors retry with backoff, then move to the next model (``fallbacks`` or the
        remaining model preferences), re-selecting that model's own compiled prompt; hard errors
        (authentication, bad request, content policy) stop at once; providers cooling down after
        repeated failures are skipped. Options: ``policy`` (RetryPolicy), ``validation_retries``,
        ``retry_temperature``, ``on_secret`` ("redact" | "fail"), ``limiter``, ``health``; any other
        keyword goes to litellm. ``model="manual"`` is :meth:`run_manual`; ``record_dir`` writes
        the prompt, the raw answer and the conversation JSON there. Returns a ``Result``.

        ``review=RUBRIC`` (criteria as lines, a list, or a :class:`~rosetta.runtime.review.Rubric`)
        has the project's rubric-reviewer grade the answer (on ``review_model``, default the model
        that answered) into ``Result.review``; with ``retry_once=True`` a failed review regenerates
        once on the same model, with the reviewer's issues and suggested fixes injected, and the
        second answer is reviewed again (``Result.retried``).

        ``user_id`` puts the caller in an experiment's arm (see :meth:`prompt_for`); the Result says
        which (``arm``, ``experiment``) and which version answered (``version``).
        """
        review, retry_once = options.pop("review", None), bool(options.pop("retry_once", False))
        review_model = options.pop("review_model", None)
        if retry_once and review is None:
            raise UsageError(Problem("retry_once needs a rubric to review against", field="review",
                                     hint="pass review=[...criteria...] as well"))
        if model == "manual":
            return self.run_manual(inputs, model=fallbacks[0] if fallbacks else None, user_id=user_id, **options)
        if record_dir is not None:
            result = self.chat(model, fallbacks=fallbacks, record_dir=record_dir, user_id=user_id).send(
                inputs, complete=complete, **options)
        else:
            chain, spec = self._start(inputs, model, fallbacks)
            complete = complete or self._litellm().completion
            result = self._run_chain(inputs, chain, spec, complete=complete, user_id=user_id, **options)
        if review is None:
            return result
        return self._reviewed(result, inputs, review, review_model, retry_once, complete, options, user_id)

    def _reviewed(self, result: Any, inputs: Mapping[str, Any], rubric: Any, review_model: str | None,
                  retry_once: bool, complete: Any, options: Mapping[str, Any], user_id: object | None = None) -> Any:
        """Generate → review → retry: grade ``result``; on a failed review, regenerate once with the
        reviewer's critique in the conversation and grade the new answer."""
        from rosetta.runtime.review import Reviewer, Rubric

        rubric = Rubric.of(rubric)
        reviewer = Reviewer(self.dirs.root, review_model or result.model, complete=complete)
        task = f"{self.name}: {self.spec.description}" if self.spec is not None else self.name
        result.review = reviewer.review(result.data if result.data is not None else result.raw, rubric,
                                        context=task)
        if result.review.passed or not retry_once:
            return result
        prompt = self._select(result.model, None, user_id).prompt
        messages = [*prompt.messages(inputs), {"role": "assistant", "content": result.raw or ""},
                    {"role": "user", "content": result.review.feedback()}]
        retried = self._run_chain(inputs, [result.model], self.spec, complete=complete or self._litellm().completion,
                                  messages=messages, user_id=user_id, **options)
        retried.attempts = result.attempts + retried.attempts
        retried.review = reviewer.review(retried.data if retried.data is not None else retried.raw, rubric,
                                         context=task)
        retried.retried = True
        retried.first_review = result.review
        return retried

    async def arun(self, inputs: Mapping[str, Any], model: str | None = None, *, fallbacks: list[str] | None = None,
                   record_dir: str | os.PathLike[str] | None = None, acomplete: Any = None,
                   user_id: object | None = None, **options: Any) -> Any:
        """:meth:`run` for asyncio (litellm's ``acompletion``; same retries, fallbacks and Result)."""
        if model == "manual":
            raise UsageError(Problem("manual mode waits for a person: use run(..., model='manual'), not arun",
                                     field="model"))
        if record_dir is not None:
            return await self.chat(model, fallbacks=fallbacks, record_dir=record_dir, user_id=user_id).asend(
                inputs, acomplete=acomplete, **options)
        chain, spec = self._start(inputs, model, fallbacks)
        return await self._arun_chain(inputs, chain, spec, acomplete=acomplete or self._litellm().acompletion,
                                      user_id=user_id, **options)

    def run_prompt(self, prompt: RenderedPrompt, inputs: Mapping[str, Any], *, complete: Any = None,
                   label: str = "candidate", **options: Any) -> Any:
        """Answer ``inputs`` with an explicit ``prompt`` on its own model, and no fallback chain.

        The same input guardrails, retries, validation and output rules as :meth:`run`: the
        optimizer scores candidate prompts here, so a prompt scores the same at compile time as
        it does when the runtime later selects it from its artifact.
        """
        from rosetta.runtime.invoke import invoke

        spec = self.spec
        if spec is not None:
            from rosetta.runtime.guardrails import check_inputs

            check_inputs(spec.guardrails.input_validation, spec.input_names, inputs, self.name)
        selection = Selection(model=prompt.model, kind=label, artifact=None, reason=label, prompt=prompt,
                              artifact_id=label)
        result = invoke(prompt, inputs, complete=complete or self._litellm().completion,
                        **self._options(selection, options, None))
        return self._finish(result, selection, spec, [], options)

    def chat(self, model: str | None = None, *, fallbacks: list[str] | None = None,
             record_dir: str | os.PathLike[str] | None = None,
             resume: str | os.PathLike[str] | Mapping[str, Any] | None = None, user_id: object | None = None) -> Any:
        """A multi-turn :class:`~rosetta.runtime.conversation.Conversation` with this agent.

        Its first turn may fall back along the chain; every later turn stays on the model that
        answered it. ``resume`` continues a conversation saved as JSON (a path or the loaded dict);
        ``user_id`` keeps every turn on that user's experiment arm.
        """
        from rosetta.runtime.conversation import Conversation

        if resume is not None:
            return Conversation.resume(self, resume, record_dir=record_dir)
        return Conversation(self, model=model, fallbacks=fallbacks, record_dir=record_dir, user_id=user_id)

    def _run_chain(self, inputs: Mapping[str, Any], chain: list[str], spec: Any, *, complete: Any,
                   messages: list[dict[str, Any]] | None = None, user_id: object | None = None, **options: Any) -> Any:
        from rosetta.runtime.invoke import ModelCallError, invoke
        from rosetta.runtime.tracing import span

        state = _RunState()
        with span("rosetta.run", **{"rosetta.agent": self.name, "gen_ai.request.model": chain[0]}) as current:
            for name in chain:
                selection = self._select(name, None, user_id)
                if state.too_small(selection):
                    continue
                try:
                    result = invoke(selection.prompt, inputs, complete=complete,
                                    **self._options(selection, options, messages))
                except ModelCallError as error:
                    self._record_failure(error, selection, state)
                    continue
                return _traced(current, self._finish(result, selection, spec, state.attempts, options))
            raise self._exhausted(state)

    async def _arun_chain(self, inputs: Mapping[str, Any], chain: list[str], spec: Any, *, acomplete: Any,
                          messages: list[dict[str, Any]] | None = None, user_id: object | None = None,
                          **options: Any) -> Any:
        from rosetta.runtime.invoke import ModelCallError, ainvoke
        from rosetta.runtime.tracing import span

        state = _RunState()
        with span("rosetta.run", **{"rosetta.agent": self.name, "gen_ai.request.model": chain[0]}) as current:
            for name in chain:
                selection = self._select(name, None, user_id)
                if state.too_small(selection):
                    continue
                try:
                    result = await ainvoke(selection.prompt, inputs, acomplete=acomplete,
                                           **self._options(selection, options, messages))
                except ModelCallError as error:
                    self._record_failure(error, selection, state)
                    continue
                return _traced(current, self._finish(result, selection, spec, state.attempts, options))
            raise self._exhausted(state)

    def run_manual(self, inputs: Mapping[str, Any], *, prompt_file: str | os.PathLike[str] | None = None,
                   answer: str | None = None, answer_file: str | os.PathLike[str] | None = None,
                   model: str | None = None, user_id: object | None = None) -> Any:
        """Manual (copy/paste) mode: write the readable prompt to ``prompt_file`` (default
        ``<agent>-prompt.md`` here), then read the answer from ``answer``, ``answer_file`` or standard
        input, and validate it like any other. ``model`` picks whose prompt is written."""
        import sys

        from rosetta.fileio import write_atomic
        from rosetta.runtime.answers import read_answer
        from rosetta.runtime.invoke import Attempt, Result

        chain, spec = self._start(inputs, model, None)
        selection = self._select(chain[0], None, user_id)
        prompt_file = Path(prompt_file or f"{self.name}-prompt.md")
        write_atomic(prompt_file, selection.prompt.render_for_display(inputs))
        log.info("%s: manual mode, prompt written to %s", self.name, prompt_file)
        if answer is None:
            answer = Path(answer_file).read_text(encoding="utf-8") if answer_file else sys.stdin.read()
        parsed = read_answer(answer, selection.prompt)
        output_model = self._output_model(selection)
        output = output_model.model_validate(parsed.data) if output_model and parsed.valid else parsed.data
        result = Result(output=output, raw=answer, data=parsed.data, model="manual", artifact=selection.artifact_id,
                        attempts=[Attempt("manual", "ok" if parsed.valid else "invalid", None, 0.0)],
                        issues=parsed.issues)
        return self._finish(result, selection, spec, [], {})

    def stream(self, inputs: Mapping[str, Any], model: str | None = None, *, complete: Any = None,
               user_id: object | None = None, **options: Any) -> Iterator[Any]:
        """Yield the answer's text as it arrives, then the final ``Result``.

        The first attempt on the first model streams. If it fails or its answer does not validate,
        the rest happens as in :meth:`run` (retries, corrections, fallbacks), and the Result that
        ends the stream is that run's, with the streamed attempt recorded first; text already
        yielded then belonged to the discarded attempt.
        """
        import time as clock

        from rosetta.runtime.answers import answer_text, read_answer
        from rosetta.runtime.invoke import Attempt, Result, classify
        from rosetta.runtime.limits import credential_key
        from rosetta.runtime.tracing import span

        chain, spec = self._start(inputs, model, options.get("fallbacks"))
        complete = complete or self._litellm().completion
        selection = self._select(chain[0], None, user_id)
        plan_options = self._options(selection, options, None)
        kwargs = {**selection.prompt.to_litellm(inputs), **plan_options["params"], "stream": True, "num_retries": 0,
                  "max_retries": 0}
        limiter, health, endpoint = plan_options["limiter"], plan_options["health"], credential_key(kwargs)
        if health.cooling(endpoint):  # run() records the skip and goes down the chain
            yield self.run(inputs, model, complete=complete, user_id=user_id, **options)
            return
        reservation = limiter.reserve(kwargs, selection.prompt.tokens.get("total", 0))
        if reservation is not None and reservation.wait:
            clock.sleep(reservation.wait)
        began = clock.monotonic()
        text, tool_arguments = [], []
        with span("rosetta.llm_call", **{"gen_ai.request.model": selection.prompt.model, "rosetta.attempt": 1,
                                         "rosetta.artifact_id": selection.artifact_id, "rosetta.stream": True}):
            try:
                for chunk in complete(**kwargs):
                    delta = chunk.choices[0].delta
                    if getattr(delta, "content", None):
                        text.append(delta.content)
                        yield delta.content
                    for call in getattr(delta, "tool_calls", None) or []:
                        if call.function and call.function.arguments:
                            tool_arguments.append(call.function.arguments)
                outcome, error = "ok", None
            except Exception as failure:  # classified like any call; the run below retries
                outcome, error = classify(failure), f"{type(failure).__name__}"
        limiter.settle(reservation, None)
        if outcome in ("ok", "transient"):
            health.record(endpoint, failed=outcome == "transient")
        first = Attempt(selection.prompt.model, outcome, error, clock.monotonic() - began)
        if outcome == "ok":
            from rosetta.render.prompt import RESPOND_TOOL

            message = {"content": "".join(text), "tool_calls": [
                {"function": {"name": RESPOND_TOOL, "arguments": "".join(tool_arguments)}}] if tool_arguments else []}
            answer = read_answer(answer_text(message, selection.prompt), selection.prompt)
            if answer.valid:
                output_model = self._output_model(selection)
                output = output_model.model_validate(answer.data) if output_model and answer.data is not None \
                    else answer.data
                result = Result(output=output, raw=answer.raw, data=answer.data, model=selection.prompt.model,
                                artifact=selection.artifact_id, attempts=[first], latency_s=first.latency_s)
                yield self._finish(result, selection, spec, [], options)
                return
            first = Attempt(first.model, "invalid", "; ".join(f"{i.path}: {i.message}" for i in answer.issues),
                            first.latency_s)
        result = self.run(inputs, model, complete=complete, user_id=user_id, **options)
        result.attempts = [first, *result.attempts]
        yield result

    # -- run internals -----------------------------------------------------------------------

    @staticmethod
    def _litellm() -> Any:
        from rosetta.providers.litellm_offline import import_litellm

        return import_litellm()

    def _start(self, inputs: Mapping[str, Any], model: str | None, fallbacks: list[str] | None) -> tuple[list, Any]:
        from rosetta.runtime.guardrails import check_inputs

        spec = self.spec
        if spec is not None:
            check_inputs(spec.guardrails.input_validation, spec.input_names, inputs, self.name)
        preferences = fallbacks if fallbacks is not None else self.model_chain()
        chain = list(dict.fromkeys(([model] if model else []) + list(preferences)))
        if not chain:
            raise UsageError(Problem(f"{self.name}: no model to run", hint="pass model=... or set model_preferences"))
        return chain, spec

    def _options(self, selection: Selection, options: Mapping[str, Any],
                 messages: list[dict[str, Any]] | None) -> dict[str, Any]:
        """The keyword arguments of :func:`~rosetta.runtime.invoke.plan` for one model."""
        from rosetta.runtime.health import shared_health
        from rosetta.runtime.invoke import RetryPolicy
        from rosetta.runtime.limits import shared_limiter

        retries = options.get("validation_retries")
        if retries is None:
            retries = default_validation_retries(selection.prompt)
        params = {k: v for k, v in options.items() if k not in _RUN_OPTIONS}
        return {"artifact": selection.artifact_id, "policy": options.get("policy") or RetryPolicy(),
                "validation_retries": retries, "retry_temperature": options.get("retry_temperature", 0.2),
                "output_model": self._output_model(selection), "params": params, "messages": messages,
                "limiter": options.get("limiter") or shared_limiter(),
                "health": options.get("health") or shared_health()}

    def _record_failure(self, error: Any, selection: Selection, state: _RunState) -> None:
        from rosetta.runtime.invoke import ModelCallError

        state.attempts += error.attempts
        if error.kind == "hard":
            raise ModelCallError(error.problems, state.attempts, "hard") from None
        if error.kind == "context":
            window = load_catalog().resolve(selection.model).context_window
            state.overflow_window = max(state.overflow_window or 0, window)
        state.failures.append(f"{selection.model}: {error.problems[0].message}")
        log.warning("%s: %s; trying the next model", self.name, error.problems[0].message)

    def _exhausted(self, state: _RunState) -> Exception:
        from rosetta.runtime.invoke import ModelCallError

        return ModelCallError(Problem(f"{self.name}: every model failed: " + "; ".join(state.failures),
                                      hint="check the providers' status, or add fallbacks"), state.attempts,
                              "exhausted")

    def _finish(self, result: Any, selection: Selection, spec: Any, attempts: list, options: Mapping[str, Any]) -> Any:
        from rosetta.runtime.answers import read_answer
        from rosetta.runtime.guardrails import apply_output_rules

        result.attempts = attempts + result.attempts
        result.agent, result.version = self.name, selection.version
        result.arm, result.experiment = selection.arm, selection.experiment
        rules = tuple(spec.guardrails.output_filtering) if spec is not None else ()
        raw, result.post_checks = apply_output_rules(rules, result.raw, on_secret=options.get("on_secret", "redact"))
        if raw != result.raw:
            redacted = read_answer(raw, selection.prompt)
            output_model = self._output_model(selection)
            result.raw, result.data, result.output = raw, redacted.data, redacted.data
            if output_model is not None and redacted.valid:
                result.output = output_model.model_validate(redacted.data)
        if not result.valid:
            self._on_invalid(result, spec)
        return result

    def _output_model(self, selection: Selection) -> Any:
        schema = selection.prompt.output_schema
        if schema is None:
            return None
        key = repr(sorted(schema.items()))
        if key not in self._models:
            from rosetta.schema_types import model_from_schema

            self._models[key] = model_from_schema(schema, name="Output")
        return self._models[key]

    def _on_invalid(self, result: Any, spec: Any) -> None:
        from rosetta.runtime.invoke import ModelCallError

        behaviour = spec.guardrails.fallback_behavior.value if spec is not None else "warn_and_retry"
        issues = "; ".join(f"{i.path}: {i.message}" for i in result.issues)
        if behaviour == "warn_and_halt":
            raise ModelCallError(Problem(f"{self.name} on {result.model}: the answer never validated: {issues}",
                                         hint="guardrails.fallback_behavior is warn_and_halt"),
                                 result.attempts, "invalid")
        result.escalated = behaviour == "escalate_to_user"
        log.warning("%s on %s: returning an answer that does not validate (%s)", self.name, result.model, issues,
                    extra={"rosetta_event": INVALID_ANSWER})

    def explain(self, model: str, *, strict: bool | None = None, user_id: object | None = None) -> Selection:
        """Choose (without caching) and say why; raises in strict mode when it would fall back."""
        return self._route(model, self.strict if strict is None else strict).pick(user_id)

    def _route(self, model: str, strict: bool) -> Any:
        """What ``model`` serves: the versions its rollout file pins, else what :meth:`_choose` picks."""
        from rosetta.rollout.routing import Route, read_pins
        from rosetta.rollout.versions import short_id

        target = load_catalog().resolve(model)
        pins = read_pins(artifact_path(self.dirs.compiled_dir, self.name, target.id), agent=self.name,
                         model=target.id)
        if pins is not None and pins.problems:
            if strict:
                raise RolloutError([*pins.problems, Problem(f"{self.name} on {target.id}: the rollout file cannot be "
                                                            "used", Location(str(pins.file)),
                                                            hint="fix it, or load without strict=True to ignore it")])
            log.warning("%s on %s: %s", self.name, target.id, pins.explain_problems())
        if pins is None or pins.active is None:
            return Route(self._choose(target, strict))
        served, path = pins.active
        reason = f"version {short_id(served.content_sha256)} is active in {pins.file.name}"
        if pins.current not in (None, served.content_sha256) and (
                pins.treatment is None or pins.current != pins.treatment[0].content_sha256):
            reason += (f" (the compiled artifact, {short_id(pins.current)}, is not served: start an experiment "
                       "with it or promote it)")
        active = Selection(target.id, "artifact", str(path), reason, served.prompt, served.content_sha256,
                           served.content_sha256)
        if pins.experiment is None or pins.treatment is None:
            return Route(active)
        experiment, (treated, treated_path) = pins.experiment, pins.treatment
        control = replace(active, arm="control", experiment=experiment.id,
                          reason=f"{reason}; the control arm of experiment {experiment.id}")
        active = replace(active, reason=f"{reason}; experiment {experiment.id} gives version "
                                        f"{short_id(treated.content_sha256)} to {experiment.share:.0%} of users "
                                        "(by user_id; calls without one get the active version)")
        treatment = Selection(target.id, "artifact", str(treated_path),
                              f"version {short_id(treated.content_sha256)} is the treatment arm of experiment "
                              f"{experiment.id} in {pins.file.name}", treated.prompt, treated.content_sha256,
                              treated.content_sha256, "treatment", experiment.id)
        return Route(active, experiment, control, treatment)

    def _choose(self, target: CatalogModel, strict: bool) -> Selection:
        """The artifact for the exact model, its family or provider, else the uncompiled render."""
        reasons: list[str] = []
        for kind, model_id, path in self._candidates(target):
            artifact = self._verify(path)
            if isinstance(artifact, str):
                reasons.append(f"{path.name} for {model_id}: {artifact}")
                continue
            if kind == "artifact":
                return Selection(target.id, kind, str(path), "compiled artifact for this model", artifact.prompt,
                                 artifact.content_sha256, artifact.content_sha256)
            reason = (f"no usable artifact for {target.id}"
                      + (f" ({'; '.join(reasons)})" if reasons else "") + f"; using the {kind} artifact for {model_id}")
            self._fallback(target.id, reason, strict)
            return Selection(target.id, kind, str(path), reason, _retarget(artifact.prompt, target),
                             artifact.content_sha256, artifact.content_sha256)
        reason = (f"no usable compiled artifact for {target.id}" + (f" ({'; '.join(reasons)})" if reasons else "")
                  + "; rendering the definition uncompiled")
        self._fallback(target.id, reason, strict)
        return Selection(target.id, "uncompiled", None, reason, self._render_uncompiled(target),
                         f"fallback: {reason}")

    # -- internals ---------------------------------------------------------------------------

    def _candidates(self, target: CatalogModel) -> list[tuple[str, str, Path]]:
        names = load_catalog().names()
        exact, family, provider = [], [], []
        for model_id, path in sorted(self._artifacts.items()):
            if model_id == target.id:
                exact.append(("artifact", model_id, path))
                continue
            other = names.get(model_id.lower())
            if other is not None and other.family == target.family:
                family.append(("family", model_id, path))
            elif model_id.split("/", 1)[0] == target.provider:
                provider.append(("provider", model_id, path))
        return exact + family + provider

    def _verify(self, path: Path) -> Artifact | str:
        if path not in self._verified:
            self._verified[path] = self._check(path)
        return self._verified[path]

    def _check(self, path: Path) -> Artifact | str:
        try:
            artifact = parse_artifact(path.read_text(encoding="utf-8"), path=str(path))
        except (OSError, UnicodeDecodeError) as exc:
            return f"unreadable ({exc})"
        except ArtifactError as error:
            return error.problems[0].message
        digest = hashlib.sha256()
        for relative in artifact.provenance.source_files:
            try:
                digest.update((self.dirs.root / relative).read_bytes())
            except OSError:
                return f"stale: source file {relative} is missing"
            digest.update(b"\0")
        if digest.hexdigest() != artifact.provenance.source_sha256:
            return "stale: the definition changed since it was compiled"
        return artifact

    def _fallback(self, model: str, reason: str, strict: bool) -> None:
        if strict:
            raise ArtifactError(Problem(f"{self.name} on {model}: {reason}", Location(str(self.dirs.compiled_dir)),
                                        hint="run `rosetta compile`, or load without strict=True to allow fallbacks"))
        log.warning("%s on %s: %s", self.name, model, reason)

    def _render_uncompiled(self, target: CatalogModel) -> RenderedPrompt:
        if self.definition_path is None:
            raise UsageError(Problem(f"{self.name}: no definition found to render for {target.id}",
                                     Location(str(self.dirs.signatures_dir)),
                                     hint="load the agent by path, or compile it for this model"))
        from rosetta.definition.loader import load_definition
        from rosetta.render.render import render
        from rosetta.signature import lower

        return render(lower(load_definition(self.definition_path, root=self.dirs.root)), target)


def default_validation_retries(prompt: Any) -> int:
    """Corrections after an answer that does not validate, when the caller sets none: open models
    slip more often, so they get two; hosted ones get one."""
    return 2 if prompt.model_class == "open" else 1


INVALID_ANSWER = "invalid_answer"
"""The ``rosetta_event`` of the warning logged per answer that does not validate, so commands that
score many answers can count these warnings instead of printing each."""

_RUN_OPTIONS = {"fallbacks", "policy", "validation_retries", "retry_temperature", "on_secret", "limiter", "health"}
"""Keyword options of Agent.run that are not litellm parameters."""


def _traced(current: Any, result: Any) -> Any:
    """Record a run's outcome on its ``rosetta.run`` span (a no-op without OpenTelemetry)."""
    from rosetta.runtime.tracing import annotate, usage_attributes

    annotate(current, **{"gen_ai.response.model": result.model, "rosetta.artifact_id": result.artifact,
                         "rosetta.attempts": len(result.attempts), "rosetta.valid": result.valid,
                         "rosetta.latency_s": result.latency_s, **usage_attributes(result.usage, result.cost)})
    return result


@dataclass
class _RunState:
    """What one run has learned so far (kept per call: an Agent serves concurrent calls)."""

    attempts: list[Any] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    overflow_window: int | None = None  # the largest window that overflowed

    def too_small(self, selection: Selection) -> bool:
        """After a context-window overflow, skip models whose window is no larger."""
        if self.overflow_window is None:
            return False
        window = load_catalog().resolve(selection.model).context_window
        if window <= self.overflow_window:
            self.failures.append(f"{selection.model}: skipped, its {window:,}-token window is no larger than "
                                 "one that overflowed")
            return True
        return False


def _retarget(prompt: RenderedPrompt, target: CatalogModel) -> RenderedPrompt:
    """Another model's compiled prompt, sent to ``target`` (output limit clamped to it)."""
    generation = dict(prompt.generation)
    if generation.get("max_tokens", 0) > target.max_output:
        generation["max_tokens"] = target.max_output
    return replace(prompt, model=target.id, generation=generation)


def _apply_traffic_settings(dirs: ProjectDirs) -> None:
    """The project's rate limits and health policy, applied to the process-wide limiter and tracker."""
    from rosetta.runtime.health import HealthPolicy, shared_health
    from rosetta.runtime.limits import shared_limiter

    for name, limit in dirs.rate_limits.items():
        shared_limiter().configure(name, limit)
    if dirs.health != HealthPolicy():
        shared_health().policy = dirs.health


def _index_artifacts(directory: Path) -> dict[str, Path]:
    """model id → artifact path, read from each file's ``model:`` line (no full parse)."""
    from rosetta.rollout.versions import is_rollout_file

    found: dict[str, Path] = {}
    if not directory.is_dir():
        return found
    for path in sorted(directory.glob("*/*.yaml")):
        if is_rollout_file(path):  # beside the artifacts, but not one (retained versions sit a level deeper)
            continue
        try:
            with path.open(encoding="utf-8") as handle:
                head = handle.read(1024)
        except (OSError, UnicodeDecodeError):
            continue
        match = _MODEL_LINE.search(head)
        if match:
            found[match.group(1)] = path
    return found


def _find_definition(name: str, signatures_dir: Path) -> Path | None:
    """The definition of agent ``name``: by file name first, then by reading frontmatter names."""
    for suffix in _NAME_SUFFIXES:
        matches = sorted(signatures_dir.rglob(name + suffix)) if signatures_dir.is_dir() else []
        if matches:
            return matches[0]
    if not signatures_dir.is_dir():
        return None
    from rosetta.definition.loader import load_many

    for result in load_many([signatures_dir]):
        if result.definition is not None and result.definition.name == name:
            return result.path
    return None


def load(
    name_or_path: str | os.PathLike[str],
    *,
    project: str | os.PathLike[str] | None = None,
    signatures_dir: str | os.PathLike[str] | None = None,
    compiled_dir: str | os.PathLike[str] | None = None,
    strict: bool | None = None,
) -> Agent:
    """An agent by name (looked up in the configured ``signatures/`` and ``compiled/``) or by path."""
    dirs = project_dirs(project, signatures_dir=signatures_dir, compiled_dir=compiled_dir, strict=strict)
    _apply_traffic_settings(dirs)
    text = os.fspath(name_or_path)
    path = Path(text)
    if path.suffix or os.sep in text or "/" in text:
        if not path.is_file():
            raise UsageError(Problem("agent definition not found", Location(text), hint="check the path"))
        from rosetta.definition.loader import load_definition

        definition = load_definition(path, root=dirs.root)
        return Agent(definition.name, path, dirs, dirs.strict)
    definition_path = _find_definition(text, dirs.signatures_dir)
    agent = Agent(text, definition_path, dirs, dirs.strict)
    if definition_path is None and not agent.artifacts:
        raise UsageError(Problem(f"no agent named {text!r}", Location(str(dirs.signatures_dir)),
                                 hint=f"looked for a definition in {dirs.signatures_dir} and artifacts in "
                                      f"{dirs.compiled_dir / text}"))
    return agent
