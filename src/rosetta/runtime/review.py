"""Rubric review: an LLM grades a piece of work against binary criteria.

The grader is itself a rosetta agent, the project's ``rubric-reviewer`` (per the rubric review
design): one verdict per criterion — pass, fail or indeterminate, with reasoning and confidence —
schema-validated like any other answer. rosetta recomputes the overall verdict from the criteria
instead of trusting the judge's own: ``fail`` when any criterion fails, ``pass`` when all pass,
``indeterminate`` otherwise, so an indeterminate criterion never fails a review on its own. A
criterion the judge left out, or a judge answer that never validated, counts as indeterminate.

Used by ``Agent.run(..., review=RUBRIC, retry_once=True)`` (generate → review → retry), by the
``judge`` metric of the optimizer and by ``rosetta verify``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rosetta.errors import Location, Problem, RosettaError, UsageError
from rosetta.providers.policy import ErrorKind
from rosetta.runtime.rubric import Rubric
from rosetta.runtime.verdicts import Review, read_review

if TYPE_CHECKING:
    from rosetta.definition.models import AgentSpec
    from rosetta.render.prompt import RenderedPrompt
    from rosetta.runtime.options import RunOptions
    from rosetta.runtime.result import Result
    from rosetta.runtime.runner import Runner
    from rosetta.runtime.salvage import Complete
    from rosetta.runtime.selector import Selection

log = logging.getLogger("rosetta.runtime")

JUDGE_AGENT = "rubric-reviewer"


class JudgeAgent(Protocol):
    """What a review needs of its judge (:class:`~rosetta.runtime.agent.Agent` is one): the prompt it
    picks for a model, and runs (options as keywords). A protocol, so this module never imports the facade."""

    def explain(self, model: str, *, strict: bool | None = None, user_id: object | None = None) -> Selection: ...

    def run(self, inputs: Mapping[str, Any], model: str | None = None, *, complete: Complete | None = None,
            **keywords: Any) -> Result[Any]: ...


class Reviewer:
    """Grades work with a rubric-reviewer agent on ``model`` (thread-safe; counts calls).

    ``load_judge`` loads that agent on first use (the project's ``rubric-reviewer``: see
    :func:`rosetta.runtime.agent.judge_reviewer`); ``root`` is named when it cannot be found."""

    def __init__(self, load_judge: Callable[[], JudgeAgent], model: str, *, root: Path | None = None,
                 complete: Complete | None = None, connection: Mapping[str, str] | None = None) -> None:
        import threading

        self.load_judge = load_judge
        self.root = root
        self.model = model
        self.complete = complete
        self.connection = dict(connection or {})  # the endpoint and key of the call it grades, on the same model
        self.calls = 0
        self._agent: JudgeAgent | None = None
        self._worst_case: int | None = None
        self._lock = threading.Lock()

    def agent(self) -> JudgeAgent:
        if self._agent is None:
            try:
                self._agent = self.load_judge()
            except UsageError:
                raise UsageError(Problem(f"reviewing needs the {JUDGE_AGENT} agent", Location(str(self.root or "")),
                                         hint=f"add signatures/{JUDGE_AGENT}.md (rosetta's bundled one is a good "
                                              "start)")) from None
        return self._agent

    def worst_case_calls(self) -> int:
        """The most model calls one review may take: its first answer plus the validation retries
        the runtime allows the judge's model, so a budget can reserve them before it starts."""
        if self._worst_case is None:
            from rosetta.runtime.runner import default_validation_retries

            self._worst_case = 1 + default_validation_retries(self.agent().explain(self.model).prompt)
        return self._worst_case

    def review(self, work: object, rubric: Rubric | str | Sequence[Any], *, reference: object = None,
               context: str = "") -> Review:
        """Grade ``work`` (text or JSON data) against ``rubric``; ``reference`` is a known-good
        answer to compare with, ``context`` what the work was asked to do."""
        rubric = Rubric.of(rubric)
        parts = [f"Task the answer responds to:\n{context}"] if context else []
        parts.append(f"Answer to grade:\n{as_text(work)}")
        if reference is not None:
            parts.append(f"Reference answer (what a correct answer says):\n{as_text(reference)}")
        from rosetta.runtime.result import ModelCallError, paid_calls

        try:
            result = self.agent().run({"artifact": "\n\n".join(parts), "rubric": rubric.text()}, self.model,
                                      fallbacks=[], complete=self.complete, **self.connection)
        except ModelCallError as error:
            if error.kind is not ErrorKind.INVALID:  # the judge could not be reached: not a verdict
                raise
            attempts, data, valid, model = error.attempts, None, False, self.model
        else:
            attempts, data, valid, model = result.attempts, result.data, result.valid, result.model
        calls = paid_calls(attempts)
        with self._lock:
            self.calls += calls
        from rosetta.runtime.secrets import redact_data

        # a review is for people and never needs a credential, whatever the judge quoted from the task
        return read_review(redact_data(data) if valid else None, rubric, valid=valid, model=model, calls=calls)


class RetriedAgent(Protocol):
    """What a review that may regenerate needs of the agent (:class:`~rosetta.runtime.agent.Agent` is
    one): its name and description for the judge, its prompts and its runner."""

    name: str
    runner: Runner

    @property
    def spec(self) -> AgentSpec | None: ...

    def prompt_for(self, model: str, *, strict: bool | None = None, user_id: object | None = None) -> RenderedPrompt: ...


def review_and_retry(agent: RetriedAgent, result: Result[Any], inputs: Mapping[str, Any], rubric: Rubric, options: RunOptions, *,
                     reviewer: Reviewer, messages: list[dict[str, Any]] | None,
                     complete: Complete | None) -> Result[Any]:
    """Generate → review → retry: grade ``result`` against ``rubric``; on a failed review (and
    ``options.retry_once``), regenerate once on the same model with the reviewer's critique after
    the conversation that produced it (``messages``, default the rendered turn), and grade the new
    answer."""
    task = f"{agent.name}: {agent.spec.description}" if agent.spec is not None else agent.name
    review = reviewer.review(result.data if result.data is not None else result.raw, rubric, context=task)
    result = replace(result, review=review)
    if review.passed or not options.retry_once:
        return result
    if messages is None:  # the rendered turn
        messages = agent.prompt_for(result.model, user_id=options.user_id).messages(inputs)
    messages = [*messages, {"role": "assistant", "content": result.raw or ""},
                {"role": "user", "content": review.feedback()}]
    try:
        retried = agent.runner.run(inputs, [result.model], options, complete=complete, messages=messages)
        second = reviewer.review(retried.data if retried.data is not None else retried.raw, rubric, context=task)
    except RosettaError as error:  # the first answer is paid for and graded: it is returned, saying why
        log.warning("%s: the retry after a failed review could not run: %s", agent.name,
                    str(error).strip().splitlines()[0])
        return result
    return replace(retried, attempts=result.attempts + retried.attempts, review=second, retried=True,
                   first_review=review)


def as_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
