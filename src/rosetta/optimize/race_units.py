"""Answering the race's units: a process takes the units waiting in the study's queue, answers them
together under the budget's turns, and records each one's scores on its trial (see
:mod:`rosetta.optimize.search`, which enqueues them and promotes the leaders). The main process and
every ``--worker`` answer units alike, so this part of a search stands apart from the race that
decides which units there are. Its functions take the search's state as a :class:`SearchState`
protocol rather than being methods of the search, so that the search module imports this one and
never the reverse (tests/test_layers.py forbids import cycles, type-only ones included).
"""

from __future__ import annotations

import math
import os
import socket
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from rosetta.optimize.evaluation import BudgetExhausted, HeldBack, Scored
from rosetta.runtime.usage import call_price

if TYPE_CHECKING:
    from optuna.study import Study
    from optuna.trial import FrozenTrial, Trial

    from rosetta.datasets import Example
    from rosetta.optimize.budget import CallPlan
    from rosetta.optimize.evaluation import Budget, Evaluator
    from rosetta.optimize.race import Plan
    from rosetta.optimize.space import SearchSpace
    from rosetta.optimize.study import SearchSettings, SearchStatus
    from rosetta.render.prompt import Knobs, RenderedPrompt
    from rosetta.signature import Signature

IDLE_S = 0.5
"""How long a process waits before looking again for units another process is still answering."""


class SearchState(Protocol):
    """What answering units reads of the search, once it is set up (the study, its candidates and
    plan, the dev rows), and what it updates (the budget, the live status, the trials this process
    ran, why the search stopped)."""

    study: Study
    settings: SearchSettings
    budget: Budget
    evaluator: Evaluator
    status: SearchStatus
    plan: Plan
    planned: CallPlan
    dev: list[Example]
    candidates: list[dict[str, Any]]
    space: SearchSpace
    searchable: Signature
    mine: set[int]
    stopped: list[str]

    def render(self, signature: Signature, knobs: Knobs | None = None) -> RenderedPrompt: ...

    def report(self, phase: str | None = None, note: str | None = None) -> None: ...

    def seal(self) -> None: ...


def work(search: SearchState) -> None:
    """A worker's share: answer units until the main process says the race is over (or no unit
    appears for 15 minutes)."""
    idle_since = time.monotonic()
    search.report("racing")
    while not search.stopped:
        if answer_next(search):
            idle_since = time.monotonic()
            continue
        attrs = search.study._storage.get_study_user_attrs(search.study._study_id)
        if attrs.get("race_done") or time.monotonic() - idle_since > 900:
            break
        time.sleep(IDLE_S)


def answer_next(search: SearchState) -> bool:
    """Take the waiting units from the study (all this process gets) and answer them together;
    False when there were none. Their answers run ``--jobs`` at a time and take turns in unit
    and row order (:meth:`Budget.turn`), so the answers admitted, and the scores recorded,
    are those of one answer at a time, on any machine."""
    import optuna

    study = search.study
    waiting = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
    trials: list[Trial] = []
    for _ in waiting[:max(1, search.settings.jobs)]:  # at most --jobs units: --worker processes get their share
        trial = study.ask()
        if "candidate" not in trial.user_attrs:  # another process took the waiting unit first: optuna made a
            study.tell(trial, state=optuna.trial.TrialState.FAIL)  # new, empty trial
            break
        trials.append(trial)
    if not trials:
        return False
    trials.sort(key=lambda t: (int(t.user_attrs["rung"]), int(t.user_attrs["candidate"])))
    try:
        units = _answer(search, trials)
    except BaseException:
        for trial in trials:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        raise
    for trial, unit in zip(trials, units, strict=True):
        if unit.refused is None:
            study.tell(trial, sum(unit.race) / len(unit.race))
            continue
        trial.set_user_attr("stopped", unit.refused.reason)
        if isinstance(unit.refused, HeldBack):  # this rung's share is spent; the race goes on with those that finished
            trial.set_user_attr("held_back", True)
        elif unit.refused.reason not in search.stopped:
            search.stopped.append(unit.refused.reason)
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
    search.seal()
    search.report()
    return True


def rung_units(study: Study, rung: int) -> dict[int, FrozenTrial]:
    """``rung``'s units by candidate: the finished one where there is one, else the latest."""
    units: dict[int, FrozenTrial] = {}
    for trial in study.get_trials(deepcopy=False):
        if trial.user_attrs.get("rung") != rung or "candidate" not in trial.user_attrs:
            continue
        candidate = int(trial.user_attrs["candidate"])
        held = units.get(candidate)
        if held is None or held.state.name != "COMPLETE":
            units[candidate] = trial
    return units


def _answer(search: SearchState, trials: list[Trial]) -> list[_Unit]:
    """The units ``trials`` hold: each candidate's prompt answers its rung's new rows (the
    earlier rows' scores come from its unit of the rung before); records per-row scores, calls
    and cost on each trial."""
    from concurrent.futures import ThreadPoolExecutor

    budget = search.budget
    search.mine.update(trial.number for trial in trials)
    everyone = search.study.get_trials(deepcopy=False)
    budget.carried_calls = sum(int(t.user_attrs.get("calls", 0)) for t in everyone
                               if t.state.name in ("COMPLETE", "FAIL") and t.number not in search.mine)
    units = [_unit(search, trial, everyone) for trial in trials]
    turns = [(unit, row) for unit in units for row in range(unit.answered, unit.rows)]

    def take(number: int) -> None:
        unit, row = turns[number]
        try:
            with budget.turn(number, unit.reserve, unit.held, unit=unit.trial.number):
                unit.scored[row] = search.evaluator.race_score(unit.prompt, search.dev[row], unit.key)
        except BudgetExhausted as refused:
            unit.refused = unit.refused or refused

    rung = int(trials[0].user_attrs["rung"])
    budget.start_turns(_rate(search, [t for t in everyone if t.user_attrs.get("rung") != rung]), rung)
    try:
        if search.settings.jobs > 1 and len(turns) > 1:
            with ThreadPoolExecutor(max_workers=search.settings.jobs) as pool:
                list(pool.map(take, range(len(turns))))  # started in turn order: no turn waits on one not started
        else:
            for number in range(len(turns)):
                take(number)
    finally:
        for unit in units:
            unit.record()
    best = max((sum(unit.plain) / len(unit.plain) for unit in units if unit.plain), default=None)
    if best is not None and (search.status.best is None or best > search.status.best):
        search.status.best = best
    return units


def _unit(search: SearchState, trial: Trial, everyone: list[FrozenTrial]) -> _Unit:
    """One unit made ready to answer: its prompt, the rows it answered in the rung before, and
    the calls kept for later rungs while it answers."""
    attrs = trial.user_attrs
    candidate, rung, rows = int(attrs["candidate"]), int(attrs["rung"]), int(attrs["rows"])
    trial.set_user_attr("host", socket.gethostname())
    trial.set_user_attr("pid", os.getpid())
    params = search.candidates[candidate]
    space = search.space
    space.suggest(trial)  # records the enqueued params on the trial (notebooks plot them)
    prompt = search.render(search.searchable, space.knobs(params))
    trial.set_user_attr("prompt_sha256", search.evaluator.prompt_key(prompt))
    trial.set_user_attr("prompt_tokens", prompt.tokens.get("total", 0))
    # the prompt's input per call in service: its cached prefix at the cache-read rate (rosetta trials)
    trial.set_user_attr("input_cost", call_price(prompt, output_tokens=0).steady)
    for mark, anchor in (("default", space.default_params()), ("few_shot", space.few_shot_params()),
                         ("nearest", space.nearest_params())):
        if params == anchor:
            trial.set_user_attr(mark, True)
    earlier = rung_units(search.study, rung - 1).get(candidate) if rung > 0 else None
    race = list(earlier.user_attrs["race"]) if earlier is not None else []
    plain = list(earlier.user_attrs["plain"]) if earlier is not None else []
    return _Unit(trial, prompt, search.evaluator.race_key(prompt), race, plain, rows,
                search.evaluator.worst_case(prompt), _held(search, rung, everyone, candidate))


def _held(search: SearchState, rung: int, trials: list[FrozenTrial], candidate: int) -> int:
    """Calls kept for the rungs after ``rung`` while ``candidate``'s unit answers: the answers
    they need for the challengers of this rung up to this one (in candidate order, however the
    rung is split into batches), and the retries those take at the rate seen in ``trials``.
    Without it, retries in the wide first rungs would spend what the finalists need, and the
    winner would be chosen on a fraction of dev; with it, the first rung's last challengers stop."""
    if not 0 <= rung < len(search.plan.rows):  # the prior's pass comes first; the confirmation is the last
        return 0
    before = {int(t.user_attrs["candidate"]) for t in trials
              if "candidate" in t.user_attrs and t.user_attrs.get("rung") == rung}
    later = search.plan.answers_after(rung, 1 + sum(1 for other in before if other < candidate))
    return math.ceil(later * _rate(search, [t for t in trials if t.user_attrs.get("rung") != rung]))


def _rate(search: SearchState, trials: list[FrozenTrial]) -> float:
    """Calls per answer in the finished ``trials`` (retries and a judge's verdicts included),
    or the plain calls of one answer before any finished."""
    done = [t.user_attrs for t in trials if "candidate" in t.user_attrs and t.state.name in ("COMPLETE", "FAIL")
            and t.user_attrs.get("answers")]
    answers = sum(int(attrs["answers"]) for attrs in done)
    return sum(int(attrs.get("calls", 0)) for attrs in done) / answers if answers else \
        (2.0 if search.planned.judge else 1.0)


@dataclass
class _Unit:
    """A unit being answered: its trial, prompt and scores so far, the rows it answers up to, the
    worst case of one answer, the calls kept for later rungs meanwhile, and why it stopped short."""

    trial: Trial
    prompt: RenderedPrompt
    key: tuple[str, bool]
    race: list[float]
    plain: list[float]
    rows: int
    reserve: int
    held: int
    answered: int = 0  # rows answered in earlier rungs
    scored: dict[int, Scored] = field(default_factory=dict)
    refused: BudgetExhausted | None = None  # the first refusal (later rows of the unit are refused too)

    def __post_init__(self) -> None:
        self.answered = len(self.race)

    def record(self) -> None:
        """The rows answered in a row (up to a refused one, or one whose call failed) onto the trial."""
        new: list[Scored] = []
        for row in range(self.answered, self.rows):
            if row not in self.scored:
                break
            new.append(self.scored[row])
        self.race += [s.race for s in new]
        self.plain += [s.plain for s in new]
        self.trial.set_user_attr("calls", sum(s.calls for s in new))
        self.trial.set_user_attr("answers", len(new))
        self.trial.set_user_attr("cost", sum(s.cost for s in new))
        self.trial.set_user_attr("race", self.race)
        self.trial.set_user_attr("plain", self.plain)
