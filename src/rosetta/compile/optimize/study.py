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

from rosetta.compile.optimize.cache import Answer
from rosetta.compile.optimize.evaluation import Budget, BudgetExhausted, Evaluator
from rosetta.compile.optimize.labeled import LabeledData
from rosetta.compile.optimize.metrics import Metric
from rosetta.compile.optimize.proposer import Proposals, propose
from rosetta.compile.optimize.space import label_function
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
    repeats: int = 1  # answers per test example for a model that cannot decode greedily (its scores are sampled)

    def identity(self) -> dict[str, Any]:
        """The settings that change which trials run and what they score (not budgets or jobs)."""
        identity = {"seed": self.seed, "minibatch": self.minibatch, "pruner": self.pruner, "proposer": self.proposer,
                    "proposals": self.proposals if self.proposer else 0, "bootstrap": self.bootstrap,
                    "demo_sets": self.demo_sets, "pareto": self.pareto}
        if not self.nearest_demos:  # named only when off, so identities recorded before it existed still match
            identity["nearest_demos"] = False
        if self.repeats != 1:  # likewise: named only when set
            identity["repeats"] = self.repeats
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
    test_per_example: list[float] = field(default_factory=list)  # each test example's score (mean over draws)
    test_draws: int = 1  # answers per test example behind test_score (more than 1 only for a sampling model)


class Surplus(Exception):
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

    for attempt in range(5):
        try:  # no heartbeat: optuna records one only inside Study.optimize, and the search asks and tells
            storage = optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})
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


def sampler_and_pruner(settings: SearchSettings, dev_size: int, seed: int) -> tuple[Any, Any]:
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


def create_study(name: str, storage: Any, settings: SearchSettings, dev_size: int) -> Any:
    import optuna

    sampler, pruner = sampler_and_pruner(settings, dev_size, seed=settings.seed)
    if settings.pareto:
        return optuna.create_study(study_name=name, storage=storage, sampler=sampler, load_if_exists=True,
                                   directions=["maximize", "minimize"])
    return optuna.create_study(study_name=name, storage=storage, sampler=sampler, pruner=pruner,
                               load_if_exists=True, direction="maximize")


def fail_stale_trials(study: Any) -> None:
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


def same_prompt(study: Any, number: int, digest: str) -> Any:
    for other in study.get_trials(deepcopy=False):
        if other.number != number and other.user_attrs.get("prompt_sha256") == digest \
                and other.state.name in ("COMPLETE", "RUNNING") and "duplicate_of" not in other.user_attrs:
            return other
    return None


def proposals_for(study: Any, signature: Any, data: LabeledData, settings: SearchSettings, budget: Budget,
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


def bootstrap(study: Any, signature: Any, data: LabeledData, metric: Metric, settings: SearchSettings,
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


def wait_for_study(name: str, storage: Any, label: str, sampler: Any, pruner: Any, report: Callable[..., None],
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


def wait_for_setup(study: Any, budget: Budget, timeout_s: float = 900.0) -> tuple[Proposals, list[Demo]]:
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


def nothing_to_gain(study: Any, settings: SearchSettings, latest: float | None = None) -> str | None:
    """A perfect dev score cannot be beaten; more trials could only tie (Pareto mode still looks
    for shorter prompts)."""
    if settings.pareto:
        return None
    import optuna

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    best = max([t.value for t in complete] + [latest or 0.0])
    return PERFECT if best >= 1.0 else None


def budget_spent(study: Any, budget: Budget, mine: set[int] | frozenset[int] = frozenset()) -> str | None:
    """Why the budget allows no more trials, or None. Trials of earlier runs and other workers
    count too (``mine``, this process's own trials, are already in the budget)."""
    budget.carried_calls = sum(int(t.user_attrs.get("calls", 0)) for t in study.get_trials(deepcopy=False)
                               if t.state.name in FINISHED and t.number not in mine)
    try:
        budget.check()
    except BudgetExhausted as exhausted:
        return exhausted.reason
    return None


def trial_value(trial: Any, settings: SearchSettings) -> float:
    return float(trial.values[0] if settings.pareto else trial.value)


def winner_of(trials: list[Any], settings: SearchSettings) -> Any:
    def tokens(trial: Any) -> int:
        return int(trial.user_attrs.get("prompt_tokens", 0))

    if settings.pareto:
        best = max(trial_value(t, settings) for t in trials)
        close = [t for t in trials if trial_value(t, settings) >= best - settings.pareto_tolerance]
        return min(close, key=lambda t: (tokens(t), -trial_value(t, settings), t.number))
    return min(trials, key=lambda t: (-trial_value(t, settings), tokens(t), t.number))


def _schema_output(model: str | None) -> bool:
    """Whether ``model`` takes a JSON Schema ``response_format`` (unknown models: no)."""
    if not model:
        return False
    from rosetta.providers.catalog import resolve_model

    try:
        return bool(resolve_model(model, unlisted=True).capabilities.structured_output)
    except Exception:  # a name the catalog cannot place: ask in plain text
        return False


def completion() -> Any:
    from rosetta.providers.litellm_offline import import_litellm

    return import_litellm().completion


def estimate(data: LabeledData, settings: SearchSettings, signature: Any, metric: Any = None) -> dict[str, int]:
    """Upper bounds for --dry-run, in answers (each may take retries): the search if no trial were
    pruned, the test pass (twice with --baseline, ``repeats`` times over for a model that samples),
    and one judge call per scored answer."""
    proposals = settings.proposals if settings.proposer else 0
    bootstrap = min(settings.bootstrap, len(data.train)) if signature.demo_range[1] > 0 else 0
    search = settings.trials * len(data.dev)
    if settings.max_calls is not None:
        search = min(search, max(0, settings.max_calls - proposals - bootstrap))
    test = len(data.test) * (2 if settings.baseline_test else 1) * max(1, settings.repeats)
    judge = search + test if metric is not None and metric.needs_model else 0
    return {"proposals": proposals, "bootstrap": bootstrap, "search": search, "test": test, "judge": judge,
            "total": proposals + bootstrap + search + test + judge}

