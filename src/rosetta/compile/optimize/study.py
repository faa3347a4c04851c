"""The optuna study for one (agent, model): find the variant that scores best on dev, cheaply.

1. Instruction candidates from a proposer model (kept in the study, so a resume never re-asks);
   unusable proposals are dropped, and with none the search covers demos, format knobs and the
   terse built-in instruction (the definition's one-line description) only.
2. A few train rows answered with the default prompt become "bootstrapped" demos when they score 1.
3. Seeded TPE over the space, the unoptimized render enqueued as trial 0, the plain k-shot
   prompt (train's first rows as demos) as trial 1 and the nearest-demos prompt (each request
   gets the train rows most similar to it) as trial 2. Each trial is scored on
   dev in minibatches (one fixed seeded order, so trials compare on the same examples) and a pruner
   (successive halving or median) stops weak variants early; survivors get the full dev set.
4. The best full-dev trial wins (ties: the shorter prompt, then the earlier trial) — or, in Pareto
   mode (score vs prompt tokens), the shortest prompt within a tolerance of the best score — and is
   scored once on test.

Everything that costs a model call goes through the evaluation cache; a killed study resumes from
its storage (a journal file by default, or any optuna RDB URL shared by several workers).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rosetta.compile.optimize.cache import Answer, EvalCache, prompt_key
from rosetta.compile.optimize.evaluation import Budget, BudgetExhausted, Evaluator
from rosetta.compile.optimize.labeled import LabeledData
from rosetta.compile.optimize.metrics import Metric
from rosetta.compile.optimize.proposer import Proposals, propose
from rosetta.compile.optimize.space import SPACE_VERSION, build_space, label_function
from rosetta.errors import Problem, UsageError
from rosetta.parts import Demo

log = logging.getLogger("rosetta.optimize")

PRUNERS = ("halving", "median", "none")
FINISHED = ("COMPLETE", "PRUNED")


@dataclass(frozen=True)
class SearchSettings:
    """How to search; everything here that changes results is part of the study's identity."""

    trials: int = 20
    max_calls: int | None = None
    max_cost: float | None = None
    timeout_s: float | None = None
    seed: int = 0
    minibatch: int = 10
    pruner: str = "halving"
    proposer: str | None = None  # model id; None: no instruction proposals
    proposals: int = 3
    bootstrap: int = 8  # train rows answered with the default prompt to find bootstrapped demos
    demo_sets: int = 8
    nearest_demos: bool = True  # also search per-request nearest demos (space.NEAREST)
    pareto: bool = False
    pareto_tolerance: float = 0.02
    jobs: int = 1
    storage: str | None = None  # optuna storage URL; None: a journal file under the project's .rosetta/
    worker: bool = False  # join an existing study, run trials, write nothing
    baseline_test: bool = False  # also score the unoptimized render on test

    def identity(self) -> dict[str, Any]:
        """The settings that change which trials run and what they score (not budgets or jobs)."""
        identity = {"seed": self.seed, "minibatch": self.minibatch, "pruner": self.pruner, "proposer": self.proposer,
                    "proposals": self.proposals if self.proposer else 0, "bootstrap": self.bootstrap,
                    "demo_sets": self.demo_sets, "pareto": self.pareto}
        if not self.nearest_demos:  # named only when off, so identities recorded before it existed still match
            identity["nearest_demos"] = False
        return identity


@dataclass
class SearchStatus:
    """What a progress display shows, updated as the search goes."""

    trials_done: int = 0
    trials_total: int = 0
    pruned: int = 0
    best: float | None = None
    calls: int = 0
    paid_calls: int = 0
    cost: float = 0.0
    phase: str = ""
    note: str = ""
    answered: int = 0  # while scoring on test: answers so far, of ``to_answer``
    to_answer: int = 0


@dataclass
class SearchOutcome:
    """The winner and everything the artifact records about how it was found."""

    prompt: Any  # RenderedPrompt
    params: dict[str, Any]
    dev_score: float
    baseline_dev: float | None
    test_score: float | None
    baseline_test: float | None
    trials: int
    pruned: int
    calls: int
    cost: float
    paid_calls: int
    test_calls: int
    proposals: Proposals
    space: dict[str, Any]
    study: str
    storage: str
    stopped: str | None = None
    notes: list[str] = field(default_factory=list)


class _Surplus(Exception):
    """A worker started a trial after the study had its trials; it is discarded."""


def study_name(agent: str, model_id: str, identity: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return f"{agent}@{model_id}#{digest}"


def open_storage(url: str | None, default_path: Path) -> tuple[Any, str]:
    """An optuna storage: a journal file by default, or an RDB URL (sqlite://, postgresql://)."""
    import optuna

    if url is None or url.startswith("journal:") or url.endswith((".journal", ".log")):
        path = Path(url.removeprefix("journal:")) if url else default_path
        path.parent.mkdir(parents=True, exist_ok=True)
        from optuna.storages.journal import JournalFileBackend

        return optuna.storages.JournalStorage(JournalFileBackend(str(path))), f"journal:{path}"
    import time
    import warnings

    for attempt in range(5):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                storage = optuna.storages.RDBStorage(url, heartbeat_interval=30, grace_period=120,
                                                     engine_kwargs={"pool_pre_ping": True})
            return storage, _safe_url(url)
        except Exception as exc:  # sqlalchemy raises many classes (bad URL, no driver, no server)
            # two processes creating optuna's tables in a new database at once: one of them loses
            if attempt < 4 and any(word in str(exc) for word in ("UniqueViolation", "already exists")):
                time.sleep(0.5 + attempt)
                continue
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UsageError(Problem(f"cannot open study storage {_safe_url(url)}: {message}", field="--storage",
                                     hint="e.g. sqlite:///studies.db or postgresql://user:password@host/db "
                                          "(needs rosetta[postgres])")) from None
    raise AssertionError("unreachable")


def _safe_url(url: str) -> str:
    import re

    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)


def run_search(agent: Any, signature: Any, model: Any, adapter: Any, data: LabeledData, metric: Metric,
               settings: SearchSettings, *, cache: EvalCache, default_storage: Path, complete: Any = None,
               proposer_complete: Any = None, on_status: Callable[[SearchStatus], None] | None = None,
               identity: dict[str, Any] | None = None) -> SearchOutcome | None:
    """Search, or join the study as a worker (returns None then)."""
    import optuna

    from rosetta.render.render import render

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    status = SearchStatus(trials_total=settings.trials, phase="starting")
    budget = Budget(settings.max_calls, settings.max_cost, settings.timeout_s)
    evaluator = Evaluator(agent, metric, cache, budget, jobs=settings.jobs, complete=complete)

    def report(phase: str | None = None, note: str | None = None) -> None:
        if phase is not None:
            status.phase = phase
        if note is not None:
            status.note = note
        status.calls, status.cost, status.paid_calls = budget.calls + budget.carried_calls, budget.cost, \
            budget.paid_calls
        if on_status is not None:
            on_status(status)

    evaluator.on_answer = report
    name = study_name(signature.name, model.id, {**(identity or {}), **settings.identity(), "space": SPACE_VERSION})
    storage, storage_label = open_storage(settings.storage, default_storage)
    if settings.worker:
        # its own seed: two workers with one seed would propose the same variants
        sampler, pruner = _sampler_and_pruner(settings, len(data.dev), seed=settings.seed + os.getpid())
        study = _wait_for_study(name, storage, storage_label, sampler, pruner, report)
    else:
        study = _create_study(name, storage, settings, len(data.dev))
    _fail_stale_trials(study)

    base_prompt = render(signature, model, adapters={adapter.name: adapter})
    if settings.worker:  # the main process decides proposals and bootstrapped demos; workers reuse them
        report("waiting for the study's setup")
        proposals, bootstrapped = _wait_for_setup(study, budget)
    else:
        # 1. instruction candidates, asked once per study
        proposals = _proposals(study, signature, data, settings, budget, proposer_complete or _completion(), report)
        # 2. bootstrapped demos: train rows the default prompt answers perfectly
        bootstrapped = _bootstrap(study, signature, data, metric, settings, evaluator, base_prompt, report)
    report(note=proposals.note)

    space = build_space(signature, model, adapter, data.train, instructions=proposals.usable,
                        bootstrapped=tuple(bootstrapped), demo_sets=settings.demo_sets, seed=settings.seed,
                        label_of=label_function(signature), nearest=settings.nearest_demos)
    searchable = signature.model_copy(update={"demos": space.demos})
    dev_order = list(data.dev)
    random.Random(settings.seed).shuffle(dev_order)
    if not settings.worker and not study.user_attrs.get("default_enqueued"):
        study.enqueue_trial(space.default_params(), user_attrs={"default": True})
        few_shot = space.few_shot_params()
        if few_shot is not None:
            study.enqueue_trial(few_shot, user_attrs={"few_shot": True})
        nearest = space.nearest_params()
        if nearest is not None:
            study.enqueue_trial(nearest, user_attrs={"nearest": True})
        study.set_user_attr("default_enqueued", True)
    mine: set[int] = set()
    stopped: list[str] = []

    def objective(trial: Any) -> Any:
        everything = study.get_trials(deepcopy=False)
        finished = [t for t in everything if t.state.name in FINISHED]
        earlier = [t for t in everything if t.state.name == "RUNNING" and t.number < trial.number]
        if len(finished) + len(earlier) >= settings.trials:  # other workers' trials fill the study
            raise _Surplus()
        mine.add(trial.number)
        budget.carried_calls = sum(int(t.user_attrs.get("calls", 0)) for t in finished if t.number not in mine)
        trial.set_user_attr("host", socket.gethostname())
        trial.set_user_attr("pid", os.getpid())
        params = space.suggest(trial)
        prompt = render(searchable, model, space.knobs(params), adapters={adapter.name: adapter})
        digest = prompt_key(prompt)
        trial.set_user_attr("prompt_sha256", digest)
        trial.set_user_attr("prompt_tokens", prompt.tokens.get("total", 0))
        twin = _same_prompt(study, trial.number, digest)
        if twin is not None:  # another trial (or worker) already scores this exact prompt
            trial.set_user_attr("duplicate_of", twin.number)
            if twin.state.name == "COMPLETE":
                return twin.values if settings.pareto else twin.value
            raise optuna.TrialPruned()
        spent_before, cost_before = budget.calls, budget.cost

        def record() -> None:
            trial.set_user_attr("calls", budget.calls - spent_before)
            trial.set_user_attr("cost", budget.cost - cost_before)
        scores: list[float] = []
        try:
            for start in range(0, len(dev_order), max(1, settings.minibatch)):
                batch = dev_order[start:start + settings.minibatch]
                scores += evaluator.scores(prompt, batch)
                mean = sum(scores) / len(scores)
                record()
                if settings.pareto:
                    continue
                trial.report(mean, step=len(scores))
                if trial.should_prune():
                    trial.set_user_attr("scored", len(scores))
                    status.pruned += 1
                    raise optuna.TrialPruned()
        except BudgetExhausted as exhausted:
            stopped.append(exhausted.reason)
            record()
            trial.set_user_attr("stopped", exhausted.reason)
            raise optuna.TrialPruned() from None
        record()
        mean = sum(scores) / len(scores)
        if status.best is None or mean > status.best:
            status.best = mean
        if _nothing_to_gain(study, settings, mean):
            stopped.append(PERFECT)
        return (mean, prompt.tokens.get("total", 0)) if settings.pareto else mean

    done = sum(1 for t in study.get_trials(deepcopy=False) if t.state.name in FINISHED)
    status.trials_done = done
    spent = _budget_spent(study, budget) or _nothing_to_gain(study, settings)
    if spent:
        stopped.append(spent)
    if done < settings.trials and not spent:
        report("searching", proposals.note or f"{space.size():,} variants in the space")
        _search_loop(study, objective, settings, len(data.dev), stopped, status, report, budget, mine)
    if settings.worker:
        report("done")
        return None

    # 4. the winner, scored once on test
    trials = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    if not trials:
        raise UsageError(Problem("the budget ran out before any variant was scored on the whole dev set",
                                 field="--max-calls", hint=f"allow at least {len(data.dev)} calls "
                                                           f"(one dev pass), or shrink dev"))
    winner = _winner(trials, settings)
    default = next((t for t in trials if t.user_attrs.get("default")), None)
    knobs = space.knobs(winner.params)
    prompt = render(searchable, model, knobs, adapters={adapter.name: adapter})
    def answered() -> None:
        status.answered += 1
        report()

    def testing(phase: str) -> None:
        status.answered, status.to_answer = 0, len(data.test)
        report(phase)

    testing("scoring the winner on test")
    test_budget = Budget()
    test_evaluator = Evaluator(agent, metric, cache, test_budget, jobs=settings.jobs, complete=complete,
                               on_answer=answered)
    test_scores = test_evaluator.scores(prompt, data.test) if data.test else []
    baseline_test = None
    if settings.baseline_test and data.test:
        testing("scoring the unoptimized render on test")
        baseline = test_evaluator.scores(base_prompt, data.test)
        baseline_test = sum(baseline) / len(baseline)
    all_trials = [t for t in study.get_trials(deepcopy=False) if t.state.name in FINISHED]
    setup = study.user_attrs
    calls = proposals.calls + int(setup.get("bootstrap_calls", 0)) \
        + sum(int(t.user_attrs.get("calls", 0)) for t in all_trials)
    cost = proposals.cost + float(setup.get("bootstrap_cost", 0.0)) \
        + sum(float(t.user_attrs.get("cost", 0.0)) for t in all_trials)
    status.to_answer = 0
    report("done")
    return SearchOutcome(
        prompt=prompt, params=dict(winner.params),
        dev_score=_value(winner, settings), baseline_dev=_value(default, settings) if default else None,
        test_score=sum(test_scores) / len(test_scores) if test_scores else None, baseline_test=baseline_test,
        trials=len(all_trials), pruned=sum(1 for t in all_trials if t.state.name == "PRUNED"),
        calls=calls, cost=cost, paid_calls=budget.paid_calls,
        test_calls=test_budget.calls, proposals=proposals, space=space.describe(), study=name,
        storage=storage_label, stopped=stopped[0] if stopped else None,
        notes=[n for n in (proposals.note, *space.notes) if n],
    )


def _search_loop(study: Any, objective: Callable[[Any], Any], settings: SearchSettings, dev_size: int,
                 stopped: list[str], status: SearchStatus, report: Callable[..., None], budget: Budget,
                 mine: set[int]) -> None:
    """Ask, evaluate, tell — until the trials are done, the budget is spent or nothing is left to
    gain. Each trial's sampler is seeded from the number of finished trials, so a resumed study
    proposes exactly what the uninterrupted one would have."""
    import optuna

    seed = settings.seed + (os.getpid() if settings.worker else 0)
    while not stopped:
        finished = sum(1 for t in study.get_trials(deepcopy=False) if t.state.name in FINISHED)
        if finished >= settings.trials:
            break
        reason = _budget_spent(study, budget, mine) or _nothing_to_gain(study, settings)  # other workers count
        if reason:
            stopped.append(reason)
            break
        study.sampler, _ = _sampler_and_pruner(settings, dev_size, seed=seed + finished)
        trial = study.ask()
        try:
            value = objective(trial)
        except optuna.TrialPruned:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        except _Surplus:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            break
        except BaseException:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            raise
        else:
            study.tell(trial, value)
        status.trials_done = sum(1 for t in study.get_trials(deepcopy=False) if t.state.name in FINISHED)
        report()


def _sampler_and_pruner(settings: SearchSettings, dev_size: int, seed: int) -> tuple[Any, Any]:
    import optuna

    from rosetta.compile.optimize.pruning import RacePruner

    if settings.pruner not in PRUNERS:
        raise UsageError(Problem(f"unknown pruner {settings.pruner!r}", field="--pruner",
                                 expected=" | ".join(PRUNERS)))
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=4, multivariate=True)
    decisive = max(settings.minibatch, dev_size // 2)
    pruner: Any = optuna.pruners.NopPruner()
    if settings.pareto:
        pruner = None  # optuna does not prune multi-objective studies
    elif settings.pruner == "halving":
        pruner = RacePruner(optuna.pruners.SuccessiveHalvingPruner(min_resource=settings.minibatch,
                                                                   reduction_factor=3), decisive=decisive)
    elif settings.pruner == "median":
        pruner = RacePruner(optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=0), decisive=decisive)
    return sampler, pruner


def _create_study(name: str, storage: Any, settings: SearchSettings, dev_size: int) -> Any:
    import optuna

    sampler, pruner = _sampler_and_pruner(settings, dev_size, seed=settings.seed)
    if settings.pareto:
        return optuna.create_study(study_name=name, storage=storage, sampler=sampler, load_if_exists=True,
                                   directions=["maximize", "minimize"])
    return optuna.create_study(study_name=name, storage=storage, sampler=sampler, pruner=pruner,
                               load_if_exists=True, direction="maximize")


def _fail_stale_trials(study: Any) -> None:
    """Trials left RUNNING by a process on this host that no longer exists (killed) are failed, and
    their params enqueued again: their answers are in the cache, so only the calls in flight are lost."""
    import optuna

    host = socket.gethostname()
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        pid = trial.user_attrs.get("pid")
        if trial.user_attrs.get("host") != host or pid is None or _alive(int(pid)):
            continue
        try:
            study._storage.set_trial_state_values(trial._trial_id, state=optuna.trial.TrialState.FAIL)
        except Exception:  # another process failed it first
            continue
        if trial.params:
            study.enqueue_trial(dict(trial.params), user_attrs={"resumed_from": trial.number,
                                                               **({"default": True} if trial.user_attrs.get(
                                                                   "default") else {})})
        log.info("trial %d was interrupted (process %s is gone); it runs again", trial.number, pid)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _same_prompt(study: Any, number: int, digest: str) -> Any:
    for other in study.get_trials(deepcopy=False):
        if other.number != number and other.user_attrs.get("prompt_sha256") == digest \
                and other.state.name in ("COMPLETE", "RUNNING") and "duplicate_of" not in other.user_attrs:
            return other
    return None


def _proposals(study: Any, signature: Any, data: LabeledData, settings: SearchSettings, budget: Budget,
               complete: Any, report: Callable[..., None]) -> Proposals:
    stored = study.user_attrs.get("proposals")
    if stored is not None:
        restored = Proposals(**{**stored, "usable": tuple(stored["usable"]), "dropped": tuple(stored["dropped"]),
                                "errors": tuple(stored.get("errors", ()))})
        budget.charge(Answer(None, "", True, restored.calls, restored.cost), paid=False)
        return restored
    if settings.proposer and settings.proposals > 0:
        report("proposing instructions")
    label_of = label_function(signature)
    proposals = propose(signature, data.train, model=settings.proposer, count=settings.proposals,
                        complete=complete, label_of=label_of, structured=_schema_output(settings.proposer))
    budget.charge(Answer(None, "", True, proposals.calls, proposals.cost), paid=True)
    study.set_user_attr("proposals", {
        "model": proposals.model, "asked": proposals.asked, "usable": list(proposals.usable),
        "dropped": list(proposals.dropped), "calls": proposals.calls, "cost": proposals.cost,
        "note": proposals.note, "errors": list(proposals.errors)})
    return proposals


def _bootstrap(study: Any, signature: Any, data: LabeledData, metric: Metric, settings: SearchSettings,
               evaluator: Evaluator, base_prompt: Any, report: Callable[..., None]) -> list[Demo]:
    bootstrapped: list[Demo] = []
    if settings.bootstrap and signature.demo_range[1] > 0:
        report("bootstrapping demos")
        rows = random.Random(settings.seed).sample(list(data.train), min(settings.bootstrap, len(data.train)))
        before, cost_before = evaluator.budget.calls, evaluator.budget.cost
        try:
            for example, answer in zip(rows, evaluator.answers(base_prompt, rows), strict=True):
                if answer.valid and evaluator.score(answer, example) >= 1.0:
                    bootstrapped.append(Demo(id=f"boot:{example.id}", inputs=example.inputs, output=answer.data))
        except BudgetExhausted:
            bootstrapped.clear()  # a partial bootstrap would make the space depend on the budget
        study.set_user_attr("bootstrap_calls", evaluator.budget.calls - before)
        study.set_user_attr("bootstrap_cost", evaluator.budget.cost - cost_before)
    study.set_user_attr("bootstrapped", [[d.id, d.inputs, d.output] for d in bootstrapped])
    return bootstrapped


def _wait_for_study(name: str, storage: Any, label: str, sampler: Any, pruner: Any, report: Callable[..., None],
                    timeout_s: float = 900.0) -> Any:
    """A worker may start before the process that creates the study: wait for it to appear."""
    import time

    import optuna

    report("waiting for the study")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return optuna.load_study(study_name=name, storage=storage, sampler=sampler, pruner=pruner)
        except KeyError:
            if time.monotonic() > deadline:
                raise UsageError(Problem(f"no study {name!r} appeared in {label} within {timeout_s:.0f}s",
                                         hint="start it with `rosetta compile --optimize --storage ...` and the "
                                              "same settings (seed, proposer, minibatch, pruner, data)")) from None
            time.sleep(1.0)


def _wait_for_setup(study: Any, budget: Budget, timeout_s: float = 900.0) -> tuple[Proposals, list[Demo]]:
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        attrs = study._storage.get_study_user_attrs(study._study_id)
        if "bootstrapped" in attrs and "proposals" in attrs:
            break
        if time.monotonic() > deadline:
            raise UsageError(Problem(f"study {study.study_name!r} was never set up by its main process",
                                     hint="run `rosetta compile --optimize` with the same settings and --storage"))
        time.sleep(1.0)
    stored = attrs["proposals"]
    proposals = Proposals(**{**stored, "usable": tuple(stored["usable"]), "dropped": tuple(stored["dropped"]),
                             "errors": tuple(stored.get("errors", ()))})
    return proposals, [Demo(id=i, inputs=inputs, output=output) for i, inputs, output in attrs["bootstrapped"]]


PERFECT = "a variant scored 1.0 on dev: nothing left to gain"


def _nothing_to_gain(study: Any, settings: SearchSettings, latest: float | None = None) -> str | None:
    """A perfect dev score cannot be beaten; more trials could only tie (Pareto mode still looks
    for shorter prompts)."""
    if settings.pareto:
        return None
    import optuna

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    best = max([t.value for t in complete] + [latest or 0.0])
    return PERFECT if best >= 1.0 else None


def _budget_spent(study: Any, budget: Budget, mine: set[int] | frozenset[int] = frozenset()) -> str | None:
    """Why the budget allows no more trials, or None. Trials of earlier runs and other workers
    count too (``mine``, this process's own trials, are already in the budget)."""
    budget.carried_calls = sum(int(t.user_attrs.get("calls", 0)) for t in study.get_trials(deepcopy=False)
                               if t.state.name in FINISHED and t.number not in mine)
    try:
        budget.check()
    except BudgetExhausted as exhausted:
        return exhausted.reason
    return None


def _value(trial: Any, settings: SearchSettings) -> float:
    return float(trial.values[0] if settings.pareto else trial.value)


def _winner(trials: list[Any], settings: SearchSettings) -> Any:
    def tokens(trial: Any) -> int:
        return int(trial.user_attrs.get("prompt_tokens", 0))

    if settings.pareto:
        best = max(_value(t, settings) for t in trials)
        close = [t for t in trials if _value(t, settings) >= best - settings.pareto_tolerance]
        return min(close, key=lambda t: (tokens(t), -_value(t, settings), t.number))
    return min(trials, key=lambda t: (-_value(t, settings), tokens(t), t.number))


def _schema_output(model: str | None) -> bool:
    """Whether ``model`` takes a JSON Schema ``response_format`` (unknown models: no)."""
    if not model:
        return False
    from rosetta.providers.catalog import resolve_model

    try:
        return bool(resolve_model(model).capabilities.structured_output)
    except Exception:  # a name the catalog cannot place: ask in plain text
        return False


def _completion() -> Any:
    from rosetta.providers.litellm_offline import import_litellm

    return import_litellm().completion


def estimate(data: LabeledData, settings: SearchSettings, signature: Any, metric: Any = None) -> dict[str, int]:
    """Upper bounds for --dry-run, in answers (each may take retries): the search if no trial were
    pruned, the test pass (twice with --baseline), and one judge call per scored answer."""
    proposals = settings.proposals if settings.proposer else 0
    bootstrap = min(settings.bootstrap, len(data.train)) if signature.demo_range[1] > 0 else 0
    search = settings.trials * len(data.dev)
    if settings.max_calls is not None:
        search = min(search, max(0, settings.max_calls - proposals - bootstrap))
    test = len(data.test) * (2 if settings.baseline_test else 1)
    judge = search + test if metric is not None and metric.needs_model else 0
    return {"proposals": proposals, "bootstrap": bootstrap, "search": search, "test": test, "judge": judge,
            "total": proposals + bootstrap + search + test + judge}

