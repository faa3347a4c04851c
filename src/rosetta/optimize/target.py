"""``rosetta compile --optimize`` and ``rosetta evaluate`` for one agent on one model.

An optimized artifact has the same ``inputs_sha256`` as the plain render of the same definition,
adapter and model — so a plain ``rosetta compile`` keeps it while those are unchanged — and records
in its provenance what the search used (dataset hash, metric, seed, settings) and found (knobs,
dev and test scores, calls and cost). ``--optimize`` re-runs only when one of those changed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rosetta.optimize.budget import CallPlan, call_plan
from rosetta.optimize.context import Context, load_context
from rosetta.optimize.evaluation import draws_for, interval95, sampling_seed
from rosetta.optimize.metrics import Metric
from rosetta.optimize.search import run_search
from rosetta.optimize.study import SearchSettings, SearchStatus
from rosetta.errors import Location, Problem, UsageError
from rosetta.providers.local_revision import answerer_build, answerer_revision

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
    activate: bool = False  # replace the active artifact even when it scored better (or on other data)


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
    rescoring: int = 0  # test answers the active artifact gives first, scored on other data (outside the budget)
    notes: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    activation: str | None = None  # how the new artifact compared with the active one, when they were compared


def optimize(request: OptimizeRequest, *, settings: Any, on_status: Callable[[SearchStatus], None] | None = None,
             complete: Any = None, proposer_complete: Any = None) -> OptimizeReport:
    """Run one optimization and write its artifact (see the module docstring). Long on purpose: its
    steps (context, identity, dry run, the up-to-date check, the search, the artifact) read in order."""
    from rosetta.compile.compiler import CompileOptions
    from rosetta.render.renderer import render
    from rosetta.signature import source_digest
    from rosetta.store.artifact import artifact_path, dump_artifact, model_fingerprint, target_inputs
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
        report.rescoring = 0 if request.activate else _rescored_rows(path, context)
        most = (plan.search_calls() or 0) + plan.dspy_dev * plan.per_answer + plan.test_calls() \
            + report.rescoring * plan.per_answer
        report.cost_usd = _cost_estimate(context, unoptimized, most)
        report.notes.extend([context.data.summary(), *plan.notes])
        return report
    answerer = answerer_revision(model.id)  # a new decoder build makes recorded scores and trials stale
    if not request.force and not search.worker and _optimized_already(path, inputs_sha, identity, answerer):
        report.status = "up to date"
        return report
    study_identity = {"dataset": context.data.sha256, "metric": context.metric.describe(), "source": source_sha,
                      "model": model_fingerprint(model), **({"answerer": answerer} if answerer else {})}
    outcome = _search(request, context, study_identity, plan, on_status=on_status, complete=complete,
                      proposer_complete=proposer_complete)
    report.wall_s = time.monotonic() - started
    if outcome is None:
        report.status = "worker done"
        return report
    provenance = replace(
        expected_provenance(context.definition, model, adapter, settings.root, options.section_roles, source_sha),
        knobs=_chosen_knobs(outcome), dataset_sha256=context.data.sha256, scores=_scores(outcome, context),
        budget=_budget(outcome), optimizer=_optimizer(request.optimizer, identity, outcome))
    artifact = artifact_of(signature, adapter, provenance, outcome.prompt)
    text = dump_artifact(artifact)
    report.outcome = outcome
    report.notes = list(outcome.notes)
    stays, report.activation = (False, None) if request.activate else _compare_with_active(
        path, text, context, complete)
    if stays:
        report.status, report.artifact = "kept as a version", str(publish_version(path, text, settings.compiled_dir))
    else:
        publish(path, text, settings.compiled_dir)
        report.status = "written"
    return report


def _compare_with_active(path: Path, text: str, context: Context, complete: Any) -> tuple[bool, str | None]:
    """Whether the active artifact at ``path`` stays (the new one, ``text``, is kept as a version),
    and what was compared. An optimized artifact gives way only to one scoring at least as well on
    test on the same rows: a search on a few rows, or on other data, must not silently replace a
    measured better prompt. When the data differ, the active prompt is first scored on this search's
    test rows (its calls are said)."""
    from rosetta.errors import RosettaError
    from rosetta.store.artifact import ArtifactError, parse_artifact, read_artifact
    from rosetta.store.versions import short_id

    try:
        active = read_artifact(path)
    except (OSError, ArtifactError):
        return False, None
    new = parse_artifact(text, path=str(path))
    old, now = active.provenance.scores.get("test"), new.provenance.scores.get("test")
    if old is None or active.provenance.dataset_sha256 is None:
        return False, None  # an unoptimized render, or one never scored on test: nothing measured to lose
    rows, version, measured = len(context.data.test), short_id(new.content_sha256), ""
    if _scored_elsewhere(active, new.provenance.dataset_sha256):
        try:
            scored = [_score_example(context.agent, active.prompt, context.metric, example, 0, complete=complete,
                                     label="the active artifact", draws=1) for example in context.data.test]
        except RosettaError as error:
            return True, (f"not activated: the active artifact was scored on other data, and scoring it on these "
                          f"{rows} test rows failed ({error.problems[0].message}); kept as version {version}. Pass "
                          "--activate to replace it")
        old = round(sum(row["score"] for row in scored) / len(scored), 6) if scored else 0.0
        measured = (f" (the active artifact was scored on other data; on these rows it scores {old}, "
                    f"{sum(row['calls'] for row in scored)} calls)")
    if now is not None and now >= old:
        return False, (f"activated: it scores {now} on test, at least the active artifact's {old} on the same "
                       f"{rows} rows{measured}")
    return True, (f"not activated: it scores {now} on test, below the active artifact's {old} on the same {rows} "
                  f"rows{measured}; kept as version {version}. Pass --activate to replace it anyway, or test it with "
                  "`rosetta experiment start`")


def _search(request: OptimizeRequest, context: Any, identity: dict[str, Any], plan: CallPlan, *, on_status: Any,
            complete: Any, proposer_complete: Any) -> Any:
    """The chosen optimizer's outcome (None for a worker that joined someone else's study)."""
    from rosetta.optimize.cache import EvalCache

    cache = EvalCache(context.project_state / "eval-cache.sqlite")
    if request.optimizer != "rosetta":
        from rosetta.optimize.dspy_backend import run_dspy

        return run_dspy(request.optimizer, context, request.settings, cache=cache, complete=complete,
                        on_status=on_status)
    journal = default_journal(context.project_state.parent, context.signature.name, context.model.id)
    proposer_complete = proposer_complete or _declared_proposer(context, request.settings.proposer)
    return run_search(context.agent, context.signature, context.model, context.adapter, context.data,
                      context.metric, request.settings, cache=cache, default_storage=journal, complete=complete,
                      proposer_complete=proposer_complete, on_status=on_status, identity=identity,
                      fresh=request.force, calls=plan)


def _declared_proposer(context: Any, name: str | None) -> Any:
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


def default_journal(root: Path, agent: str, model_id: str) -> Path:
    """Where a search keeps its optuna study unless ``--storage`` names another storage."""
    return root / ".rosetta" / "studies" / agent / (model_id.replace("/", "__") + ".journal")


def last_study(root: Path, compiled_dir: Path, agent: str, model_id: str,
               storage: str | None = None) -> tuple[Any, str]:
    """The study of the last search of ``agent`` on ``model_id`` (the newest run of the study its
    artifact names, else the study whose trials ran last) and its storage's label; a UsageError
    saying how to make one when there is none."""
    import optuna

    from rosetta.optimize.study import latest_study, open_storage
    from rosetta.store.artifact import ArtifactError, artifact_path, read_artifact

    journal = default_journal(root, agent, model_id)
    if storage is None and not journal.is_file():
        raise UsageError(Problem(f"no search of {agent} on {model_id} is recorded", Location(str(journal)),
                                 hint=f"run `rosetta compile {agent} --model {model_id} --optimize`, or pass the "
                                      "--storage a search used"))
    opened, label = open_storage(storage, journal)
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


def _budget(outcome: Any) -> dict[str, Any]:
    return {"calls": outcome.calls, "cost_usd": round(outcome.cost, 6), "test_calls": outcome.test_calls,
            **({"phases": outcome.phases} if outcome.phases else {}),
            **({"stopped": outcome.stopped} if outcome.stopped else {})}


def _optimizer(name: str, identity: dict[str, Any], outcome: Any) -> dict[str, Any]:
    return {"name": name, "identity": identity, "study": outcome.study, "trials": outcome.trials,
            "pruned": outcome.pruned, **({"cut_short": outcome.cut_short} if outcome.cut_short else {}),
            **({"race": outcome.race, "scoring": outcome.scoring} if outcome.race else {}),
            "space": outcome.space, "proposer": outcome.proposals.describe(),
            **({"notes": outcome.notes} if outcome.notes else {})}


def _chosen_knobs(outcome: Any) -> dict[str, Any]:
    knobs = outcome.prompt.knobs.to_dict()
    if knobs.get("instructions") is None:
        knobs.pop("instructions", None)
    return {key: value for key, value in knobs.items() if value is not None}


def _scores(outcome: Any, context: Context) -> dict[str, Any]:
    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 6)

    scores: dict[str, Any] = {"metric": context.metric.name, "dev": rounded(outcome.dev_score),
                              "test": rounded(outcome.test_score), "dev_examples": len(context.data.dev),
                              "test_examples": len(context.data.test)}
    if outcome.dev_examples and outcome.dev_examples != len(context.data.dev):  # the budget cut the final rung
        scores["dev_scored"] = outcome.dev_examples
    if outcome.dev_interval is not None:
        scores["dev_ci95"] = list(outcome.dev_interval)
    if outcome.baseline_dev is not None:
        scores["baseline_dev"] = rounded(outcome.baseline_dev)
    if outcome.baseline_test is not None:
        scores["baseline_test"] = rounded(outcome.baseline_test)
    if not outcome.prompt.sampling_params:  # the model cannot decode greedily: an estimate, not a constant
        interval = interval95(outcome.test_per_example)
        scores.update({"decoding": "sampled", "repeats": outcome.test_draws,
                       **({"test_ci95": list(interval)} if interval else {})})
    revision = answerer_revision(context.model.id)
    if revision:  # the embedded model: which decoder build gave the scored answers
        scores["answerer_sha256"] = revision
        scores["answerer_build"] = answerer_build(context.model.id)
    return scores


def _scored_elsewhere(active: Any, dataset_sha: str) -> bool:
    """Whether the active artifact's test score was measured on other data than ``dataset_sha``'s:
    before the two are compared, it is then scored on this search's test rows."""
    recorded = active.provenance.dataset_sha256
    return active.provenance.scores.get("test") is not None and recorded is not None and recorded != dataset_sha


def _rescored_rows(path: Path, context: Context) -> int:
    """Test answers the active artifact at ``path`` will give before a new one may replace it (see
    :func:`_compare_with_active`): all of test when it was scored on other data, else none."""
    from rosetta.store.artifact import ArtifactError, read_artifact

    try:
        active = read_artifact(path)
    except (OSError, ArtifactError):
        return 0
    return len(context.data.test) if _scored_elsewhere(active, context.data.sha256) else 0


def _cost_estimate(context: Context, prompt: Any, calls: int) -> float:
    """USD for ``calls`` calls of ``prompt``, from litellm's prices (0 when unknown or local)."""
    try:
        from rosetta.providers.litellm_offline import import_litellm

        litellm = import_litellm()
        info = litellm.get_model_info(context.model.id)
        per_call = prompt.tokens.get("total", 0) * float(info.get("input_cost_per_token") or 0) \
            + prompt.generation.get("max_tokens", 0) * float(info.get("output_cost_per_token") or 0)
    except Exception:  # litellm does not know the model's price
        return 0.0
    return round(calls * per_call, 4)


# -- rosetta evaluate -----------------------------------------------------------------------------------


@dataclass
class EvaluationReport:
    agent: str
    model: str
    split: str
    metric: str
    score: float
    examples: int
    valid: int
    calls: int
    selection: str  # what the runtime used: artifact path, or "uncompiled: why"
    recorded: float | None  # the artifact's recorded score for this split
    rows: list[dict[str, Any]] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)  # why the score may not match ``recorded``
    interval: tuple[float, float] | None = None  # the recorded 95% interval of a sampled score
    draws: int = 1  # answers per example behind ``score``

    @property
    def reproduced(self) -> bool | None:
        """Whether ``score`` matches the recorded one: exactly for a model that decodes greedily,
        within the recorded 95% interval for one whose answers are sampled."""
        if self.recorded is None:
            return None
        if self.interval is not None:
            return self.interval[0] - 5e-7 <= self.score <= self.interval[1] + 5e-7
        return abs(self.recorded - self.score) < 5e-7


def evaluate(definition: Path, model_name: str, *, settings: Any, split: str = "test", metric: str | None = None,
             dataset: str | None = None, uncompiled: bool = False, jobs: int = 1, complete: Any = None,
             on_progress: Callable[[int, int], None] | None = None, repeats: int | None = None) -> EvaluationReport:
    """Score what the runtime would send for ``model`` (its artifact, or the fallback render) on a
    split. A model that cannot decode greedily answers each example ``repeats`` times (default: as
    many as the artifact's score was measured with) and is compared within its recorded interval."""
    from concurrent.futures import ThreadPoolExecutor

    context = load_context(definition, model_name, settings=settings, metric=metric, dataset=dataset)
    agent, examples = context.agent, context.data.split(split)
    selection = agent.explain(context.model.id)
    if uncompiled:
        prompt = agent.selector.render_uncompiled(context.model)
        used = "uncompiled render (--uncompiled)"
    else:
        prompt = selection.prompt
        used = selection.artifact or f"uncompiled: {selection.reason}"
    recorded, artifact = None, None
    if selection.artifact and not uncompiled:
        from rosetta.store.artifact import read_artifact

        artifact = read_artifact(Path(selection.artifact))
        recorded = artifact.provenance.scores.get(split)
    scores_then = artifact.provenance.scores if artifact is not None else {}
    draws = draws_for(prompt, repeats or int(scores_then.get("repeats", 1)))
    interval = scores_then.get(f"{split}_ci95") if scores_then.get("decoding") == "sampled" else None
    done = 0

    def one(item: tuple[Any, int]) -> dict[str, Any]:
        nonlocal done
        row = _score_example(agent, prompt, context.metric, *item, complete=complete, label=used, draws=draws)
        done += 1
        if on_progress is not None:
            on_progress(done, len(examples) * draws)
        return row

    items = [(example, draw) for draw in range(draws) for example in examples]
    if jobs > 1:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            rows = list(pool.map(one, items))
    else:
        rows = [one(item) for item in items]
    score = sum(r["score"] for r in rows) / len(rows) if rows else 0.0
    report = EvaluationReport(context.signature.name, context.model.id, split, context.metric.name, score,
                              len(examples), sum(1 for r in rows if r["valid"]), sum(r["calls"] for r in rows), used,
                              recorded, rows, interval=tuple(interval) if interval else None, draws=draws)
    if artifact is not None and report.reproduced is False:
        report.differences = score_differences(artifact, context, prompt, split, len(examples))
    return report


def _score_example(agent: Any, prompt: Any, metric: Metric, example: Any, draw: int, *, complete: Any, label: str,
                   draws: int) -> dict[str, Any]:
    """One answer to ``example`` (the ``draw``-th of ``draws``) through the runtime's call path, scored;
    a failure of the prompt scores 0, a failure of the provider stops the evaluation."""
    from rosetta.runtime.invoke import ModelCallError

    try:
        result = agent.run_prompt(prompt, example.inputs, complete=complete, label=label,
                                  **sampling_seed(prompt, example.id + (f"#{draw}" if draw else "")))
        data, valid, error = result.data, result.valid, None
        calls = sum(1 for a in result.attempts if a.outcome in ("ok", "invalid"))
    except ModelCallError as failure:
        if failure.kind in ("transient", "unavailable", "exhausted", "credentials"):
            raise
        data, valid, calls, error = None, False, len(failure.attempts), failure.problems[0].message
    except UsageError as failure:
        data, valid, calls, error = None, False, 0, failure.problems[0].message
    return {"id": example.id, "score": metric.score(data, example.output, valid=valid), "valid": valid,
            "calls": calls, "output": data, "expected": example.output, **({"draw": draw} if draws > 1 else {}),
            **({"error": error} if error else {})}


def score_differences(artifact: Any, context: Context, prompt: Any, split: str, examples: int) -> list[str]:
    """What differs between the artifact's compile-time scoring and this one, most likely first; one
    line saying so when nothing known differs (the provider then answered the same prompt differently)."""
    provenance = artifact.provenance
    reasons = []
    if provenance.dataset_sha256 and provenance.dataset_sha256 != context.data.sha256:
        recorded = provenance.scores.get(f"{split}_examples")
        reasons.append("the labeled data changed since the artifact was compiled"
                       + (f" ({recorded} {split} examples then, {examples} now)" if recorded != examples else "")
                       + ": compile --optimize again to score the new data")
    compiled_metric = (provenance.optimizer.get("identity") or {}).get("metric") or {
        "name": provenance.scores.get("metric")}
    if compiled_metric != context.metric.describe():
        reasons.append(f"the metric differs: compiled with {_metric_text(compiled_metric)}, scored now with "
                       f"{_metric_text(context.metric.describe())}")
    recorded_answerer, answerer = provenance.scores.get("answerer_sha256"), answerer_revision(context.model.id)
    if answerer and recorded_answerer != answerer:
        reasons.append(
            ("a different decoder build answers now" if recorded_answerer else
             "the artifact does not record which decoder build answered at compile time")
            + f" (now {answerer_build(context.model.id)}"
            + (f"; then {provenance.scores.get('answerer_build')}" if provenance.scores.get("answerer_build") else "")
            + "; rosetta's decoding code counts too): greedy answers can differ between builds, so compile "
              "--optimize --force on this one to record scores it reproduces")
    if context.metric.needs_model:
        reasons.append("the judge metric grades with a model, whose verdicts may vary between runs")
    generation = prompt.generation
    if generation.get("temperature") != 0 and "seed" not in generation:
        temperature = generation.get("temperature", "the provider's default")
        seeded = bool(sampling_seed(prompt, ""))
        reasons.append(f"the prompt samples (temperature {temperature}), so runs can draw different answers"
                       + (" unless the provider honors the seed rosetta sends with each example"
                          if seeded else "; this provider takes no seed")
                       + ": set temperature: 0 in generation_params for exact reproduction")
    if not reasons:
        reasons.append(f"the same prompt, data and metric: {context.model.id} answered differently than at "
                       "compile time (its provider is not deterministic even at temperature 0, or its weights "
                       "changed); see --format json for each example's answer")
    return reasons


def _metric_text(metric: dict[str, Any]) -> str:
    settings = {k: v for k, v in metric.items() if k != "name"}
    return str(metric.get("name")) + (f" {settings}" if settings else "")
