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
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from rosetta.errors import Location, Problem, UsageError
from rosetta.project import ProjectDirs, project_dirs
from rosetta.render.prompt import RenderedPrompt
from rosetta.runtime.runner import Runner
from rosetta.runtime.selector import Selection, Selector
from rosetta.runtime.traffic import traffic_for

log = logging.getLogger("rosetta.runtime")

_NAME_SUFFIXES = (".md", ".agent.yaml", ".agent.yml", ".markdown")
AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
"""What ``name:`` allows (see AgentSpec): a name can never climb out of ``compiled/`` or ``signatures/``."""


class Agent:
    """A loaded agent: its definition file, its artifacts, and the prompts chosen so far."""

    def __init__(self, name: str, definition_path: Path | None, dirs: ProjectDirs, strict: bool) -> None:
        self.name = name
        self.definition_path = definition_path
        self.dirs = dirs
        self.strict = strict
        self.selector = Selector(name, definition_path, dirs, strict)
        self.traffic = traffic_for(dirs)
        self.runner = Runner(self, self.traffic)
        self._spec: Any = None

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, artifacts={sorted(self.artifacts)})"

    @property
    def artifacts(self) -> dict[str, Path]:
        """Compiled artifacts found for this agent, by model id."""
        return dict(self.selector.shelf.artifacts)

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
        return sorted(self.artifacts)

    def prompt_for(self, model: str, *, strict: bool | None = None, user_id: object | None = None) -> RenderedPrompt:
        """The prompt to send to ``model``; during an experiment, the version of ``user_id``'s arm."""
        return self.selector.select(model, strict, user_id).prompt

    def explain(self, model: str, *, strict: bool | None = None, user_id: object | None = None) -> Selection:
        """Choose (without caching) and say why; raises in strict mode when it would fall back."""
        return self.selector.route(model, self.strict if strict is None else strict).pick(user_id)

    def run(self, inputs: Mapping[str, Any], model: str | None = None, *, fallbacks: list[str] | None = None,
            record_dir: str | os.PathLike[str] | None = None, complete: Any = None, user_id: object | None = None,
            raw_transcripts: bool = False, **options: Any) -> Any:
        """Answer ``inputs``: the first model of the chain that succeeds, each with its own prompt.

        Transient errors retry with backoff, then move to the next model (``fallbacks`` or the
        remaining model preferences), re-selecting that model's own compiled prompt; hard errors
        (authentication, bad request, content policy) stop at once; providers cooling down after
        repeated failures are skipped. Options: ``policy`` (RetryPolicy), ``validation_retries``,
        ``retry_temperature``, ``on_secret`` ("redact" | "fail"), ``limiter``, ``health``; any other
        keyword goes to litellm. ``model="manual"`` is :meth:`run_manual`; ``record_dir`` writes
        the prompt, the answer and the conversation JSON there, credentials redacted (inputs
        included) unless ``raw_transcripts=True``. Returns a ``Result``.

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
            result = self.chat(model, fallbacks=fallbacks, record_dir=record_dir, user_id=user_id,
                               raw_transcripts=raw_transcripts).send(inputs, complete=complete, **options)
        else:
            chain = self.runner.chain(inputs, model, fallbacks)
            result = self.runner.run(inputs, chain, complete=complete, user_id=user_id, **options)
        if review is None:
            return result
        from rosetta.runtime.review import review_and_retry

        return review_and_retry(self, result, inputs, review, reviewer=judge_reviewer(
            self.dirs.root, review_model or result.model, complete=complete), retry_once=retry_once,
            complete=complete, user_id=user_id, **options)

    async def arun(self, inputs: Mapping[str, Any], model: str | None = None, *, fallbacks: list[str] | None = None,
                   record_dir: str | os.PathLike[str] | None = None, acomplete: Any = None,
                   user_id: object | None = None, raw_transcripts: bool = False, **options: Any) -> Any:
        """:meth:`run` for asyncio (litellm's ``acompletion``; same retries, fallbacks and Result)."""
        if model == "manual":
            raise UsageError(Problem("manual mode waits for a person: use run(..., model='manual'), not arun",
                                     field="model"))
        if record_dir is not None:
            return await self.chat(model, fallbacks=fallbacks, record_dir=record_dir, user_id=user_id,
                                   raw_transcripts=raw_transcripts).asend(inputs, acomplete=acomplete, **options)
        chain = self.runner.chain(inputs, model, fallbacks)
        return await self.runner.arun(inputs, chain, acomplete=acomplete, user_id=user_id, **options)

    def stream(self, inputs: Mapping[str, Any], model: str | None = None, *, complete: Any = None,
               user_id: object | None = None, **options: Any) -> Iterator[Any]:
        """Yield the answer's text as it arrives, then the final ``Result``.

        The first call streams, with exactly the request :meth:`run` would send. If it fails or its
        answer does not validate, the rest happens as in :meth:`run` (retries, corrections,
        fallbacks), with the streamed attempt recorded first; text already yielded then belonged
        to the discarded attempt.
        """
        chain = self.runner.chain(inputs, model, options.pop("fallbacks", None))
        return self.runner.stream(inputs, chain, complete=complete, user_id=user_id, **options)

    def run_prompt(self, prompt: RenderedPrompt, inputs: Mapping[str, Any], *, complete: Any = None,
                   label: str = "candidate", **options: Any) -> Any:
        """Answer ``inputs`` with an explicit ``prompt`` on its own model, and no fallback chain."""
        return self.runner.run_prompt(prompt, inputs, complete=complete, label=label, **options)

    def run_manual(self, inputs: Mapping[str, Any], *, prompt_file: str | os.PathLike[str] | None = None,
                   answer: str | None = None, answer_file: str | os.PathLike[str] | None = None,
                   model: str | None = None, user_id: object | None = None) -> Any:
        """Manual (copy/paste) mode: write the readable prompt to ``prompt_file`` (default
        ``<agent>-prompt.md`` here), then read the answer from ``answer``, ``answer_file`` or standard
        input, and validate it like any other. ``model`` picks whose prompt is written."""
        chain = self.runner.chain(inputs, model, None)
        return self.runner.run_manual(inputs, chain, prompt_file=prompt_file, answer=answer, answer_file=answer_file,
                                      user_id=user_id)

    def chat(self, model: str | None = None, *, fallbacks: list[str] | None = None,
             record_dir: str | os.PathLike[str] | None = None,
             resume: str | os.PathLike[str] | Mapping[str, Any] | None = None, user_id: object | None = None,
             raw_transcripts: bool = False) -> Any:
        """A multi-turn :class:`~rosetta.runtime.conversation.Conversation` with this agent.

        Its first turn may fall back along the chain; every later turn stays on the model that
        answered it. ``resume`` continues a conversation saved as JSON (a path or the loaded dict);
        ``user_id`` keeps every turn on that user's experiment arm. ``record_dir`` records every
        turn there with credentials redacted; ``raw_transcripts=True`` records them as they were.
        """
        from rosetta.runtime.conversation import Conversation

        if resume is not None:
            return Conversation.resume(self, resume, record_dir=record_dir, raw_transcripts=raw_transcripts)
        return Conversation(self, model=model, fallbacks=fallbacks, record_dir=record_dir, user_id=user_id,
                            raw_transcripts=raw_transcripts)


def judge_reviewer(root: Path, model: str, *, complete: Any = None, kind: type | None = None) -> Any:
    """A :class:`~rosetta.runtime.review.Reviewer` (or subclass ``kind``) grading with the project's
    rubric-reviewer on ``model``."""
    from rosetta.runtime.review import JUDGE_AGENT, Reviewer

    return (kind or Reviewer)(lambda: load(JUDGE_AGENT, project=root), model, root=root, complete=complete)


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
    unlisted_models: list[str] | None = None,
) -> Agent:
    """An agent by name (looked up in the configured ``signatures/`` and ``compiled/``) or by path.

    ``unlisted_models`` (patterns such as ``"openai/gpt-5.5"`` or ``"ollama_chat/*"``) names the model
    ids outside rosetta's catalog this agent may run on; by default the project's setting."""
    dirs = project_dirs(project, signatures_dir=signatures_dir, compiled_dir=compiled_dir, strict=strict,
                        unlisted_models=unlisted_models)
    text = os.fspath(name_or_path)
    path = Path(text)
    if os.sep in text or "/" in text or text.endswith(_NAME_SUFFIXES) or path.is_file():
        if not path.is_file():
            raise UsageError(Problem("agent definition not found", Location(text), hint="check the path"))
        from rosetta.definition.loader import load_definition

        definition = load_definition(path, root=dirs.root)
        return Agent(definition.name, path, dirs, dirs.strict)
    if not AGENT_NAME.fullmatch(text):
        raise UsageError(Problem(f"{text!r} is neither an agent name nor a definition file", field="name",
                                 expected="a name like vuln-triage (letters, digits, '.', '_', '-'; starting with a "
                                          "letter or digit), or the path of a definition file"))
    definition_path = _find_definition(text, dirs.signatures_dir)
    agent = Agent(text, definition_path, dirs, dirs.strict)
    if definition_path is None and not agent.artifacts:
        import difflib

        known = _agent_names(dirs)
        close = difflib.get_close_matches(text, known, n=3, cutoff=0.6)
        raise UsageError(Problem(f"no agent named {text!r}", Location(str(dirs.signatures_dir)),
                                 hint=f"did you mean {' or '.join(repr(c) for c in close)}?" if close else
                                 f"known agents: {', '.join(known)}" if known else
                                 f"looked for a definition in {dirs.signatures_dir} and artifacts in "
                                 f"{dirs.compiled_dir / text}"))
    return agent


def _agent_names(dirs: ProjectDirs) -> list[str]:
    """Every agent of the project: its definitions' names and its compiled agents (for suggestions)."""
    from rosetta.definition.loader import load_many
    from rosetta.store.lookup import compiled_models

    names = set(compiled_models(dirs.compiled_dir))
    if dirs.signatures_dir.is_dir():
        names.update(r.definition.name for r in load_many([dirs.signatures_dir]) if r.definition is not None)
    return sorted(names)
