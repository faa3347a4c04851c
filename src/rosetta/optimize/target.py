"""``rosetta compile --optimize`` for one agent on one model (``rosetta evaluate``, which re-scores
what it wrote, is :mod:`rosetta.optimize.rescore`).

An optimized artifact has the same ``inputs_sha256`` as the plain render of the same definition,
adapter and model — so a plain ``rosetta compile`` keeps it while those are unchanged — and records
in its provenance what the search used (dataset hash, metric, seed, settings) and found (knobs,
dev and test scores, calls and cost: :mod:`rosetta.optimize.provenance`). ``--optimize`` re-runs
only when one of those changed.

Every choice is made on dev: the prior answers all of it, challengers are screened on a third, and
the other two thirds (rows that chose nothing) decide, by a one-sided paired test, both whether the
best challenger replaces the prior and whether the winner replaces the active artifact; a tie keeps
what is there. Test is scored
once, after all of them, for the report: a score that chose nothing is an honest estimate of the
next rows' (``optimizer.chosen_on``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rosetta.errors import Location, Problem, UsageError
from rosetta.local.project import LocalSettings
from rosetta.local.revision import answerer_revision
from rosetta.optimize.budget import CallPlan, call_plan
from rosetta.optimize.context import Context, load_context
from rosetta.optimize.evaluation import draws_for
from rosetta.optimize.provenance import budget_of, knobs_of, optimizer_of, scores_of
from rosetta.optimize.search import run_search
from rosetta.optimize.study import SearchOutcome, SearchSettings, SearchStatus
from rosetta.runtime.usage import call_price
from rosetta.settings import ProjectState, Settings

if TYPE_CHECKING:
    from optuna.study import Study

    from rosetta.optimize.cache import EvalCache
    from rosetta.render.prompt import RenderedPrompt
    from rosetta.runtime.salvage import Complete

OPTIMIZERS = ("rosetta", "dspy-mipro", "dspy-bootstrap")


@dataclass(frozen=True)
class OptimizeRequest:
    """One ``compile --optimize`` target."""

    definition: Path
    model: str
    settings: SearchSettings = SearchSettings()
    metric: str | None = None
    dataset: str | None = None
    optimizer: str = "rosetta"
    force: bool = False
    dry_run: bool = False
    activate: bool = False  # replace the active artifact even when it scored better on dev (or on other data)


@dataclass
class OptimizeReport:
    """What happened: written, up to date, a worker's share, or a dry run's plan."""

    agent: str
    model: str
    status: str  # "written" | "kept as a version" | "up to date" | "worker done" | "dry run"
    artifact: str | None = None
    outcome: Any = None
    plan: CallPlan | None = None  # the calls planned, the same for the dry run and the search
    cost_usd: float = 0.0  # a dry run's estimate for the most calls it states (0 when litellm knows no price)
    rescoring: int = 0  # dev answers the active artifact gives before it may be replaced (outside the budget)
    rescoring_why: str = ""  # which rows those are
    notes: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    activation: str | None = None  # how the new artifact compared with the active one, when they were compared


def optimize(request: OptimizeRequest, *, settings: Settings,
             on_status: Callable[[SearchStatus], None] | None = None, complete: Complete | None = None,
             proposer_complete: Complete | None = None) -> OptimizeReport:
    """Run one optimization and write its artifact (see the module docstring). Long on purpose: its
    steps (context, identity, dry run, the up-to-date check, the search, the artifact) read in order."""
    from rosetta.compile.compiler import CompileOptions
    from rosetta.optimize.cache import EvalCache
    from rosetta.render.renderer import render
    from rosetta.signature import source_digest
    from rosetta.store.artifact import artifact_path, dump_artifact, model_fingerprint, read_header, target_inputs
    from rosetta.store.measured import mark_measured
    from rosetta.store.publish import publish, publish_version
    from rosetta.store.verify import artifact_of, expected_provenance

    if request.optimizer not in OPTIMIZERS:
        raise UsageError(Problem(f"unknown optimizer {request.optimizer!r}", field="--optimizer",
                                 expected=" | ".join(OPTIMIZERS)))
    started = time.monotonic()
    context = load_context(request.definition, request.model, settings=settings, metric=request.metric,
                           dataset=request.dataset)
    signature, model, adapter = context.signature, context.model, context.adapter
    search = request.settings
    identity = {"optimizer": request.optimizer, "dataset_sha256": context.data.sha256,
                "metric": context.metric.describe(), **search.identity(), "trials": search.trials,
                "max_calls": search.max_calls, "max_cost": search.max_cost}
    options = CompileOptions(out=settings.compiled_dir, root=settings.root, adapters={adapter.name: adapter},
                             section_roles=dict(settings.section_roles), declared_models=dict(settings.models))
    source_sha = source_digest(context.definition)
    inputs_sha = target_inputs(source_sha, model, adapter.sha256, options.section_roles)
    path = artifact_path(settings.compiled_dir, signature.name, model.id)
    unoptimized = render(signature, model, adapters={adapter.name: adapter})
    # what the budget allows, decided (or refused) before any call, by the dry run and the search alike
    plan = call_plan(context.data, search, signature, context.metric, unoptimized, optimizer=request.optimizer)
    report = OptimizeReport(signature.name, model.id, "", str(path), plan=plan)
    if request.dry_run:
        report.status = "dry run"
        report.rescoring, report.rescoring_why = (0, "") if request.activate else _rescored_rows(path, plan)
        most = (plan.search_calls() or 0) + plan.dspy_dev * plan.per_answer + plan.test_calls() \
            + report.rescoring * plan.per_answer
        report.cost_usd = round(call_price(unoptimized).of(most), 4)  # its cached prefix read after the first call
        report.notes.extend([context.data.summary(), *plan.notes])
        return report
    answerer = answerer_revision(model.id, LocalSettings.of(settings))  # a new decoder build: recorded scores stale
    if not request.force and not search.worker and _optimized_already(path, inputs_sha, identity, answerer):
        report.status = "up to date"
        return report
    study_identity = {"dataset": context.data.sha256, "metric": context.metric.describe(), "source": source_sha,
                      "model": model_fingerprint(model), **({"answerer": answerer} if answerer else {})}
    cache = EvalCache(context.state.eval_cache)
    shown: list[SearchStatus] = []  # the search's live status, which the test pass goes on updating

    def show(status: SearchStatus) -> None:
        shown[:] = [status]
        if on_status is not None:
            on_status(status)

    outcome = _search(request, context, study_identity, plan, cache=cache, on_status=show, complete=complete,
                      proposer_complete=proposer_complete)
    if outcome is None:
        report.wall_s = time.monotonic() - started
        report.status = "worker done"
        return report
    # every choice is made before test is read: the winner (above), then whether it replaces the active one
    decision = Activation(False) if request.activate else _compare_with_active(path, outcome, context, search, cache,
                                                                                 complete)
    baseline = unoptimized if search.baseline_test and request.optimizer == "rosetta" else None  # as the plan says
    _score_test(outcome, context, search, cache, baseline, complete=complete,
                status=shown[0] if shown else SearchStatus(), on_status=on_status)
    report.wall_s = time.monotonic() - started
    provenance = replace(
        expected_provenance(context.definition, model, adapter, settings.root, options.section_roles, source_sha),
        knobs=knobs_of(outcome), dataset_sha256=context.data.sha256, scores=scores_of(outcome, context),
        budget=budget_of(outcome), optimizer=optimizer_of(request.optimizer, identity, outcome))
    artifact = artifact_of(signature, adapter, provenance, outcome.prompt)
    text = dump_artifact(artifact)
    report.outcome = outcome
    report.notes = list(outcome.notes)
    report.activation = decision.said(read_header(text).content_sha256)
    if decision.stays:
        report.status, report.artifact = "kept as a version", str(publish_version(path, text, settings.compiled_dir))
    else:
        publish(path, text, settings.compiled_dir)
        report.status = "written"
    mark_measured(settings.root, read_header(text).content_sha256)  # its scores were measured here, just now
    return report


@dataclass(frozen=True)
class Activation:
    """Whether the active artifact stays (the new one is then kept as a version), and what the
    comparison on dev found (None: nothing was compared)."""

    stays: bool
    found: str | None = None

    def said(self, version: str) -> str | None:
        """What to tell: the finding, and for a kept version its id and how to use it anyway."""
        from rosetta.store.versions import short_id

        if not self.stays or self.found is None:
            return self.found
        return (f"{self.found}; kept as version {short_id(version)}. Pass --activate to replace it anyway, or test "
                "it with `rosetta experiment start`")


def _compare_with_active(path: Path, outcome: SearchOutcome, context: Context, search: SearchSettings,
                         cache: EvalCache, complete: Complete | None) -> Activation:
    """Whether the winner replaces the active artifact at ``path`` (optimized, a plain render or an
    import alike): by the rule that lets a challenger replace the search's prior — a one-sided
    paired test on the confirmation rows (dev rows that chose nothing), both prompts answering them
    through the evaluation cache (free where the active prompt raced); a tie keeps the active one.
    Only an identical prompt is replaced untested: nothing the runtime sends changes."""
    from rosetta.errors import RosettaError
    from rosetta.optimize.evaluation import Budget, Evaluator
    from rosetta.optimize.label_odds import label_field
    from rosetta.optimize.race import CONFIDENCE, replaces
    from rosetta.store.artifact import ArtifactError, read_artifact

    try:
        active = read_artifact(path)
    except (OSError, ArtifactError):
        return Activation(False)
    rows = len(outcome.confirm_rows)
    if not rows:
        why = f"the search stopped before them ({outcome.stopped})" if outcome.stopped else \
            "its choice was made on all of dev"
        return Activation(True, f"not activated: no dev rows that chose nothing were left to test it against the "
                                f"active artifact on ({why})")
    if active.prompt == outcome.prompt:  # nothing the runtime sends changes: only the recorded scores, measured anew
        return Activation(False, "activated: the same prompt as the active artifact, its scores measured again")
    by_id = {example.id: example for example in context.data.dev}
    examples = [by_id[row] for row in outcome.confirm_rows]
    budget = Budget()
    label = label_field(context.signature, context.metric) if search.label_odds else None
    evaluator = Evaluator(context.agent, context.metric, cache, budget, jobs=search.jobs, complete=complete,
                          label=label)
    try:
        held = [scored.plain for scored in evaluator.race_scores(active.prompt, examples)]
    except RosettaError as error:
        return Activation(True, f"not activated: scoring the active artifact on the {rows} confirmation rows failed "
                                f"({error.problems[0].message})")
    better, p = replaces(outcome.confirm_scores, held)
    new, kept = round(sum(outcome.confirm_scores) / rows, 6), round(sum(held) / rows, 6)
    found = (f"on the {rows} confirmation rows (dev rows that chose nothing) it scores {new} against the active "
             f"artifact's {kept}, one-sided paired test p = {p:.3g} (replaces at p ≤ {1 - CONFIDENCE:g}; the "
             f"active artifact's answers took {budget.calls} calls, {budget.paid_calls} paid)")
    return Activation(not better, ("activated: " if better else "not activated: ") + found)


def _score_test(outcome: SearchOutcome, context: Context, search: SearchSettings, cache: EvalCache,
                baseline: RenderedPrompt | None, *, complete: Complete | None, status: SearchStatus,
                on_status: Callable[[SearchStatus], None] | None) -> None:
    """Score the winner on test (each row ``draws`` times; the ``baseline`` prompt too, the
    unoptimized render with ``--baseline``) into ``outcome``: once, after every choice, for the
    report only. Its calls come on top of the search's budget, as the call plan says."""
    from rosetta.optimize.evaluation import Budget, Evaluator

    data = context.data
    budget, draws = Budget(), draws_for(outcome.prompt, search.repeats)

    def answered() -> None:
        status.answered += 1
        if on_status is not None:
            on_status(status)

    def testing(phase: str) -> None:
        status.phase, status.answered, status.to_answer = phase, 0, len(data.test) * draws
        if on_status is not None:
            on_status(status)

    evaluator = Evaluator(context.agent, context.metric, cache, budget, jobs=search.jobs, complete=complete,
                          on_answer=answered)
    if data.test:
        testing("scoring the winner on test")
        outcome.test_per_example = evaluator.scores(outcome.prompt, data.test, draws)
        outcome.test_score = sum(outcome.test_per_example) / len(outcome.test_per_example)
        outcome.test_draws = draws
    if baseline is not None and data.test:
        testing("scoring the unoptimized render on test")
        scores = evaluator.scores(baseline, data.test, draws)
        outcome.baseline_test = sum(scores) / len(scores)
    outcome.test_calls += budget.calls
    outcome.paid_calls += budget.paid_calls
    status.phase, status.to_answer = "done", 0
    if on_status is not None:
        on_status(status)


def _search(request: OptimizeRequest, context: Context, identity: dict[str, Any], plan: CallPlan, *,
            cache: EvalCache, on_status: Callable[[SearchStatus], None] | None, complete: Complete | None,
            proposer_complete: Complete | None) -> SearchOutcome | None:
    """The chosen optimizer's outcome (None for a worker that joined someone else's study)."""
    if request.optimizer != "rosetta":
        from rosetta.optimize.dspy_backend import run_dspy

        return run_dspy(request.optimizer, context, request.settings, cache=cache, complete=complete,
                        on_status=on_status)
    journal = context.state.study(context.signature.name, context.model.id)  # unless --storage names another
    proposer_complete = proposer_complete or _declared_proposer(context, request.settings.proposer)
    return run_search(context.agent, context.signature, context.model, context.adapter, context.data,
                      context.metric, request.settings, cache=cache, default_storage=journal, complete=complete,
                      proposer_complete=proposer_complete, on_status=on_status, identity=identity,
                      fresh=request.force, calls=plan)


def _declared_proposer(context: Context, name: str | None) -> Complete | None:
    """litellm's completion sent to a proposer the project declares (its id, endpoint and key), or
    None for any other proposer (called by the name given)."""
    from rosetta.optimize.study import completion
    from rosetta.providers.catalog import catalog_for

    settings = context.settings
    model = catalog_for(settings.root, settings.models).names().get((name or "").strip().lower())
    if model is None or model.source != "project":
        return None
    complete = completion()
    return lambda **kwargs: complete(**{**kwargs, "model": model.id, **model.connection()})


def last_study(root: Path, compiled_dir: Path, agent: str, model_id: str,
               storage: str | None = None) -> tuple[Study, str]:
    """The study of the last search of ``agent`` on ``model_id`` (the newest run of the study its
    artifact names, else the study whose trials ran last) and its storage's label; a UsageError
    saying how to make one when there is none."""
    import optuna

    from rosetta.optimize.study import latest_study, open_storage
    from rosetta.store.artifact import ArtifactError, artifact_path, read_artifact

    journal = ProjectState.of(root).study(agent, model_id)
    if storage is None and not journal.is_file():
        raise UsageError(Problem(f"no search of {agent} on {model_id} is recorded", Location(str(journal)),
                                 hint=f"run `rosetta optimize {agent} --model {model_id}`, or pass the "
                                      "--storage a search used"))
    opened, label = open_storage(storage, journal, searching=False)
    names = optuna.get_all_study_names(opened)
    try:
        named = read_artifact(artifact_path(compiled_dir, agent, model_id)).provenance.optimizer.get("study")
    except (OSError, ArtifactError):
        named = None
    if named in names:
        return optuna.load_study(study_name=latest_study(opened, named, fresh=False), storage=opened), label

    def last_run(name: str) -> float:
        trials = optuna.load_study(study_name=name, storage=opened).get_trials(deepcopy=False)
        return max((t.datetime_complete or t.datetime_start).timestamp() for t in trials
                   if t.datetime_start is not None) if trials else 0.0

    if not names:
        raise UsageError(Problem(f"{label} holds no study", hint="run a search first"))
    return optuna.load_study(study_name=max(names, key=last_run), storage=opened), label


def _optimized_already(path: Path, inputs_sha: str, identity: dict[str, Any], answerer: str) -> bool:
    """Whether the artifact at ``path`` came from this very search (same inputs, search identity
    and decoder build): then there is nothing to redo."""
    from rosetta.store.artifact import ArtifactError, read_artifact

    try:
        existing = read_artifact(path)
    except ArtifactError:  # missing, unreadable or tampered: optimize again
        return False
    return existing.provenance.inputs_sha256 == inputs_sha \
        and existing.provenance.optimizer.get("identity") == identity \
        and existing.provenance.scores.get("answerer_sha256", "") == answerer


def _rescored_rows(path: Path, plan: CallPlan) -> tuple[int, str]:
    """Dev answers the active artifact at ``path`` gives before a new one may replace it (see
    :func:`_compare_with_active`), at most, and why: the confirmation rows; none when there is no
    active artifact (or DSPy chooses, which leaves no rows to test on)."""
    from rosetta.store.artifact import ArtifactError, read_artifact

    try:
        read_artifact(path)
    except (OSError, ArtifactError):
        return 0, ""
    return (plan.race.confirm, "the confirmation rows, free where its prompt raced") if plan.race else (0, "")

