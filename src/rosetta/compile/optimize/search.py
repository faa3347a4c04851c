"""One search over one (agent, model) study, as the steps the study module's docstring lists: set
the study up (proposals, bootstrapped demos, the space and its enqueued baselines), run trials until
the budget, the trial count or perfection stops it, then score the winner once on test.

:class:`_Search` holds what the steps share (the study, the budget, the evaluator, the live status);
:func:`run_search` runs them, or joins the study as a worker.
"""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rosetta.compile.optimize.cache import EvalCache, prompt_key
from rosetta.compile.optimize.evaluation import Budget, BudgetExhausted, Evaluator, draws_for
from rosetta.compile.optimize.labeled import LabeledData
from rosetta.compile.optimize.metrics import Metric
from rosetta.compile.optimize.space import SPACE_VERSION, build_space, label_function
from rosetta.compile.optimize.study import (
    FINISHED,
    PERFECT,
    SearchOutcome,
    SearchSettings,
    SearchStatus,
    Surplus,
    bootstrap,
    budget_spent,
    completion,
    create_study,
    fail_stale_trials,
    nothing_to_gain,
    open_storage,
    proposals_for,
    same_prompt,
    sampler_and_pruner,
    study_name,
    trial_value,
    wait_for_setup,
    wait_for_study,
    winner_of,
)
from rosetta.errors import Problem, UsageError


def run_search(agent: Any, signature: Any, model: Any, adapter: Any, data: LabeledData, metric: Metric,
               settings: SearchSettings, *, cache: EvalCache, default_storage: Path, complete: Any = None,
               proposer_complete: Any = None, on_status: Callable[[SearchStatus], None] | None = None,
               identity: dict[str, Any] | None = None) -> SearchOutcome | None:
    """Search, or join the study as a worker (returns None then)."""
    search = _Search(agent, signature, model, adapter, data, metric, settings, cache, complete, on_status)
    name = study_name(signature.name, model.id, {**(identity or {}), **settings.identity(), "space": SPACE_VERSION})
    search.set_up(name, default_storage, proposer_complete)
    search.run_trials()
    if settings.worker:
        search.report("done")
        return None
    return search.outcome(name)


class _Search:
    """The state one search's steps share."""

    def __init__(self, agent: Any, signature: Any, model: Any, adapter: Any, data: LabeledData, metric: Metric,
                 settings: SearchSettings, cache: EvalCache, complete: Any,
                 on_status: Callable[[SearchStatus], None] | None) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.agent, self.signature, self.model, self.adapter = agent, signature, model, adapter
        self.data, self.metric, self.settings, self.cache, self.complete = data, metric, settings, cache, complete
        self.on_status = on_status
        self.status = SearchStatus(trials_total=settings.trials, phase="starting")
        self.budget = Budget(settings.max_calls, settings.max_cost, settings.timeout_s)
        self.evaluator = Evaluator(agent, metric, cache, self.budget, jobs=settings.jobs, complete=complete)
        self.evaluator.on_answer = self.report
        self.mine: set[int] = set()  # the trials this process ran
        self.stopped: list[str] = []  # why the search stopped early, first reason first

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

    def render(self, signature: Any, knobs: Any = None) -> Any:
        from rosetta.render.render import render

        return render(signature, self.model, knobs, adapters={self.adapter.name: self.adapter})

    def set_up(self, name: str, default_storage: Path, proposer_complete: Any) -> None:
        """Open (or join) the study; decide proposals and bootstrapped demos once per study; build
        the space and enqueue the baselines every search compares with."""
        settings, data = self.settings, self.data
        storage, self.storage_label = open_storage(settings.storage, default_storage)
        if settings.worker:
            # its own seed: two workers with one seed would propose the same variants
            sampler, pruner = sampler_and_pruner(settings, len(data.dev), seed=settings.seed + os.getpid())
            self.study = wait_for_study(name, storage, self.storage_label, sampler, pruner, self.report)
        else:
            self.study = create_study(name, storage, settings, len(data.dev))
        fail_stale_trials(self.study)
        self.base_prompt = self.render(self.signature)
        if settings.worker:  # the main process decides proposals and bootstrapped demos; workers reuse them
            self.report("waiting for the study's setup")
            self.proposals, bootstrapped = wait_for_setup(self.study, self.budget)
        else:
            # 1. instruction candidates, asked once per study
            self.proposals = proposals_for(self.study, self.signature, data, settings, self.budget,
                                           proposer_complete or completion(), self.report)
            # 2. bootstrapped demos: train rows the default prompt answers perfectly
            bootstrapped = bootstrap(self.study, self.signature, data, self.metric, settings, self.evaluator,
                                     self.base_prompt, self.report)
        self.report(note=self.proposals.note)
        self.space = build_space(self.signature, self.model, self.adapter, data.train,
                                 instructions=self.proposals.usable, bootstrapped=tuple(bootstrapped),
                                 demo_sets=settings.demo_sets, seed=settings.seed,
                                 label_of=label_function(self.signature), nearest=settings.nearest_demos)
        self.searchable = self.signature.model_copy(update={"demos": self.space.demos})
        self.dev_order = list(data.dev)
        random.Random(settings.seed).shuffle(self.dev_order)
        study = self.study
        if not settings.worker and not study.user_attrs.get("default_enqueued"):
            study.enqueue_trial(self.space.default_params(), user_attrs={"default": True})
            for params, mark in ((self.space.few_shot_params(), "few_shot"), (self.space.nearest_params(), "nearest")):
                if params is not None:
                    study.enqueue_trial(params, user_attrs={mark: True})
            study.set_user_attr("default_enqueued", True)

    def run_trials(self) -> None:
        """3. Trials until the count is reached, the budget is spent or nothing is left to gain."""
        study, settings, status = self.study, self.settings, self.status
        status.trials_done = sum(1 for t in study.get_trials(deepcopy=False) if t.state.name in FINISHED)
        spent = budget_spent(study, self.budget) or nothing_to_gain(study, settings)
        if spent:
            self.stopped.append(spent)
        if status.trials_done < settings.trials and not spent:
            self.report("searching", self.proposals.note or f"{self.space.size():,} variants in the space")
            self._loop()

    def _loop(self) -> None:
        """Ask, evaluate, tell. Each trial's sampler is seeded from the number of finished trials,
        so a resumed study proposes exactly what the uninterrupted one would have."""
        import optuna

        study, settings = self.study, self.settings
        seed = settings.seed + (os.getpid() if settings.worker else 0)
        while not self.stopped:
            finished = sum(1 for t in study.get_trials(deepcopy=False) if t.state.name in FINISHED)
            if finished >= settings.trials:
                break
            reason = budget_spent(study, self.budget, self.mine) or nothing_to_gain(study, settings)  # workers count
            if reason:
                self.stopped.append(reason)
                break
            study.sampler, _ = sampler_and_pruner(settings, len(self.data.dev), seed=seed + finished)
            trial = study.ask()
            try:
                value = self.objective(trial)
            except optuna.TrialPruned:
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            except Surplus:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                break
            except BaseException:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                raise
            else:
                study.tell(trial, value)
            self.status.trials_done = sum(1 for t in study.get_trials(deepcopy=False) if t.state.name in FINISHED)
            self.report()

    def objective(self, trial: Any) -> Any:
        """One variant, scored on dev in minibatches (pruned early when weak); its score."""
        import optuna

        study, settings, budget = self.study, self.settings, self.budget
        everything = study.get_trials(deepcopy=False)
        finished = [t for t in everything if t.state.name in FINISHED]
        earlier = [t for t in everything if t.state.name == "RUNNING" and t.number < trial.number]
        if len(finished) + len(earlier) >= settings.trials:  # other workers' trials fill the study
            raise Surplus()
        self.mine.add(trial.number)
        budget.carried_calls = sum(int(t.user_attrs.get("calls", 0)) for t in finished if t.number not in self.mine)
        trial.set_user_attr("host", socket.gethostname())
        trial.set_user_attr("pid", os.getpid())
        prompt = self.render(self.searchable, self.space.knobs(self.space.suggest(trial)))
        digest = prompt_key(prompt)
        trial.set_user_attr("prompt_sha256", digest)
        trial.set_user_attr("prompt_tokens", prompt.tokens.get("total", 0))
        twin = same_prompt(study, trial.number, digest)
        if twin is not None:  # another trial (or worker) already scores this exact prompt
            trial.set_user_attr("duplicate_of", twin.number)
            if twin.state.name == "COMPLETE":
                return twin.values if settings.pareto else twin.value
            raise optuna.TrialPruned()
        mean = self._dev_score(trial, prompt)
        if self.status.best is None or mean > self.status.best:
            self.status.best = mean
        if nothing_to_gain(study, settings, mean):
            self.stopped.append(PERFECT)
        return (mean, prompt.tokens.get("total", 0)) if settings.pareto else mean

    def _dev_score(self, trial: Any, prompt: Any) -> float:
        """The prompt's mean score over dev, minibatch by minibatch, recording its calls and cost
        on the trial; raises TrialPruned when the pruner or the budget stops it."""
        import optuna

        settings, budget = self.settings, self.budget
        spent_before, cost_before = budget.calls, budget.cost

        def record() -> None:
            trial.set_user_attr("calls", budget.calls - spent_before)
            trial.set_user_attr("cost", budget.cost - cost_before)
        scores: list[float] = []
        try:
            for start in range(0, len(self.dev_order), max(1, settings.minibatch)):
                scores += self.evaluator.scores(prompt, self.dev_order[start:start + settings.minibatch])
                record()
                if settings.pareto:
                    continue
                trial.report(sum(scores) / len(scores), step=len(scores))
                if trial.should_prune():
                    trial.set_user_attr("scored", len(scores))
                    self.status.pruned += 1
                    raise optuna.TrialPruned()
        except BudgetExhausted as exhausted:
            self.stopped.append(exhausted.reason)
            record()
            trial.set_user_attr("stopped", exhausted.reason)
            raise optuna.TrialPruned() from None
        record()
        return sum(scores) / len(scores)

    def outcome(self, name: str) -> SearchOutcome:
        """4. The winner, scored once on test (and the unoptimized render, when asked), with totals."""
        study, settings, data, status = self.study, self.settings, self.data, self.status
        trials = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
        if not trials:
            raise UsageError(Problem("the budget ran out before any variant was scored on the whole dev set",
                                     field="--max-calls", hint=f"allow at least {len(data.dev)} calls "
                                                               f"(one dev pass), or shrink dev"))
        winner = winner_of(trials, settings)
        default = next((t for t in trials if t.user_attrs.get("default")), None)
        prompt = self.render(self.searchable, self.space.knobs(winner.params))
        test_budget = Budget()
        draws = draws_for(prompt, settings.repeats)
        test_scores, baseline_test = self._test_scores(prompt, test_budget, draws)
        all_trials = [t for t in study.get_trials(deepcopy=False) if t.state.name in FINISHED]
        setup, proposals = study.user_attrs, self.proposals
        calls = proposals.calls + int(setup.get("bootstrap_calls", 0)) \
            + sum(int(t.user_attrs.get("calls", 0)) for t in all_trials)
        cost = proposals.cost + float(setup.get("bootstrap_cost", 0.0)) \
            + sum(float(t.user_attrs.get("cost", 0.0)) for t in all_trials)
        status.to_answer = 0
        self.report("done")
        return SearchOutcome(
            prompt=prompt, params=dict(winner.params),
            dev_score=trial_value(winner, settings), baseline_dev=trial_value(default, settings) if default else None,
            test_score=sum(test_scores) / len(test_scores) if test_scores else None, baseline_test=baseline_test,
            trials=len(all_trials), pruned=sum(1 for t in all_trials if t.state.name == "PRUNED"),
            calls=calls, cost=cost, paid_calls=self.budget.paid_calls,
            test_calls=test_budget.calls, proposals=proposals, space=self.space.describe(), study=name,
            storage=self.storage_label, stopped=self.stopped[0] if self.stopped else None,
            notes=[n for n in (proposals.note, *self.space.notes) if n], test_per_example=test_scores,
            test_draws=draws,
        )

    def _test_scores(self, prompt: Any, test_budget: Budget, draws: int) -> tuple[list[float], float | None]:
        """The winner's test scores (each the mean of ``draws`` answers), and the unoptimized
        render's mean when ``baseline_test``."""
        data, status = self.data, self.status

        def answered() -> None:
            status.answered += 1
            self.report()

        def testing(phase: str) -> None:
            status.answered, status.to_answer = 0, len(data.test) * draws
            self.report(phase)

        testing("scoring the winner on test")
        evaluator = Evaluator(self.agent, self.metric, self.cache, test_budget, jobs=self.settings.jobs,
                              complete=self.complete, on_answer=answered)
        test_scores = evaluator.scores(prompt, data.test, draws) if data.test else []
        baseline_test = None
        if self.settings.baseline_test and data.test:
            testing("scoring the unoptimized render on test")
            baseline = evaluator.scores(self.base_prompt, data.test, draws)
            baseline_test = sum(baseline) / len(baseline)
        return test_scores, baseline_test
