"""One search over one (agent, model) study, as the steps the study module's docstring lists: set
the study up (proposals, bootstrapped demos, the space, the race's plan and candidates), screen the
challengers rung by rung on half of dev with the prior never cut, then let the best challenger
replace the prior only if it beats it on the other half (see :mod:`rosetta.optimize.race`). Every
choice is made on dev; test is scored by the caller, once every choice is made (see
:mod:`rosetta.optimize.target`).

A study's trials are the race's units: one candidate answering one rung's rows. The main process
enqueues each rung's units, every process (it and any ``--worker``) takes them from the study's
queue and answers them (:mod:`rosetta.optimize.race_units`), and once a rung is done the main
process promotes its leaders. Scores of rows a candidate answered in an earlier rung are carried in
the unit, never asked again.

:class:`_Search` holds what the steps share (the study, the budget, the evaluator, the live
status); :func:`run_search` runs them, or joins the study as a worker.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rosetta.optimize.budget import CallPlan, call_plan
from rosetta.optimize.cache import EvalCache
from rosetta.optimize.evaluation import Budget, Evaluator, interval95
from rosetta.optimize.label_odds import label_field
from rosetta.optimize.metrics import Metric
from rosetta.optimize.race import CONFIDENCE, Plan, Standing, leaders, replaces, split_dev, tie_order, winner
from rosetta.optimize.race_units import IDLE_S, answer_next, rung_units, work
from rosetta.optimize.space import SEEDED, SPACE_VERSION, build_space, label_function
from rosetta.optimize.study import (
    SearchOutcome,
    SearchSettings,
    SearchStatus,
    bootstrap,
    completion,
    create_study,
    fail_stale_trials,
    latest_study,
    open_storage,
    proposals_for,
    seal_journal,
    study_name,
    wait_for_setup,
    wait_for_study,
)
from rosetta.datasets import LabeledData
from rosetta.errors import Problem, UsageError

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

    from rosetta.providers.adapter import Adapter
    from rosetta.providers.model_entries import CatalogModel
    from rosetta.render.prompt import Knobs, RenderedPrompt
    from rosetta.runtime.agent import Agent
    from rosetta.runtime.salvage import Complete
    from rosetta.signature import Signature

PRIOR_RUNG = -1
"""The units of the prior's candidates answering all of dev, before the challengers' rung 0."""


def run_search(agent: Agent[Any], signature: Signature, model: CatalogModel, adapter: Adapter, data: LabeledData,
               metric: Metric, settings: SearchSettings, *, cache: EvalCache, default_storage: Path,
               complete: Complete | None = None, proposer_complete: Complete | None = None,
               on_status: Callable[[SearchStatus], None] | None = None, identity: dict[str, Any] | None = None,
               fresh: bool = False, calls: CallPlan | None = None) -> SearchOutcome | None:
    """Search, or join the study as a worker (returns None then). ``fresh`` (``--force``) starts a
    new study instead of resuming the last one; ``calls``: the plan the caller already made with
    :func:`~rosetta.optimize.budget.call_plan` (made here when not given)."""
    from rosetta.third_party import quiet_optuna

    with quiet_optuna():  # the search reports its own progress
        return _run(agent, signature, model, adapter, data, metric, settings, cache=cache,
                    default_storage=default_storage, complete=complete, proposer_complete=proposer_complete,
                    on_status=on_status, identity=identity, fresh=fresh, calls=calls)


def _run(agent: Agent[Any], signature: Signature, model: CatalogModel, adapter: Adapter, data: LabeledData,
         metric: Metric, settings: SearchSettings, *, cache: EvalCache, default_storage: Path,
         complete: Complete | None, proposer_complete: Complete | None,
         on_status: Callable[[SearchStatus], None] | None, identity: dict[str, Any] | None,
         fresh: bool, calls: CallPlan | None) -> SearchOutcome | None:
    """:func:`run_search`, optuna quieted."""
    search = _Search(agent, signature, model, adapter, data, metric, settings, cache, complete, on_status)
    name = study_name(signature.name, model.id, {**(identity or {}), **settings.identity(), "space": SPACE_VERSION})
    search.set_up(name, default_storage, proposer_complete, fresh=fresh, calls=calls)
    if settings.worker:
        work(search)
        search.report("done")
        return None
    search.race()
    return search.outcome()


class _Search:
    """The state one search's steps share."""

    def __init__(self, agent: Agent[Any], signature: Signature, model: CatalogModel, adapter: Adapter,
                 data: LabeledData, metric: Metric, settings: SearchSettings, cache: EvalCache,
                 complete: Complete | None, on_status: Callable[[SearchStatus], None] | None) -> None:
        self.agent, self.signature, self.model, self.adapter = agent, signature, model, adapter
        self.data, self.metric, self.settings, self.cache, self.complete = data, metric, settings, cache, complete
        self.on_status = on_status
        self.status = SearchStatus(phase="starting")
        self.budget = Budget(settings.max_calls, settings.max_cost, settings.timeout_s)
        self.label = label_field(signature, metric)
        odds = self.label if settings.label_odds and self.label is not None else None
        self.evaluator = Evaluator(agent, metric, cache, self.budget, jobs=settings.jobs, complete=complete,
                                   label=odds)
        self.evaluator.on_answer = self.report
        self.mine: set[int] = set()  # the trials this process ran
        self.stopped: list[str] = []  # why the search stopped early, first reason first
        self.finalists: list[Standing] = []
        self.prior: Standing | None = None  # the best of the seeded candidates, once they answered dev
        self.seeded: list[Standing] = []  # their standings on all of dev
        self.eliminated = 0

    def report(self, phase: str | None = None, note: str | None = None) -> None:
        status, budget = self.status, self.budget
        if phase is not None:
            status.phase = phase
        if note is not None:
            status.note = note
        status.calls, status.cost, status.paid_calls = budget.calls + budget.carried_calls, budget.cost, \
            budget.paid_calls
        if self.on_status is not None:
            self.on_status(self.status)

    def render(self, signature: Signature, knobs: Knobs | None = None) -> RenderedPrompt:
        from rosetta.render.renderer import render

        return render(signature, self.model, knobs, adapters={self.adapter.name: self.adapter})

    # -- 1-3: setting the study up ---------------------------------------------------------------

    def set_up(self, name: str, default_storage: Path, proposer_complete: Complete | None, *, fresh: bool,
               calls: CallPlan | None = None) -> None:
        """Refuse a budget the search cannot keep, before any call; open (or join) the study; decide
        proposals, bootstrapped demos and the race's plan once per study; build the space and the
        candidates (the same in every process)."""
        settings, data = self.settings, self.data
        self.base_prompt = self.render(self.signature)
        self.planned = calls or call_plan(data, settings, self.signature, self.metric, self.base_prompt)
        storage, self.storage_label = open_storage(settings.storage, default_storage)
        self.journal = default_storage if settings.storage is None else None  # the project's own: sealed as it grows
        self.base_name = name  # what the artifact records: the same for every run of the study
        self.name = latest_study(storage, name, fresh=fresh and not settings.worker)
        if settings.worker:
            self.study = wait_for_study(self.name, storage, self.storage_label, self.report)
        else:
            self.study = create_study(self.name, storage, settings.seed)
        fail_stale_trials(self.study)
        if settings.worker:  # the main process decides proposals, bootstrapped demos and the plan
            self.report("waiting for the study's setup")
            self.proposals, bootstrapped = wait_for_setup(self.study, self.budget)
        else:
            # 1. instruction candidates, asked once per study
            self.proposals = proposals_for(self.study, self.signature, data, settings, self.budget,
                                           proposer_complete or completion(), self.report, self.cache)
            # 2. bootstrapped demos: train rows the default prompt answers perfectly
            bootstrapped = bootstrap(self.study, data, settings, self.evaluator, self.base_prompt, self.report,
                                     count=self.planned.bootstrap)
        stored = self.study.user_attrs.get("race_plan")
        first = self.planned.race
        assert first is not None  # the plan of rosetta's own search always holds a race
        demo_sets = stored["demo_sets"] if stored is not None else first.candidates + 1
        label_of = label_function(self.signature)
        self.space = build_space(self.signature, self.model, self.adapter, data.train,
                                 instructions=self.proposals.usable, bootstrapped=tuple(bootstrapped),
                                 demo_sets=demo_sets, seed=settings.seed, label_of=label_of,
                                 nearest=settings.nearest_demos)
        self.searchable = self.signature.model_copy(update={"demos": self.space.demos})
        if stored is not None:
            self.plan = Plan(tuple(stored["rows"]), tuple(stored["keep"]), int(stored["confirm"]),
                             int(stored["anchors"]))
        else:  # 3. the race's plan, fitted again when the space holds other numbers of prompts
            self.plan = first
        distinct = self._candidates(self.plan.candidates + 2)  # the seeded prompts are the space's first three
        anchors = self._anchors(distinct)
        if stored is None:
            if len(distinct) < first.candidates or len(anchors) != first.anchors:
                self.plan = self.planned.fitted(min(len(distinct), first.candidates), len(anchors))
            self.study.set_user_attr("race_plan", {"rows": list(self.plan.rows), "keep": list(self.plan.keep),
                                                   "confirm": self.plan.confirm, "anchors": self.plan.anchors,
                                                   "demo_sets": demo_sets})
        anchors = anchors[:self.plan.anchors]  # those the budget pays a pass over dev for; the rest race
        challengers = [params for c, params in enumerate(distinct) if c not in anchors]
        self.candidates = [distinct[c] for c in anchors] + challengers[:self.plan.keep[0]]
        self.anchors = list(range(len(anchors)))  # the anchors come first
        self.ties = tie_order(len(self.candidates), settings.seed)
        screening, confirming = split_dev(data.dev, settings.seed, label_of)
        self.dev = screening + confirming  # rungs answer a prefix of the screening rows, then the rest
        self.screening = len(screening)
        self.status.trials_total = len(self.candidates)
        self.seal()
        self.report(note=self.proposals.note)

    def seal(self) -> None:
        """Sign what the project's journal holds so far: a later search resumes from it, and from
        nothing a cloned project shipped (:func:`rosetta.optimize.study.verify_journal`)."""
        if self.journal is not None:
            seal_journal(self.journal)

    def _candidates(self, count: int) -> list[dict[str, Any]]:
        """The space's first ``count`` distinct prompts (variants that render the same prompt are one
        candidate)."""
        chosen: list[dict[str, Any]] = []
        seen: set[str] = set()
        for params in self.space.candidates(self.settings.seed):
            digest = self.evaluator.prompt_key(self.render(self.searchable, self.space.knobs(params)))
            if digest not in seen:
                seen.add(digest)
                chosen.append(params)
            if len(chosen) == count:
                break
        return chosen

    def _anchors(self, candidates: list[dict[str, Any]]) -> list[int]:
        """Which of ``candidates`` the prior is chosen from: the nearest-demos prompt where the space
        has one, else the seeded ones (the unoptimized render, the plain k-shot prompt)."""
        kinds = [self.space.kind(params) for params in candidates]
        return [c for c, kind in enumerate(kinds) if kind == "nearest-k"] or \
            [c for c, kind in enumerate(kinds) if kind in SEEDED]

    # -- 3: the race -------------------------------------------------------------------------------

    def race(self) -> None:
        """The prior's candidates answer all of dev, and the prior is chosen; then the challengers'
        screening, rung by rung: enqueue the units of the challengers still in, answer them (with
        any workers), promote the leaders; then the best challenger answers the confirmation rows
        and replaces the prior only if the paired test says it is better there. Stops early when
        the budget is spent."""
        plan_ = self.plan
        self.report("racing", self.proposals.note or f"the prior on all {len(self.dev)} dev rows, then "
                                                     f"{plan_.keep[0]} challengers on screening rows per rung "
                                                     f"{list(plan_.rows)}, the best on {plan_.confirm} more")
        self._choose_prior()
        alive = [c for c in range(len(self.candidates)) if c not in self.anchors]
        standings: dict[int, Standing] = {}
        for rung, rows in enumerate(plan_.rows):
            if self.stopped or not alive or self.prior is None:
                break
            if rung:
                promoted = self._promoted(rung, leaders([standings[c] for c in alive], len(alive)))
                self.eliminated += len(alive) - len(promoted)
                alive = promoted
            self.status.pruned = self.eliminated
            self.status.trials_done = self.eliminated
            done = self._rung(rung, rows, alive)
            if done:
                standings = done
                self.finalists = [done[c] for c in alive if c in done]
            alive = [c for c in alive if c in done]  # the rest were held back: stopped by the budget
        self._confirm()
        self._cancel_waiting()
        self.study.set_user_attr("race_done", True)
        self.seal()
        self.status.trials_done = len(self.candidates)

    def _choose_prior(self) -> None:
        """The prior's candidates answer all of dev, first (so no budget shortfall can cut them);
        the prior is the best of them on the screening rows, the first on a tie."""
        done = self._rung(PRIOR_RUNG, len(self.dev), self.anchors)
        self.seeded = [done[c] for c in self.anchors if c in done and len(done[c].plain) == len(self.dev)]
        self.prior = max(self.seeded, key=lambda s: (_mean(s.plain[:self.screening]), -s.candidate), default=None)

    def _confirm(self) -> None:
        """The best challenger on the screening rows (the prior's other seeded candidates among them,
        on the same rows) answers the confirmation rows; :attr:`chosen` is the challenger only when
        it beats the prior there by the one-sided paired test."""
        rows = len(self.finalists[0].plain) if self.finalists else self.screening
        others = self.finalists + [_first(s, rows) for s in self.seeded if s is not self.prior]
        tolerance = self.settings.pareto_tolerance if self.settings.pareto else None
        self.challenger = winner(others, tolerance=tolerance) if others and self.prior is not None else None
        self.confirmation: dict[str, Any] = {"rows": self.plan.confirm}
        self.chosen = self.prior
        if self.prior is None or self.challenger is None or not self.plan.confirm or self.stopped:
            return
        self.report("confirming", f"the best challenger answers the {self.plan.confirm} confirmation rows, "
                                  "which the screening did not use")
        candidate = self.challenger.candidate
        full = {s.candidate: s for s in self.seeded}.get(candidate) or \
            self._rung(len(self.plan.rows), len(self.dev), [candidate]).get(candidate)
        if full is None:  # the budget stopped it
            return
        better, p = replaces(full.plain[self.screening:], self.prior.plain[self.screening:])
        self.confirmation.update(prior=round(_mean(self.prior.plain[self.screening:]), 6),
                                 challenger=round(_mean(full.plain[self.screening:]), 6),
                                 p=round(p, 6), confidence=CONFIDENCE, replaced=better)
        if better:
            self.chosen = full

    def _cancel_waiting(self) -> None:
        """Units left in the queue when the race ended early are failed, saying why, so that no
        later run (or worker) answers them."""
        import optuna

        reason = self.stopped[0] if self.stopped else "the race ended"
        storage = self.study._storage
        for trial in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)):
            try:
                storage.set_trial_user_attr(trial._trial_id, "stopped", reason)
                storage.set_trial_state_values(trial._trial_id, state=optuna.trial.TrialState.FAIL)
            except Exception:  # a worker took it meanwhile: it finishes it
                continue

    def _rung(self, rung: int, rows: int, alive: list[int]) -> dict[int, Standing]:
        """Every unit of ``rung`` answered (by this process or others); the standings of those that
        finished (fewer than ``alive`` when the budget stopped some)."""
        import optuna

        study = self.study
        units = rung_units(self.study, rung)
        for candidate in sorted(alive):
            unit = units.get(candidate)
            if unit is None or (unit.state == optuna.trial.TrialState.FAIL and not unit.user_attrs.get("stopped")):
                study.enqueue_trial(self.candidates[candidate],
                                    user_attrs={"candidate": candidate, "rung": rung, "rows": rows,
                                                "phase": self._phase(rung),
                                                "kind": self.space.kind(self.candidates[candidate]),
                                                "knobs_text": self.space.describe_knobs(self.candidates[candidate])})
        while True:
            if not self.stopped:
                answer_next(self)
            units = rung_units(self.study, rung)
            pending = [c for c in alive if c in units and units[c].state in (
                optuna.trial.TrialState.WAITING, optuna.trial.TrialState.RUNNING)]
            if not pending or (self.stopped and all(units[c].state == optuna.trial.TrialState.WAITING
                                                    for c in pending)):
                break
            if not any(units[c].state == optuna.trial.TrialState.WAITING for c in pending):
                time.sleep(IDLE_S)  # other processes are answering the rest
        finished = {c: self._standing(units[c]) for c in alive
                    if c in units and units[c].state == optuna.trial.TrialState.COMPLETE}
        unfinished = [units[c].user_attrs for c in alive if c not in finished]
        if not self.stopped and any(not attrs.get("held_back") for attrs in unfinished):
            reason = next((attrs["stopped"] for attrs in unfinished if attrs.get("stopped")), None)
            self.stopped.append(reason or "the race was interrupted")
        return finished

    def _phase(self, rung: int) -> str:
        """What a rung's units are, in words: the prior's pass over dev, a rung of the race, or the confirmation."""
        return "prior" if rung == PRIOR_RUNG else f"rung {rung}" if rung < len(self.plan.rows) else "confirmation"

    def _promoted(self, rung: int, ranked: list[int]) -> list[int]:
        """The leaders that go on to ``rung`` (``ranked``: those that finished the rung before, best
        first): the plan's number, or more when the calls left pay for them at the rate the plan's
        leaders have answered so far. Those leaders answer the later rungs, and better prompts
        often need fewer validation retries than the rung's average at which calls were kept, so
        without this the calls kept and not needed went unspent. The plan grows to match; counted
        in logical calls, so a warm cache changes nothing. Without retries the plan has spent its
        budget already (:func:`~rosetta.optimize.race.plan`) and stays as it is."""
        max_calls = self.settings.max_calls
        if max_calls is not None:
            units = [t.user_attrs for t in self.study.get_trials(deepcopy=False) if "candidate" in t.user_attrs
                     and t.state.name in ("COMPLETE", "FAIL")]
            spent = self.proposals.calls + int(self.study.user_attrs.get("bootstrap_calls", 0)) \
                + sum(int(attrs.get("calls", 0)) for attrs in units)
            first = set(ranked[:self.plan.keep[rung]])
            theirs = [attrs for attrs in units if int(attrs["candidate"]) in first]
            answers = sum(int(attrs.get("answers", 0)) for attrs in theirs)
            plain = 2 if self.planned.judge else 1  # an answer's calls: its own, and a judge's verdict
            rate = max(1.0, sum(int(attrs.get("calls", 0)) for attrs in theirs) / answers) if answers else plain
            left = math.floor((max_calls - spent - (self.planned.per_answer - plain)) / rate)  # as budget._room
            spare = left - self.plan.answers_after(rung - 1, len(ranked))
            self.plan = self.plan.widened(rung, len(ranked), spare)
        return ranked[:self.plan.keep[rung]]

    def _standing(self, trial: FrozenTrial) -> Standing:
        attrs = trial.user_attrs
        candidate = int(attrs["candidate"])
        return Standing(candidate, tuple(attrs["race"]), tuple(attrs["plain"]), int(attrs.get("prompt_tokens", 0)),
                        tie=self.ties[candidate])

    # -- 4: the outcome --------------------------------------------------------------------------

    def outcome(self) -> SearchOutcome:
        """The winner — the prior, or the challenger that beat it on the confirmation rows — with
        totals and each phase's calls (test is not read: the caller scores it once the activation
        is decided too)."""
        status, best = self.status, self.chosen
        if best is None:  # the plan fits the prior's pass over dev: retries, or another limit, took its calls
            spent = self.budget.calls + self.budget.carried_calls
            reason = self.stopped[0] if self.stopped else "the race was interrupted"
            raise UsageError(Problem(f"the search stopped before its prior answered all of dev ({reason}; "
                                     f"{spent} calls spent)", field="--max-calls" if "--max-calls" in reason else None,
                                     hint="answers took more validation retries than the budget had room for: "
                                          "allow more calls" if "--max-calls" in reason else
                                          "raise the limit that stopped it"))
        params = self.candidates[best.candidate]
        prompt = self.render(self.searchable, self.space.knobs(params))
        test_budget = Budget()
        trials = [t for t in self.study.get_trials(deepcopy=False) if "candidate" in t.user_attrs]
        phases = self._phases(trials)
        default = self._default_dev(trials, test_budget)
        status.to_answer = 0
        self.report("winner chosen on dev")
        cut_short = len({int(t.user_attrs["candidate"]) for t in trials
                         if t.user_attrs.get("stopped") is not None})
        confirmed = len(best.plain) == len(self.dev) > self.screening
        return SearchOutcome(
            prompt=prompt, params=dict(params), dev_score=best.plain_mean, baseline_dev=default,
            trials=len(self.candidates), pruned=self.eliminated, calls=sum(phases.values()) if phases else 0,
            cost=self.proposals.cost + float(self.study.user_attrs.get("bootstrap_cost", 0.0))
            + sum(float(t.user_attrs.get("cost", 0.0)) for t in trials),
            paid_calls=self.budget.paid_calls + test_budget.paid_calls, test_calls=test_budget.calls,
            proposals=self.proposals,
            space=self.space.describe(), study=self.base_name, study_run=self.name, storage=self.storage_label,
            stopped=self.stopped[0] if self.stopped else None,
            notes=[n for n in (self.proposals.note, *self.space.notes) if n],
            phases=phases, cut_short=cut_short, dev_interval=interval95(best.plain),
            dev_examples=len(best.plain),
            confirm_rows=tuple(e.id for e in self.dev[self.screening:]) if confirmed else (),
            confirm_scores=tuple(best.plain[self.screening:]) if confirmed else (),
            race=self._race_record(best),
            scoring="label odds" if self.evaluator.odds_seen else "metric", kind=self.space.kind(params))

    def _phases(self, trials: list[FrozenTrial]) -> dict[str, int]:
        """Calls per phase: proposals, bootstrapping, the prior's pass over dev, each rung of the race
        and the confirmation."""
        phases = {"proposals": self.proposals.calls, "bootstrap": int(self.study.user_attrs.get("bootstrap_calls", 0))}
        for rung in range(PRIOR_RUNG, len(self.plan.rows) + 1):
            phases[self._phase(rung)] = sum(int(t.user_attrs.get("calls", 0)) for t in trials if
                                            t.user_attrs.get("rung") == rung and t.state.name in ("COMPLETE", "FAIL"))
        return phases

    def _default_dev(self, trials: list[FrozenTrial], test_budget: Budget) -> float | None:
        """The unoptimized render's plain score on all of dev: from the race where it got that
        far; else, with ``--baseline``, its remaining rows answered now (counted with the test
        pass, outside the search's budget); else None (a score on a rung's few rows would mislead)."""
        default = self.space.default_params()
        unoptimized = self.candidates.index(default) if default in self.candidates else None
        units = [t for t in trials if t.user_attrs.get("candidate") == unoptimized and t.state.name == "COMPLETE"]
        plain: list[float] = list(max(units, key=lambda t: t.user_attrs["rows"]).user_attrs["plain"]) if units else []
        if len(plain) < len(self.dev):
            if not self.settings.baseline_test:
                return None
            evaluator = Evaluator(self.agent, self.metric, self.cache, test_budget, jobs=self.settings.jobs,
                                  complete=self.complete)
            plain += evaluator.scores(self.base_prompt, self.dev[len(plain):])
        return sum(plain) / len(plain)

    def _race_record(self, best: Standing) -> dict[str, Any]:
        """The plan, the screening finalists' plain scores, the prior, the challenger and what the
        confirmation rows said."""
        def kind(standing: Standing | None) -> str | None:
            return self.space.kind(self.candidates[standing.candidate]) if standing is not None else None

        return {**self.plan.describe(), "winner": best.candidate,
                "finalists": {s.candidate: round(s.plain_mean, 6) for s in self.finalists},
                "prior": self.prior.candidate if self.prior is not None else None, "prior_kind": kind(self.prior),
                "challenger": self.challenger.candidate if self.challenger is not None else None,
                "challenger_kind": kind(self.challenger), "confirmation": self.confirmation, "tie_order": self.ties}


def _first(standing: Standing, rows: int) -> Standing:
    """``standing`` on its first ``rows`` rows only (to compare it with others on the same rows)."""
    return Standing(standing.candidate, standing.race[:rows], standing.plain[:rows], standing.tokens, standing.tie)


def _mean(scores: Sequence[float]) -> float:
    return sum(scores) / len(scores) if scores else 0.0

