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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rosetta.errors import Location, Problem, UsageError
from rosetta.providers.policy import ErrorKind
from rosetta.runtime.rubric import Rubric

if TYPE_CHECKING:
    from rosetta.definition.models import AgentSpec
    from rosetta.render.prompt import RenderedPrompt
    from rosetta.runtime.options import RunOptions
    from rosetta.runtime.result import Result
    from rosetta.runtime.runner import Runner
    from rosetta.runtime.salvage import Complete
    from rosetta.runtime.selector import Selection

JUDGE_AGENT = "rubric-reviewer"
CREDIT = {"pass": 1.0, "fail": 0.0, "indeterminate": 0.5}
VERDICTS = ("pass", "fail", "indeterminate")


@dataclass(frozen=True)
class CriterionVerdict:
    id: str
    text: str
    verdict: str  # pass | fail | indeterminate
    reasoning: str = ""
    confidence: float | None = None


@dataclass
class Review:
    """What the judge said, criterion by criterion, and the verdict rosetta derives from it."""

    criteria: list[CriterionVerdict]
    issues: list[str] = field(default_factory=list)
    suggested_fixes: list[str] = field(default_factory=list)
    judge_valid: bool = True  # the judge's answer validated against its schema
    model: str = ""
    calls: int = 0
    weights: dict[str, float] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        verdicts = [c.verdict for c in self.criteria]
        if "fail" in verdicts:
            return "fail"
        return "pass" if verdicts and all(v == "pass" for v in verdicts) else "indeterminate"

    @property
    def passed(self) -> bool:
        """No criterion failed (indeterminate ones do not fail a review)."""
        return self.verdict != "fail"

    @property
    def score(self) -> float:
        """Weighted credit: pass 1, indeterminate ½, fail 0."""
        total = sum(self.weights.get(c.id, 1.0) for c in self.criteria)
        gained = sum(self.weights.get(c.id, 1.0) * CREDIT[c.verdict] for c in self.criteria)
        return gained / total if total else 0.0

    @property
    def decided_score(self) -> float | None:
        """Weighted pass share over the criteria the judge decided; None when it decided none (so
        indeterminate verdicts can never fail a threshold on their own)."""
        decided = [c for c in self.criteria if c.verdict != "indeterminate"]
        total = sum(self.weights.get(c.id, 1.0) for c in decided)
        if not decided or not total:
            return None
        return sum(self.weights.get(c.id, 1.0) for c in decided if c.verdict == "pass") / total

    def feedback(self) -> str:
        """The user turn that asks for a revised answer (generate → review → retry)."""
        failed = [f"- {c.id} ({c.text}): {c.reasoning or 'failed'}" for c in self.criteria if c.verdict == "fail"]
        lines = ["A reviewer checked your previous answer against a rubric and it did not pass.", "",
                 "Failed criteria:", *failed]
        if self.issues:
            lines += ["", "Issues:", *[f"- {issue}" for issue in self.issues]]
        if self.suggested_fixes:
            lines += ["", "Suggested fixes:", *[f"- {fix}" for fix in self.suggested_fixes]]
        lines += ["", "Reply again with a complete, corrected answer in the same format."]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        decided = self.decided_score
        return {"verdict": self.verdict, "score": round(self.score, 6),
                "decided_score": None if decided is None else round(decided, 6), "judge_valid": self.judge_valid,
                "model": self.model, "calls": self.calls,
                "criteria": [{"id": c.id, "text": c.text, "verdict": c.verdict, "reasoning": c.reasoning,
                              "confidence": c.confidence} for c in self.criteria],
                "issues": list(self.issues), "suggested_fixes": list(self.suggested_fixes)}


def read_review(data: object, rubric: Rubric, *, valid: bool = True, model: str = "", calls: int = 0) -> Review:
    """A :class:`Review` from the judge's JSON answer; criteria it left out are indeterminate."""
    given: dict[str, dict[str, Any]] = {}
    if isinstance(data, dict):
        for item in data.get("criteria") or []:
            if isinstance(item, dict) and item.get("verdict") in VERDICTS:
                given.setdefault(str(item.get("id", "")).strip().upper(), item)
    verdicts = []
    for criterion in rubric.criteria:
        item = given.get(criterion.id.upper())
        if item is None:
            reason = "the judge gave no verdict for this criterion" if valid else "the judge's answer never validated"
            verdicts.append(CriterionVerdict(criterion.id, criterion.text, "indeterminate", reason, None))
        else:
            confidence = item.get("confidence")
            verdicts.append(CriterionVerdict(criterion.id, criterion.text, item["verdict"],
                                             str(item.get("reasoning") or ""),
                                             float(confidence) if isinstance(confidence, (int, float)) else None))
    issues = [str(i) for i in (data.get("issues") or [])] if isinstance(data, dict) else []
    fixes = [str(i) for i in (data.get("suggested_fixes") or [])] if isinstance(data, dict) else []
    return Review(verdicts, issues, fixes, judge_valid=valid, model=model, calls=calls,
                  weights={c.id: c.weight for c in rubric.criteria})


def unreviewed(rubric: Rubric, reason: str) -> Review:
    """Every criterion indeterminate: the judge could not grade (the answer stands, ungraded)."""
    return Review([CriterionVerdict(c.id, c.text, "indeterminate", reason, None) for c in rubric.criteria],
                  judge_valid=False, weights={c.id: c.weight for c in rubric.criteria})


def failed_review(rubric: Rubric, reason: str) -> Review:
    """Every criterion failed by rule, without asking the judge (there is no usable answer)."""
    return Review([CriterionVerdict(c.id, c.text, "fail", reason, 1.0) for c in rubric.criteria],
                  weights={c.id: c.weight for c in rubric.criteria})


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
    result.review = reviewer.review(result.data if result.data is not None else result.raw, rubric, context=task)
    if result.review.passed or not options.retry_once:
        return result
    if messages is None:  # the rendered turn
        messages = agent.prompt_for(result.model, user_id=options.user_id).messages(inputs)
    messages = [*messages, {"role": "assistant", "content": result.raw or ""},
                {"role": "user", "content": result.review.feedback()}]
    retried = agent.runner.run(inputs, [result.model], options, complete=complete, messages=messages)
    retried.attempts = result.attempts + retried.attempts
    retried.review = reviewer.review(retried.data if retried.data is not None else retried.raw, rubric, context=task)
    retried.retried = True
    retried.first_review = result.review
    return retried


def as_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
