"""Scoring a prompt on examples: each answer comes from the runtime's own call path
(:meth:`Agent.run_prompt`), through the evaluation cache, under a budget.

Budgets count *logical* spend: a cached answer is charged what it cost when it was first paid
for, and starts only when the same check a paid answer passes allows it (its worst case fits
beside what is spent, in flight and held for later rungs). The same seed, data and budget
therefore give the same search whether the cache is cold or warmed by any other run; what was
really paid this run is reported beside it.

For a classification metric (see :mod:`label_odds`) on a provider that returns log-probabilities,
:meth:`Evaluator.race_scores` asks for them and scores each answer by the correct label's
probability as well as by the plain metric.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rosetta.datasets import Example
from rosetta.errors import RosettaError
from rosetta.optimize.cache import Answer, EvalCache, example_key, prompt_key
from rosetta.local.project import LocalSettings
from rosetta.optimize.label_odds import TOP_LOGPROBS, LabelField, label_probability
from rosetta.optimize.metrics import Metric
from rosetta.providers.policy import ErrorKind
from rosetta.runtime.runner import default_validation_retries

if TYPE_CHECKING:
    from rosetta.render.prompt import RenderedPrompt
    from rosetta.runtime.agent import Agent
    from rosetta.runtime.salvage import Complete


def sampling_seed(prompt: RenderedPrompt, example_id: str) -> dict[str, int]:
    """``{"seed": n}`` fixed per example when ``prompt`` samples (temperature above 0, or unset)
    and sets no seed of its own, so the search and `rosetta evaluate` draw the same answers and a
    recorded score reproduces; empty for greedy prompts and providers that take no seed."""
    generation = prompt.generation
    if "seed" in generation or generation.get("temperature") == 0:
        return {}
    from rosetta.local.litellm_offline import import_litellm
    from rosetta.third_party import using_litellm

    provider, _, name = prompt.model.partition("/")
    try:
        with using_litellm():
            supported = import_litellm().get_supported_openai_params(model=name, custom_llm_provider=provider) or ()
    except Exception:  # litellm raises for providers it cannot map: such a provider gets no seed
        supported = ()
    if "seed" not in supported:
        return {}
    return {"seed": int(hashlib.sha256(example_id.encode()).hexdigest()[:8], 16)}


class BudgetExhausted(Exception):
    """Raised before a call that the budget no longer allows; the search stops cleanly."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class HeldBack(BudgetExhausted):
    """Raised before a call that would spend what the race keeps for its later rungs: this rung's
    remaining candidates stop, the leaders' rungs still run."""


_NOT_THE_PROMPTS = frozenset({ErrorKind.TRANSIENT, ErrorKind.UNAVAILABLE, ErrorKind.EXHAUSTED, ErrorKind.CREDENTIALS})
"""Failures that say nothing of the prompt: the search stops rather than score it 0."""


@dataclass
class Budget:
    """Limits on calls, USD and wall time; all optional. Thread-safe.

    Answers asked at once (``--jobs``) may take *turns* (:meth:`turn`): each is admitted in its
    turn's order and only on what the answers before it really spent, as if they had been asked
    one at a time, so the same answers are admitted at any ``--jobs`` and the race's artifact does
    not depend on the machine (an answer waits for those in flight only when their worst case,
    held meanwhile, leaves it no room)."""

    max_calls: int | None = None
    max_cost: float | None = None
    timeout_s: float | None = None
    calls: int = 0  # logical: what the answers used cost, cached or not
    cost: float = 0.0
    paid_calls: int = 0  # what this process really sent
    paid_cost: float = 0.0
    carried_calls: int = 0  # spent by earlier runs or other workers of the same study
    pending: int = 0  # the worst case of the answers in flight (--jobs), not yet charged

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._turns = threading.Condition(self._lock)
        self._next_turn = 0
        self._refused: dict[int | None, BudgetExhausted] = {}  # this batch's units refused a turn, and why
        self._batch: tuple[int, float] = (0, 1.0)  # calls spent before the batch, and calls an answer takes
        self._admitted_answers = 0  # answers of this rung admitted so far
        self._rung: int | None = None  # the rung those were of
        self._admitted = threading.local()  # set inside a turn: its worst case is held already
        self._started = time.monotonic()

    def check(self, reserve: int = 1) -> None:
        """Raise unless ``reserve`` more calls fit beside those spent and in flight: one answer may
        take several (validation retries), and --max-calls is a hard cap, so an answer starts only
        when its worst case fits."""
        with self._lock:
            self._check(reserve)

    @contextmanager
    def spending(self, reserve: int) -> Iterator[None]:
        """Hold ``reserve`` calls while one answer is asked and charged, so answers asked at once
        (--jobs) cannot all start on the same calls left. Inside a :meth:`turn`, whose worst case
        is held already, it holds nothing more."""
        if getattr(self._admitted, "inside", False):
            yield
            return
        with self._lock:
            self._check(reserve)
            self.pending += reserve
        try:
            yield
        finally:
            with self._lock:
                self.pending -= reserve

    def start_turns(self, rate: float = 1.0, rung: int | None = None) -> None:
        """Number the next answers' turns from 0 (one batch of answers asked at once); ``rate``: the
        calls an answer has taken so far (validation retries and verdicts included), at which the
        answers of ``rung`` are counted against the calls held for later rungs. A later batch of the
        same rung goes on counting from where the one before stopped (same spend before the rung,
        same rate), so how a rung is split into batches changes nothing."""
        with self._lock:
            self._next_turn = 0
            self._refused = {}
            if rung is None or rung != self._rung:
                self._batch = (self.calls + self.carried_calls, rate)
                self._admitted_answers = 0
                self._rung = rung

    @contextmanager
    def turn(self, number: int, reserve: int, held: int = 0, unit: int | None = None) -> Iterator[None]:
        """Admit the answer of turn ``number`` once every earlier turn is decided; raise
        :class:`HeldBack` or :class:`BudgetExhausted` otherwise — and for every later turn of the
        same ``unit`` (or, once the budget is exhausted, of any unit). Two checks, each the same
        whatever answers are still in flight:

        - the calls ``held`` for later rungs: what the batch had spent before it began, and its
          admitted answers at the batch's rate, leave them (counted in answers, known at once);
        - the hard cap: the answer's worst case ``reserve`` fits beside what the admitted answers
          spent — their worst case while in flight, so where that does not fit it waits for them
          and decides on what they really spent, as one answer at a time would.

        Holds ``reserve`` until the answer is charged."""
        with self._turns:
            self._turns.wait_for(lambda: self._next_turn == number)
            try:
                refused = self._refused.get(unit) or next(
                    (e for e in self._refused.values() if not isinstance(e, HeldBack)), None)
                if refused is not None:
                    raise type(refused)(refused.reason)
                base, rate = self._batch
                if self.max_calls is not None and base + (self._admitted_answers + 1) * rate + held > self.max_calls:
                    self._refused[unit] = HeldBack(f"the calls left are kept for the leaders' rungs (--max-calls "
                                                   f"{self.max_calls})")
                    raise self._refused[unit]
                while True:
                    try:
                        self._check(reserve)
                        break
                    except BudgetExhausted as error:
                        if not self.pending:
                            self._refused[unit] = error
                            raise
                        self._turns.wait()
                self._admitted_answers += 1
            finally:
                self._next_turn += 1
                self._turns.notify_all()
            self.pending += reserve
        self._admitted.inside = True
        try:
            yield
        finally:
            self._admitted.inside = False
            with self._turns:
                self.pending -= reserve
                self._turns.notify_all()

    def _check(self, reserve: int) -> None:
        spent = self.calls + self.carried_calls + self.pending + reserve
        if self.max_calls is not None and spent > self.max_calls:
            raise BudgetExhausted(f"--max-calls {self.max_calls} reached")
        if self.max_cost is not None and self.cost >= self.max_cost:
            raise BudgetExhausted(f"--max-cost ${self.max_cost:g} reached")
        if self.timeout_s is not None and time.monotonic() - self._started >= self.timeout_s:
            raise BudgetExhausted(f"--timeout {self.timeout_s:g}s reached")

    def charge(self, answer: Answer, *, paid: bool) -> None:
        with self._lock:
            self.calls += answer.calls
            self.cost += answer.cost
            if paid:
                self.paid_calls += answer.calls
                self.paid_cost += answer.cost

    def elapsed(self) -> float:
        return time.monotonic() - self._started


@dataclass(frozen=True)
class Scored:
    """One answer's race score, plain metric score, and the calls and cost behind them (logical:
    a cached answer counts what it cost when paid for)."""

    race: float
    plain: float
    calls: int
    cost: float


class Evaluator:
    """Answers examples with candidate prompts and scores them with the metric."""

    def __init__(self, agent: Agent[Any], metric: Metric, cache: EvalCache, budget: Budget, *, jobs: int = 1,
                 complete: Complete | None = None, on_answer: Callable[[], None] | None = None,
                 label: LabelField | None = None, call_label: str = "candidate") -> None:
        self.agent = agent
        self.metric = metric
        self.cache = cache
        self.budget = budget
        self.jobs = max(1, jobs)
        self.complete = complete
        self.on_answer = on_answer
        self.label = label  # race on this field's label odds where the provider gives log-probabilities
        self.odds_seen = False  # whether any race score was a label's probability
        self.call_label = call_label  # what the runtime's log and trace call the prompt

    @functools.cached_property
    def local(self) -> LocalSettings:
        """The agent's project's embedded-model settings: which weights a ``local/`` name means."""
        return LocalSettings.of(self.agent.dirs)

    def prompt_key(self, prompt: RenderedPrompt, options: dict[str, Any] | None = None) -> str:
        """:func:`~rosetta.optimize.cache.prompt_key` under this agent's project settings."""
        return prompt_key(prompt, options, local=self.local)

    def answer(self, prompt: RenderedPrompt, example: Example, prompt_hash: str | None = None, draw: int = 0,
               odds: bool = False) -> Answer:
        """The model's answer to one example (from the cache when it was paid for before); ``draw``
        numbers the answers of a sampling model to the same example, each cached on its own;
        ``odds`` asks for log-probabilities too and keeps each label's probability."""
        seed = sampling_seed(prompt, example.id + (f"#{draw}" if draw else ""))
        options = {"label_odds": TOP_LOGPROBS} if odds else None
        key = EvalCache.key(prompt_hash or self.prompt_key(prompt, options),
                            example_key(example) + (f"#seed{seed['seed']}" if seed else "")
                            + (f"#draw{draw}" if draw else ""))
        extra = {"logprobs": True, "top_logprobs": TOP_LOGPROBS} if odds else {}
        with self.budget.spending(1 + default_validation_retries(prompt)):  # cached or not: the same check
            cached = self.cache.get(key)
            answer = cached if cached is not None else self._call(prompt, example, {**seed, **extra})
            if cached is None:
                self.cache.put(key, answer)
            self.budget.charge(answer, paid=cached is None)
        if cached is None and self.on_answer is not None:
            self.on_answer()
        return answer

    def _call(self, prompt: RenderedPrompt, example: Example, options: dict[str, Any]) -> Answer:
        from rosetta.runtime.result import ModelCallError, paid_calls

        try:
            result = self.agent.run_prompt(prompt, example.inputs, complete=self.complete, extra=options,
                                           label=self.call_label)
        except ModelCallError as error:
            calls = paid_calls(error.attempts)
            if error.kind in _NOT_THE_PROMPTS or not error.attempts:
                raise  # not the prompt's fault: stop rather than score the prompt 0
            return Answer(None, "", False, max(calls, 1), 0.0, error=str(error.problems[0].message))
        except RosettaError as error:  # an input guardrail refused the example
            return Answer(None, "", False, 0, 0.0, error=str(error.problems[0].message))
        calls = paid_calls(result.attempts)
        odds: dict[str, float] | None = None
        if "logprobs" in options and self.label is not None and result.logprobs:
            found = {label: label_probability(result.logprobs, self.label, label) for label in self.label.labels}
            odds = {label: p for label, p in found.items() if p is not None} if None not in found.values() else None
        return Answer(result.data, result.raw, result.valid, max(calls, 1), float(result.cost or 0.0), odds=odds)

    def answers(self, prompt: RenderedPrompt, examples: Sequence[Example], draw: int = 0) -> list[Answer]:
        """Answers in example order; ``jobs`` calls run at once."""
        prompt_hash = self.prompt_key(prompt)
        if self.jobs == 1 or len(examples) == 1:
            return [self.answer(prompt, example, prompt_hash, draw) for example in examples]
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            return list(pool.map(lambda example: self.answer(prompt, example, prompt_hash, draw), examples))

    def asks_odds(self, prompt: RenderedPrompt) -> bool:
        """Whether answers to ``prompt`` are asked with log-probabilities: a label to score, a model
        that gives them, and greedy decoding (a sampling model's odds would vary between runs)."""
        return self.label is not None and bool(prompt.sampling_params) and gives_logprobs(prompt.model)

    def race_scores(self, prompt: RenderedPrompt, examples: Sequence[Example]) -> list[Scored]:
        """Each example's race and plain score (see :meth:`race_score`), ``jobs`` at a time."""
        key = self.race_key(prompt)
        if self.jobs == 1 or len(examples) == 1:
            return [self.race_score(prompt, example, key) for example in examples]
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            return list(pool.map(lambda example: self.race_score(prompt, example, key), examples))

    def race_key(self, prompt: RenderedPrompt) -> tuple[str, bool]:
        """The cache key of ``prompt``'s race answers, and whether they are asked with log-probabilities."""
        odds = bool(self.asks_odds(prompt))
        return self.prompt_key(prompt, {"label_odds": TOP_LOGPROBS} if odds else None), odds

    def race_score(self, prompt: RenderedPrompt, example: Example, key: tuple[str, bool]) -> Scored:
        """One example's scores, ``key`` being :meth:`race_key`'s: the race score is the correct
        label's probability where :attr:`label` is set and the model gives log-probabilities (an
        answer that did not validate scores 0), else the plain metric's score."""
        prompt_hash, odds = key
        answer = self.answer(prompt, example, prompt_hash, odds=odds)
        plain, verdict_calls, verdict_cost = self._scored(answer, example)
        calls, cost = answer.calls + verdict_calls, answer.cost + verdict_cost
        if answer.odds is None or not answer.valid or self.label is None:
            return Scored(plain, plain, calls, cost)
        self.odds_seen = True
        return Scored(answer.odds.get(str(self.label.value(example.output)), 0.0), plain, calls, cost)

    def worst_case(self, prompt: RenderedPrompt) -> int:
        """The most calls one scored answer to ``prompt`` takes: it, its validation retries, and
        a judge's verdict."""
        judge = max(1, self.metric.worst_case_calls()) if self.metric.needs_model else 0
        return 1 + default_validation_retries(prompt) + judge

    def scores(self, prompt: RenderedPrompt, examples: Sequence[Example], draws: int = 1) -> list[float]:
        """Each example's score: the mean over ``draws`` answers (one for a model that decodes greedily)."""
        totals = [0.0] * len(examples)
        for draw in range(draws):
            answers = self.answers(prompt, examples, draw)
            for index, (answer, example) in enumerate(zip(answers, examples, strict=True)):
                totals[index] += self.score(answer, example)
        return [total / draws for total in totals]

    def score(self, answer: Answer, example: Example) -> float:
        """The metric's score; a judge's verdict is cached and charged like any other model answer."""
        return self._scored(answer, example)[0]

    def _scored(self, answer: Answer, example: Example) -> tuple[float, int, float]:
        """The metric's score, and the calls and cost of the judge's verdict behind it (none without one)."""
        if not self.metric.needs_model or not answer.valid or answer.data is None:
            return self.metric.score(answer.data, example.output, valid=answer.valid), 0, 0.0
        payload = json.dumps([self.metric.describe(), answer.data, example.output], sort_keys=True, default=str)
        key = hashlib.sha256(("judge:" + payload).encode()).hexdigest()
        with self.budget.spending(max(1, self.metric.worst_case_calls())):  # cached or not: the same check
            verdict = self.cache.get(key, score=True)  # a verdict outside [0, 1] is not one the metric gave
            paid = verdict is None
            if verdict is None:
                before = self.metric.model_calls()
                value = self.metric.score(answer.data, example.output, valid=True)
                verdict = Answer(value, "", True, max(self.metric.model_calls() - before, 1), 0.0)
                self.cache.put(key, verdict)
            self.budget.charge(verdict, paid=paid)
        return float(verdict.data), verdict.calls, verdict.cost


def gives_logprobs(model: str) -> bool:
    """Whether ``model``'s provider returns log-probabilities (the embedded model does; others as
    litellm lists them)."""
    if model.startswith("local/"):
        return True
    from rosetta.local.litellm_offline import import_litellm
    from rosetta.third_party import using_litellm

    provider, _, name = model.partition("/")
    try:
        with using_litellm():
            supported = import_litellm().get_supported_openai_params(model=name, custom_llm_provider=provider) or ()
    except Exception:  # litellm raises for providers it cannot map
        return False
    return "logprobs" in supported


def draws_for(prompt: RenderedPrompt, repeats: int) -> int:
    """Answers per test example: ``repeats`` for a model that cannot decode greedily (it takes no
    temperature), one otherwise (greedy answers repeat themselves)."""
    return 1 if prompt.sampling_params else max(1, repeats)


def interval95(scores: Sequence[float]) -> tuple[float, float] | None:
    """A 95% confidence interval for the mean of per-example scores (normal approximation,
    clipped to [0, 1]); None for fewer than two examples."""
    n = len(scores)
    if n < 2:
        return None
    mean = sum(scores) / n
    spread = 1.96 * (sum((s - mean) ** 2 for s in scores) / (n - 1) / n) ** 0.5
    return max(0.0, round(mean - spread, 6)), min(1.0, round(mean + spread, 6))
