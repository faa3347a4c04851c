"""The optuna study for one (agent, model): a race among prompt candidates (see :mod:`race`).

1. Instruction candidates from a proposer model (kept in the study, so a resume never re-asks);
   unusable proposals are dropped, a base model is not asked (it cannot write instructions), and
   with none the search covers demos, format knobs and the terse built-in instruction.
2. A few train rows answered with the default prompt become "bootstrapped" demos when they score
   1 (skipped when the answer is only a label: such a demo would repeat its labeled row).
3. The race: candidates from the space (the unoptimized render, the plain k-shot prompt and the
   nearest-demos prompt first), successive halving on the screening half of one fixed dev order,
   the prior never cut. Each trial of the
   study is one *unit* — one candidate answering one rung's rows — so several processes can
   share a rung (``--worker``), and a killed study resumes from its finished units.
4. The winner: the prior, or the best challenger where a paired test on confirmation rows (dev
   rows the screening did not use) says it is better. Test is not read here: the caller decides on
   those rows whether the winner replaces the active artifact, then scores it once on test, for the
   report (see :mod:`rosetta.optimize.target`).

Everything that costs a model call goes through the evaluation cache; the study lives in a
journal file by default, or any optuna RDB URL shared by several workers. ``--force`` starts a
new study beside the old one.
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
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from rosetta.datasets import LabeledData
from rosetta.errors import Location, Problem, UsageError
from rosetta.optimize.cache import Answer, EvalCache
from rosetta.optimize.evaluation import Budget, BudgetExhausted, Evaluator
from rosetta.optimize.proposer import Proposals, propose
from rosetta.optimize.space import label_function
from rosetta.parts import Demo

if TYPE_CHECKING:
    from optuna.storages import BaseStorage
    from optuna.study import Study

    from rosetta.render.prompt import RenderedPrompt
    from rosetta.runtime.salvage import Complete
    from rosetta.signature import Signature

log = logging.getLogger("rosetta.optimize")

PRUNERS = ("halving", "none")


@dataclass(frozen=True)
class SearchSettings:
    """How to search; everything here that changes results is part of the study's identity."""

    trials: int | None = None  # candidates in the race; None: as many as the budget allows
    max_calls: int | None = None
    max_cost: float | None = None
    timeout_s: float | None = None
    seed: int = 0
    pruner: str = "halving"  # "none": every candidate answers all of dev
    proposer: str | None = None  # model id; None: no instruction proposals
    proposals: int = 3
    bootstrap: int = 8  # train rows answered with the default prompt to find bootstrapped demos
    nearest_demos: bool = True  # also search per-request nearest demos (space.NEAREST)
    pareto: bool = False
    pareto_tolerance: float = 0.02
    jobs: int = 1
    storage: str | None = None  # optuna storage URL; None: a journal file under the project's .rosetta/
    worker: bool = False  # join an existing study, run trials, write nothing
    baseline_test: bool = False  # also score the unoptimized render on test
    repeats: int = 1  # answers per test example for a model that cannot decode greedily (its scores are sampled)
    label_odds: bool = True  # race classification candidates on the correct label's probability where available

    def __post_init__(self) -> None:
        if self.pruner not in PRUNERS:
            hint = "the race halves candidates on shared dev rows" if self.pruner == "median" else None
            raise UsageError(Problem(f"unknown pruner {self.pruner!r}", field="--pruner", expected=" | ".join(PRUNERS),
                                     hint=hint))

    def identity(self) -> dict[str, Any]:
        """The settings that change which candidates race and what they score (the call budget
        included: it sizes the race; not the cost or time limits, jobs or the storage)."""
        identity = {"seed": self.seed, "pruner": self.pruner, "proposer": self.proposer,
                    "proposals": self.proposals if self.proposer else 0, "bootstrap": self.bootstrap,
                    "pareto": self.pareto, "trials": self.trials, "max_calls": self.max_calls}
        if not self.nearest_demos:  # named only when off, so identities recorded before it existed still match
            identity["nearest_demos"] = False
        if self.repeats != 1:  # likewise: named only when set
            identity["repeats"] = self.repeats
        if not self.label_odds:
            identity["label_odds"] = False
        return identity


@dataclass
class SearchStatus:
    """What a progress display shows, updated as the search goes."""

    trials_done: int = 0  # candidates that finished their race (eliminated, stopped or final)
    trials_total: int = 0  # candidates in the race
    pruned: int = 0  # eliminated by the race
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
    """The winner and everything the artifact records about how it was found. The search fills in
    what dev says; the test fields stay empty until the test pass, which comes after every choice."""

    prompt: RenderedPrompt
    params: dict[str, Any]
    dev_score: float
    baseline_dev: float | None
    trials: int  # candidates raced
    pruned: int  # eliminated by the race
    calls: int
    cost: float
    paid_calls: int
    proposals: Proposals
    space: dict[str, Any]
    study: str
    storage: str
    stopped: str | None = None
    notes: list[str] = field(default_factory=list)
    test_calls: int = 0  # outside the budget: the test pass, and with --baseline the unoptimized render's dev rows
    test_score: float | None = None
    baseline_test: float | None = None
    test_per_example: list[float] = field(default_factory=list)  # each test example's score (mean over draws)
    test_draws: int = 1  # answers per test example behind test_score (more than 1 only for a sampling model)
    phases: dict[str, Any] = field(default_factory=dict)  # calls per phase: proposals, bootstrap, each rung
    cut_short: int = 0  # candidates the budget stopped before their rung was done
    dev_interval: tuple[float, float] | None = None  # 95% interval of the winner's dev score, ignoring selection
    dev_examples: int = 0  # dev rows behind dev_score
    confirm_rows: tuple[str, ...] = ()  # the dev rows that chose nothing: where the prior was tested, and the active artifact is
    confirm_scores: tuple[float, ...] = ()  # the winner's plain score on each of them
    race: dict[str, Any] = field(default_factory=dict)  # the plan, and how the winner ranked
    study_run: str = ""  # the study this run used: ``study``, or ``study~N`` after --force
    scoring: str = "metric"  # what the race compared: "metric", or "label odds" (the correct label's probability)
    kind: str | None = None  # the winner's kind (space.SearchSpace.kind); None for DSPy's choice


def study_name(agent: str, model_id: str, identity: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return f"{agent}@{model_id}#{digest}"


def latest_study(storage: BaseStorage, name: str, *, fresh: bool) -> str:
    """The study to use: the newest of ``name``'s runs (``name``, ``name~2``, ...) to resume or
    join, or with ``fresh`` (``--force``) a new run beside the old ones, which are kept."""
    import optuna

    runs = [1] + [int(other.rpartition("~")[2]) for other in optuna.get_all_study_names(storage)
                  if other.startswith(name + "~") and other.rpartition("~")[2].isdigit()]
    exists = name in optuna.get_all_study_names(storage)
    if not fresh:
        return name if max(runs) == 1 else f"{name}~{max(runs)}"
    if not exists and max(runs) == 1:
        return name
    return f"{name}~{max(runs) + 1}"


def open_storage(url: str | None, default_path: Path, *, searching: bool = True) -> tuple[BaseStorage, str]:
    """An optuna storage: a journal file by default, or an RDB URL (sqlite://, postgresql://). The
    project's own journal is used only as far as this machine sealed it: a search sets an unsealed
    one aside and starts afresh; a reader (``searching=False``) refuses it."""
    import optuna

    if url is None or url.startswith("journal:") or url.endswith((".journal", ".log")):
        path = Path(url.removeprefix("journal:")) if url else default_path
        if url is None:  # the project's own journal, under .rosetta/: a trusted file (a FIFO there would hang optuna)
            _trusted_journal(path)
            verify_journal(path, set_aside=searching)
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
                                          "(needs rosetta-prompts[postgres])")) from None
    raise AssertionError("unreachable")


def _trusted_journal(path: Path) -> None:
    """Refuse a default journal path (``<root>/.rosetta/studies/<agent>/<model>.journal``) that passes
    through a symlink or holds anything but a plain file, naming it."""
    from rosetta.fileio import NotRegularFile, trusted_path

    try:
        trusted_path(path, path.parents[2])
    except NotRegularFile as refused:
        raise UsageError(Problem(f"cannot use the study journal: {refused}", Location(str(path)),
                                 hint="delete it (or the symlink); a search starts a new journal")) from None


JOURNAL_SEAL = ".seal"
"""Beside the project's journal: how many of its bytes this machine wrote, and their HMAC under the
project's key (:mod:`rosetta.signing`)."""


def _seal_of(path: Path, data: bytes) -> str:
    import hashlib

    from rosetta.signing import project_secret, sign

    return sign(project_secret(path.parents[3]), f"journal {path.name}", hashlib.sha256(data).hexdigest())


def seal_journal(path: Path) -> None:
    """Sign the project's journal as far as its last whole line: what a later search resumes from.
    Called after each batch of answers is recorded, so an interrupted search loses at most one."""
    import json

    from rosetta.fileio import read_regular_bytes, write_trusted
    from rosetta.signing import NoSecret

    try:
        data = read_regular_bytes(path, limit=1 << 30)
        length = data.rfind(b"\n") + 1
        write_trusted(path.with_name(path.name + JOURNAL_SEAL),
                      json.dumps({"length": length, "hmac": _seal_of(path, data[:length])}), path.parents[2])
    except (OSError, NoSecret) as exc:  # unsigned, the journal is set aside by the next search: it starts afresh
        log.warning("cannot sign the study journal %s (%s); an interrupted search will start afresh", path, exc)


def verify_journal(path: Path, *, set_aside: bool = True) -> None:
    """Use the project's journal only when this machine sealed it: one shipped with a cloned project
    (or edited by hand) decides nothing — no prompt, score, plan or call count. One without a valid
    seal over its beginning is set aside (``.untrusted``, and the search starts afresh) or, with
    ``set_aside=False`` (a reader, while a search may be writing), refused. What follows the sealed
    length is this machine's own batch in progress (or cut short): a forger has no key to seal the
    beginning of another machine's journal with."""
    import hmac
    import json
    import os

    from rosetta.fileio import read_regular_bytes, read_trusted
    from rosetta.signing import NoSecret

    if not path.exists():
        return
    seal = path.with_name(path.name + JOURNAL_SEAL)
    why = None
    try:
        data = read_regular_bytes(path, limit=1 << 30)
        recorded = json.loads(read_trusted(seal, path.parents[2], limit=4096)) if os.path.lexists(seal) else None
        length = recorded.get("length") if isinstance(recorded, dict) else None
        if not isinstance(length, int) or not 0 <= length <= len(data):
            why = "it carries no seal of this machine's"
        elif not (isinstance(recorded, dict) and hmac.compare_digest(str(recorded.get("hmac")),
                                                                     _seal_of(path, data[:length]))):
            why = "its seal does not match (it was not written here, or was edited)"
    except (OSError, ValueError, NoSecret) as exc:
        why = f"it cannot be checked ({exc})"
    if why is None:
        return
    if not set_aside:
        raise UsageError(Problem(f"the study journal is not trusted: {why}", Location(str(path)),
                                 hint="`rosetta compile --optimize` sets it aside and searches afresh; or delete it"))
    aside = path.with_name(path.name + ".untrusted")
    os.replace(path, aside)
    seal.unlink(missing_ok=True)
    log.warning("the study journal %s is not trusted: %s; set aside as %s, the search starts afresh",
                path, why, aside.name)


def _safe_url(url: str) -> str:
    import re

    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)


def create_study(name: str, storage: BaseStorage, seed: int) -> Study:
    """The study's trials are the race's units, enqueued with fixed params: its sampler never chooses."""
    import optuna

    return optuna.create_study(study_name=name, storage=storage, sampler=optuna.samplers.RandomSampler(seed=seed),
                               load_if_exists=True, direction="maximize")


UNIT = ("candidate", "rung", "rows")
"""The user attributes that say which unit a trial is: which candidate answers up to which row in which rung."""


def fail_stale_trials(study: Study) -> None:
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
        if "candidate" in trial.user_attrs:
            unit = {key: trial.user_attrs[key] for key in (*UNIT, "kind", "phase") if key in trial.user_attrs}
            study.enqueue_trial(dict(trial.params), user_attrs={**unit, "resumed_from": trial.number})
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


def proposals_for(study: Study, signature: Signature, data: LabeledData, settings: SearchSettings, budget: Budget,
                  complete: Complete, report: Callable[..., None], cache: EvalCache | None = None) -> Proposals:
    stored = study.user_attrs.get("proposals")
    if stored is not None:
        restored = Proposals(**{**stored, "usable": tuple(stored["usable"]), "dropped": tuple(stored["dropped"]),
                                "errors": tuple(stored.get("errors", ()))})
        budget.charge(Answer(None, "", True, restored.calls, restored.cost), paid=False)
        return restored
    base = base_model(settings.proposer) if settings.proposals > 0 else None
    if base:
        proposals = Proposals(settings.proposer, 0, note=f"no instruction proposals: {base}")
    else:
        label_of = label_function(signature)
        asked = _CachedCompletion(complete, cache)
        proposals = propose(signature, data.train, model=settings.proposer, count=settings.proposals,
                            complete=asked, label_of=label_of, structured=_schema_output(settings.proposer),
                            on_call=lambda n: report(f"proposing instructions {n}/{settings.proposals}"))
        budget.charge(Answer(None, "", True, proposals.calls - asked.paid, 0.0), paid=False)
        budget.charge(Answer(None, "", True, asked.paid, proposals.cost), paid=True)
    study.set_user_attr("proposals", {
        "model": proposals.model, "asked": proposals.asked, "usable": list(proposals.usable),
        "dropped": list(proposals.dropped), "calls": proposals.calls, "cost": proposals.cost,
        "note": proposals.note, "errors": list(proposals.errors)})
    return proposals


class _CachedCompletion:
    """A completion function whose answers are kept in the evaluation cache, keyed by the whole
    request: a new study (``--force``) asks the proposer again for free, with the same answers."""

    def __init__(self, complete: Complete, cache: EvalCache | None) -> None:
        self.complete, self.cache, self.paid = complete, cache, 0

    def __call__(self, **request: Any) -> SimpleNamespace:
        key = hashlib.sha256(("proposal:" + json.dumps(request, sort_keys=True, default=str)).encode()).hexdigest()
        cached = self.cache.get(key) if self.cache is not None else None
        if cached is None:
            response = self.complete(**request)  # a failure raises, and is not kept
            self.paid += 1
            text = response.choices[0].message.content or ""
            cost = float((getattr(response, "_hidden_params", {}) or {}).get("response_cost") or 0.0)
            cached = Answer(text, text, True, 1, cost)
            if self.cache is not None:
                self.cache.put(key, cached)
        message = SimpleNamespace(content=cached.raw)
        return SimpleNamespace(choices=[SimpleNamespace(message=message)],
                               _hidden_params={"response_cost": cached.cost})


def bootstrap(study: Study, data: LabeledData, settings: SearchSettings, evaluator: Evaluator,
              base_prompt: RenderedPrompt, report: Callable[..., None], *, count: int) -> list[Demo]:
    """Train rows the default prompt answers perfectly, as demos of the model's own answers: ``count``
    rows, as the call plan says (none when the answer is only a label: such a demo would repeat its
    labeled row)."""
    bootstrapped: list[Demo] = []
    if count:
        rows = random.Random(settings.seed).sample(list(data.train), count)
        report(f"bootstrapping demos 0/{len(rows)}")
        before, cost_before = evaluator.budget.calls, evaluator.budget.cost
        try:
            for done, (example, answer) in enumerate(zip(rows, evaluator.answers(base_prompt, rows), strict=True), 1):
                report(f"bootstrapping demos {done}/{len(rows)}")
                if answer.valid and evaluator.score(answer, example) >= 1.0:
                    bootstrapped.append(Demo(id=f"boot:{example.id}", inputs=example.inputs, output=answer.data))
        except BudgetExhausted:
            bootstrapped.clear()  # a partial bootstrap would make the space depend on the budget
        study.set_user_attr("bootstrap_calls", evaluator.budget.calls - before)
        study.set_user_attr("bootstrap_cost", evaluator.budget.cost - cost_before)
    study.set_user_attr("bootstrapped", [[d.id, d.inputs, d.output] for d in bootstrapped])
    return bootstrapped


def wait_for_study(name: str, storage: BaseStorage, label: str, report: Callable[..., None],
                   timeout_s: float = 900.0) -> Study:
    """A worker may start before the process that creates the study: wait for it to appear."""
    import time

    import optuna

    report("waiting for the study")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return optuna.load_study(study_name=name, storage=storage, sampler=optuna.samplers.RandomSampler())
        except KeyError:
            if time.monotonic() > deadline:
                raise UsageError(Problem(f"no study {name!r} appeared in {label} within {timeout_s:.0f}s",
                                         hint="start it with `rosetta compile --optimize --storage ...` and the "
                                              "same settings (seed, proposer, budget, pruner, data)")) from None
            time.sleep(1.0)


def wait_for_setup(study: Study, budget: Budget, timeout_s: float = 900.0) -> tuple[Proposals, list[Demo]]:
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        attrs = study._storage.get_study_user_attrs(study._study_id)
        if "bootstrapped" in attrs and "proposals" in attrs and "race_plan" in attrs:
            break
        if time.monotonic() > deadline:
            raise UsageError(Problem(f"study {study.study_name!r} was never set up by its main process",
                                     hint="run `rosetta compile --optimize` with the same settings and --storage"))
        time.sleep(1.0)
    stored = attrs["proposals"]
    proposals = Proposals(**{**stored, "usable": tuple(stored["usable"]), "dropped": tuple(stored["dropped"]),
                             "errors": tuple(stored.get("errors", ()))})
    return proposals, [Demo(id=i, inputs=inputs, output=output) for i, inputs, output in attrs["bootstrapped"]]


def _schema_output(model: str | None) -> bool:
    """Whether ``model`` takes a JSON Schema ``response_format`` (unknown models: no)."""
    if not model:
        return False
    from rosetta.providers.catalog import load_catalog

    try:
        return bool(load_catalog().resolve(model, unlisted=True).capabilities.structured_output)
    except Exception:  # a name the catalog cannot place: ask in plain text
        return False


def base_model(model: str | None) -> str | None:
    """Why ``model`` cannot propose instructions (it is a base model), or None."""
    if not model:
        return None
    from rosetta.providers.catalog import load_catalog

    try:
        style = load_catalog().resolve(model, unlisted=True).prompt_style
    except Exception:  # a name the catalog cannot place: ask it
        return None
    if style != "completion":
        return None
    return (f"{model} is a base model (prompt_style: completion): it continues text and cannot write "
            "instructions; name a chat model with --proposer")


def completion() -> Complete:
    """The proposer's completion call: the runtime's (a reply litellm cannot convert still read)."""
    from rosetta.runtime.salvage import completion

    return completion
