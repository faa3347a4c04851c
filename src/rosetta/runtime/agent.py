"""``rosetta.load("triage")``: an agent by name or path, and the facade applications use.

``prompt_for(model)`` returns the prompt the :class:`~rosetta.runtime.selector.Selector` picks
(exact artifact ▸ family ▸ provider ▸ uncompiled render, with rollout pins and experiments);
``run`` / ``arun`` / ``stream`` / ``run_manual`` / ``run_prompt`` go through the one
:class:`~rosetta.runtime.runner.Runner`, with the project's own :class:`~rosetta.runtime.traffic.Traffic`
(rate limits and provider health); ``chat`` starts a multi-turn conversation.

Nothing here imports pydantic, litellm, dspy, optuna or datasets unless the uncompiled fallback is
needed; selected prompts are cached, so repeated calls do no file I/O.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from rosetta.errors import Location, Problem, RosettaError, UsageError
from rosetta.local.project import LocalSettings
from rosetta.render.prompt import RenderedPrompt
from rosetta.runtime.options import RunOptions, refuse_set
from rosetta.runtime.runner import Runner
from rosetta.runtime.selector import Selection, Selector
from rosetta.runtime.stream import Stream
from rosetta.runtime.traffic import traffic_for
from rosetta.runtime.result import OutputT
from rosetta.settings import Settings, load_settings

if TYPE_CHECKING:
    from rosetta.definition.models import AgentSpec
    from rosetta.runtime.conversation import Conversation
    from rosetta.runtime.result import Result
    from rosetta.runtime.review import Reviewer
    from rosetta.runtime.salvage import AComplete, Complete

log = logging.getLogger("rosetta.runtime")

_NAME_SUFFIXES = (".md", ".agent.yaml", ".agent.yml", ".markdown")
AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
"""What ``name:`` allows (see AgentSpec): a name can never climb out of ``compiled/`` or ``signatures/``."""
ReviewerT = TypeVar("ReviewerT", bound="Reviewer")
"""The class :func:`judge_reviewer` makes: :class:`~rosetta.runtime.review.Reviewer` or a subclass of it."""


class Agent(Generic[OutputT]):
    """A loaded agent: its definition file, its artifacts, and the prompts chosen so far. With an
    ``output_type`` (a pydantic model), valid answers are typed by it: ``Result[OutputT]``."""

    def __init__(self, name: str, definition_path: Path | None, dirs: Settings, strict: bool,
                 output_type: type[OutputT] | None = None) -> None:
        self.name = name
        self.output_type = output_type
        self.definition_path = definition_path
        self.dirs = dirs
        self.strict = strict
        self.selector = Selector(name, definition_path, dirs, strict)
        self.traffic = traffic_for(dirs)
        self.runner = Runner(name, self.selector, self.traffic, spec=lambda: self.spec, preferences=self.model_chain,
                             root=dirs.root, local=LocalSettings.of(dirs), source=definition_path,
                             output_type=output_type)
        self._spec: AgentSpec | None = None

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, artifacts={sorted(self.artifacts)})"

    @property
    def artifacts(self) -> dict[str, Path]:
        """Compiled artifacts found for this agent, by model id."""
        return dict(self.selector.shelf.artifacts)

    @property
    def spec(self) -> AgentSpec | None:
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
        return sorted(self.artifacts)

    def prompt_for(self, model: str, *, strict: bool | None = None, user_id: object | None = None) -> RenderedPrompt:
        """The prompt to send to ``model``; during an experiment, the version of ``user_id``'s arm."""
        return self.selector.select(model, strict, user_id).prompt

    def explain(self, model: str, *, strict: bool | None = None, user_id: object | None = None) -> Selection:
        """Choose now (not from the cache) and say why; raises in strict mode when it would fall back.
        The choice then serves later runs, so a run after it logs no fallback a second time."""
        selection: Selection = self.selector.fresh(model, self.strict if strict is None else strict).pick(user_id)
        return selection

    def run(self, inputs: Mapping[str, Any], model: str | None = None, options: RunOptions | None = None, *,
            complete: Complete | None = None, **keywords: Any) -> Result[OutputT]:
        """Answer ``inputs``: the first model of the chain that succeeds, each with its own prompt.

        Transient errors retry with backoff, then move to the next model (``fallbacks`` or the
        remaining model preferences), re-selecting that model's own compiled prompt; hard errors
        (authentication, bad request, content policy) stop at once; providers cooling down after
        repeated failures are skipped. ``options`` (a :class:`~rosetta.runtime.options.RunOptions`,
        or its fields as keywords, which replace its own) says how: retries, corrections, review,
        recording, experiment arm, endpoint, provider parameters (``extra``) and explicit
        ``overrides`` of compiled ones; any other keyword is a UsageError, raised before anything
        is sent. ``model="manual"`` is :meth:`run_manual` (its keywords included). ``complete`` replaces
        ``litellm.completion``. Returns a :class:`~rosetta.runtime.result.Result`.
        """
        if model == "manual":  # run_manual's own keywords (prompt_file, answer, answer_file) pass on
            return self.run_manual(inputs, options, complete=complete, **keywords)
        opts = RunOptions.of(options, keywords)
        self.check_review(opts)
        if opts.record_dir is not None:
            return self.chat(model, opts).send(inputs, complete=complete)
        result = self.runner.run(inputs, self.runner.chain(inputs, model, opts.fallbacks), opts, complete=complete)
        return self.reviewed(result, inputs, opts, complete=complete)

    async def arun(self, inputs: Mapping[str, Any], model: str | None = None, options: RunOptions | None = None, *,
                   acomplete: AComplete | None = None, **keywords: Any) -> Result[OutputT]:
        """:meth:`run` for asyncio (litellm's ``acompletion``; the same options, retries, fallbacks,
        review and Result). ``acomplete`` replaces ``litellm.acompletion``."""
        opts = RunOptions.of(options, keywords)
        if model == "manual":
            raise UsageError(Problem("manual mode waits for a person: use run(..., model='manual'), not arun",
                                     field="model"))
        self.check_review(opts)
        if opts.record_dir is not None:
            return await self.chat(model, opts).asend(inputs, acomplete=acomplete)
        chain = self.runner.chain(inputs, model, opts.fallbacks)
        result = await self.runner.arun(inputs, chain, opts, acomplete=acomplete)
        return await self.areviewed(result, inputs, opts, acomplete=acomplete)

    def stream(self, inputs: Mapping[str, Any], model: str | None = None, options: RunOptions | None = None, *,
               complete: Complete | None = None, acomplete: AComplete | None = None,
               **keywords: Any) -> Stream[OutputT]:
        """A :class:`~rosetta.runtime.stream.Stream`: iterate it (``for`` or ``async for``) for the
        answer's text as it arrives; ``.result()`` (``await .aresult()``) returns the Result.

        The first call streams, with exactly the request :meth:`run` would send, and the same
        options. If it fails or its answer does not validate, the rest happens as in :meth:`run`
        (retries, corrections, fallbacks, review), with the streamed attempt recorded first; text
        already read then belonged to the discarded attempt. Nothing runs before the first read.
        """
        opts = RunOptions.of(options, keywords)
        if model == "manual":
            raise UsageError(Problem("manual mode waits for a person: use run(..., model='manual'), not stream",
                                     field="model"))
        self.check_review(opts)
        if opts.record_dir is not None:
            return self.chat(model, opts).stream(inputs, complete=complete, acomplete=acomplete)
        chain = self.runner.chain(inputs, model, opts.fallbacks)
        return Stream(lambda: self.runner.text(inputs, chain, opts, complete=complete),
                      lambda: self.runner.atext(inputs, chain, opts, acomplete=acomplete),
                      lambda result: self.reviewed(result, inputs, opts, complete=complete),
                      lambda result: self.areviewed(result, inputs, opts, acomplete=acomplete))

    def run_prompt(self, prompt: RenderedPrompt, inputs: Mapping[str, Any], options: RunOptions | None = None, *,
                   complete: Complete | None = None, label: str = "candidate",
                   messages: list[dict[str, Any]] | None = None, **keywords: Any) -> Result[OutputT]:
        """Answer ``inputs`` with an explicit ``prompt`` on its own model, and no fallback chain (nor
        recording: ``record_dir`` is refused). ``messages`` replaces the messages rendered from
        ``inputs`` (an eval tool's own, e.g. promptfoo's); the prompt's parameters still apply."""
        opts = RunOptions.of(options, keywords)
        refuse_set(opts, ("fallbacks", "record_dir", "raw_transcripts"), "run_prompt",
                   "run_prompt sends one prompt to its own model and records nothing: use run() for {name}")
        return self.runner.run_prompt(prompt, inputs, opts, complete=complete, label=label, messages=messages)

    def run_manual(self, inputs: Mapping[str, Any], options: RunOptions | None = None, *,
                   prompt_file: str | os.PathLike[str] | None = None, answer: str | None = None,
                   answer_file: str | os.PathLike[str] | None = None, model: str | None = None,
                   complete: Complete | None = None, **keywords: Any) -> Result[OutputT]:
        """Manual (copy/paste) mode: write the readable prompt to ``prompt_file`` (default
        ``<agent>-prompt.md`` here), then read the answer from ``answer``, ``answer_file`` or standard
        input, and validate it like any other. ``model`` (default: the first of the chain) picks
        whose prompt is written. The options are those of :meth:`run`; those about calling a model
        (retries, endpoint, parameters) have nothing to do here, and a review (``review_model``,
        or the first model of the chain) grades the pasted answer."""
        opts = RunOptions.of(options, keywords)
        refuse_set(opts, ("extra", "overrides", "tools", "record_dir", "raw_transcripts"), "manual mode",
                   "manual mode sends nothing and records nothing; {name} has nothing to act on")
        if opts.retry_once:
            raise UsageError(Problem("retry_once regenerates the answer on its model; a pasted answer has none",
                                     field="retry_once", hint="review a manual answer without retry_once"))
        chain = self.runner.chain(inputs, model, opts.fallbacks)
        result = self.runner.run_manual(inputs, chain, opts, prompt_file=prompt_file, answer=answer,
                                        answer_file=answer_file)
        return self.reviewed(result, inputs, replace(opts, review_model=opts.review_model or chain[0]),
                             complete=complete)

    def chat(self, model: str | None = None, options: RunOptions | None = None, *,
             resume: str | os.PathLike[str] | Mapping[str, Any] | None = None, **keywords: Any) -> Conversation[OutputT]:
        """A multi-turn :class:`~rosetta.runtime.conversation.Conversation` with this agent.

        Its first turn may fall back along the chain; every later turn stays on the model that
        answered it. ``options`` apply to every turn (a turn's own replace them for that turn);
        ``resume`` continues a conversation saved as JSON (a path or the loaded dict);
        ``user_id`` keeps every turn on that user's experiment arm. ``record_dir`` records every
        turn there with credentials redacted; ``raw_transcripts=True`` records them as they were.
        """
        from rosetta.runtime.conversation import Conversation

        opts = RunOptions.of(options, keywords)
        if resume is not None:
            return Conversation.resume(self, resume, opts)
        return Conversation(self, model, opts)

    def reviewed(self, result: Result[OutputT], inputs: Mapping[str, Any], options: RunOptions, *,
                 messages: list[dict[str, Any]] | None = None, complete: Complete | None = None) -> Result[OutputT]:
        """``result`` graded against ``options.review`` by the project's rubric-reviewer (on
        ``review_model``, default the model that answered) into ``Result.review``; with
        ``retry_once`` a failed review regenerates once on the same model, with the reviewer's
        issues and suggested fixes injected after ``messages`` (default: the rendered turn), and
        the second answer is reviewed again (``Result.retried``). Without a review, or when the run
        ended asking for tools (no answer yet to grade), ``result``."""
        if options.review is None or result.wants_tools:
            return result
        from rosetta.runtime.review import review_and_retry
        from rosetta.runtime.verdicts import unreviewed
        from rosetta.runtime.rubric import Rubric

        model = options.review_model or result.model
        reviewer = judge_reviewer(self.dirs.root, model, complete=complete,
                                  connection=options.connection() if model == result.model else None)
        rubric = Rubric.of(options.review)
        try:
            return review_and_retry(self, result, inputs, rubric, options, reviewer=reviewer, messages=messages,
                                    complete=complete)
        except RosettaError as error:  # the answer is paid for: it is returned, ungraded, saying why
            reason = f"the review could not run: {str(error).strip().splitlines()[0]}"
            log.warning("%s: %s", self.name, reason)
            return replace(result, review=unreviewed(rubric, reason))

    def check_review(self, options: RunOptions) -> None:
        """A UsageError before any call when ``options`` asks for a review the project has no judge
        for (its rubric-reviewer agent)."""
        if options.review is not None:
            judge_reviewer(self.dirs.root, options.review_model or "").agent()

    async def areviewed(self, result: Result[OutputT], inputs: Mapping[str, Any], options: RunOptions, *,
                        messages: list[dict[str, Any]] | None = None,
                        acomplete: AComplete | None = None) -> Result[OutputT]:
        """:meth:`reviewed` for asyncio: the review runs in a worker thread (the reviewer is an
        agent run like any other), its calls through ``acomplete`` made on this event loop, which
        is never blocked."""
        if options.review is None or result.wants_tools:
            return result
        import asyncio

        loop = asyncio.get_running_loop()  # the judge's calls run on this loop, as the answer's did
        complete = None if acomplete is None else (
            lambda **kwargs: asyncio.run_coroutine_threadsafe(acomplete(**kwargs), loop).result())
        return await asyncio.to_thread(self.reviewed, result, inputs, options, messages=messages, complete=complete)


@overload
def judge_reviewer(root: Path, model: str, *, complete: Complete | None = None, kind: None = None,
                   connection: Mapping[str, str] | None = None) -> Reviewer: ...


@overload
def judge_reviewer(root: Path, model: str, *, complete: Complete | None = None, kind: type[ReviewerT],
                   connection: Mapping[str, str] | None = None) -> ReviewerT: ...


def judge_reviewer(root: Path, model: str, *, complete: Complete | None = None, kind: type[Reviewer] | None = None,
                   connection: Mapping[str, str] | None = None) -> Reviewer:
    """A :class:`~rosetta.runtime.review.Reviewer` (or subclass ``kind``) grading with the project's
    rubric-reviewer on ``model`` (through ``connection``'s endpoint and key, where given)."""
    from rosetta.runtime.review import JUDGE_AGENT, Reviewer

    return (kind or Reviewer)(lambda: load(JUDGE_AGENT, project=root), model, root=root, complete=complete,
                              connection=connection)


@overload
def load(name_or_path: str | os.PathLike[str], *, output_type: type[OutputT],
         project: str | os.PathLike[str] | None = None, signatures_dir: str | os.PathLike[str] | None = None,
         compiled_dir: str | os.PathLike[str] | None = None, strict: bool | None = None,
         unlisted_models: list[str] | None = None) -> Agent[OutputT]: ...


@overload
def load(name_or_path: str | os.PathLike[str], *, output_type: None = None,
         project: str | os.PathLike[str] | None = None, signatures_dir: str | os.PathLike[str] | None = None,
         compiled_dir: str | os.PathLike[str] | None = None, strict: bool | None = None,
         unlisted_models: list[str] | None = None) -> Agent[Any]: ...


def load(
    name_or_path: str | os.PathLike[str],
    *,
    output_type: type[OutputT] | None = None,
    project: str | os.PathLike[str] | None = None,
    signatures_dir: str | os.PathLike[str] | None = None,
    compiled_dir: str | os.PathLike[str] | None = None,
    strict: bool | None = None,
    unlisted_models: list[str] | None = None,
) -> Agent[OutputT] | Agent[Any]:
    """An agent by name (looked up in the configured ``signatures/`` and ``compiled/``) or by path.

    ``output_type`` (a pydantic model class) types every valid answer, as instructor's
    ``response_model`` does: ``load("vuln-triage", output_type=Triage).run(...).output`` is a
    ``Triage``. It is checked against the definition's output schema here (a UsageError names each
    field where they disagree), and against a compiled prompt's schema when that is first used.
    ``unlisted_models`` (patterns such as ``"openai/gpt-5.5"`` or ``"ollama_chat/*"``) names the model
    ids outside rosetta's catalog this agent may run on; by default the project's setting."""
    dirs = load_settings(project, signatures_dir=signatures_dir, compiled_dir=compiled_dir, strict=strict,
                        unlisted_models=unlisted_models)
    text = os.fspath(name_or_path)
    path = Path(text)
    if os.sep in text or "/" in text or text.endswith(_NAME_SUFFIXES) or path.is_file():
        if not path.is_file():
            raise UsageError(Problem("agent definition not found", Location(text), hint="check the path"))
        from rosetta.definition.loader import load_definition

        definition = load_definition(path, root=dirs.root)
        return _typed(Agent(definition.name, path, dirs, dirs.strict, output_type))
    if not AGENT_NAME.fullmatch(text):
        raise UsageError(Problem(f"{text!r} is neither an agent name nor a definition file", field="name",
                                 expected="a name like vuln-triage (letters, digits, '.', '_', '-'; starting with a "
                                          "letter or digit), or the path of a definition file"))
    from rosetta.definition.discovery import find_agent

    definition_path = find_agent(text, dirs.signatures_dir)
    agent = Agent(text, definition_path, dirs, dirs.strict, output_type)
    if definition_path is None and not agent.artifacts:
        raise UsageError(_not_found(text, dirs))
    return _typed(agent)


def _typed(agent: Agent[OutputT]) -> Agent[OutputT]:
    """``agent``, its output type checked against its definition's output schema, if it has both."""
    if agent.output_type is not None and agent.definition_path is not None:
        from rosetta.runtime.output_type import check_output_type

        assert agent.spec is not None  # an agent with a definition file has its spec
        check_output_type(agent.output_type, agent.spec.output.schema_, agent=agent.name,
                          source=str(agent.definition_path))
    return agent


def _not_found(name: str, dirs: Settings) -> Problem:
    """Why no agent is named ``name``: a file named for it declares another name, or the names
    that come closest, or where rosetta looked."""
    import difflib

    from rosetta.definition.discovery import declared_names
    from rosetta.definition.formats import stem_of
    from rosetta.store.lookup import compiled_models

    declared = {path: named for path, named in declared_names(dirs.signatures_dir).items() if named}
    where = Location(str(dirs.signatures_dir))
    for path, other in declared.items():
        if stem_of(path) == name:
            return Problem(f"no agent named {name!r}: {path} declares the name {other!r}", where,
                           hint=f"load it by the name it declares, rosetta.load({other!r}) (`rosetta run "
                                f"{other}`): its artifacts are under {dirs.compiled_dir / other}")
    known = sorted({*compiled_models(dirs.compiled_dir), *declared.values()})
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    return Problem(f"no agent named {name!r}", where,
                   hint=f"did you mean {' or '.join(repr(c) for c in close)}?" if close else
                   f"known agents: {', '.join(known)}" if known else
                   f"looked for a definition in {dirs.signatures_dir} and artifacts in {dirs.compiled_dir / name}")
