"""``rosetta evaluate``: score what the runtime would send for one agent on one model (its compiled
artifact, or the fallback render) on a labeled split, scored as the search scores, and say why the
score differs from the one the artifact recorded when it does. A compiled artifact is re-scored
here, apart from :mod:`rosetta.optimize.target`, which compiles one; :func:`score_split` is also
how the cross-model matrix (:mod:`rosetta.optimize.cross`) scores each prompt on each model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rosetta.local.project import LocalSettings
from rosetta.local.revision import answerer_build, answerer_revision
from rosetta.optimize.context import load_context
from rosetta.optimize.evaluation import draws_for, sampling_seed
from rosetta.optimize.provenance import SELECTED_DEV_CI

if TYPE_CHECKING:
    from rosetta.datasets import Example
    from rosetta.optimize.context import Context
    from rosetta.optimize.metrics import Metric
    from rosetta.render.prompt import RenderedPrompt
    from rosetta.runtime.agent import Agent
    from rosetta.runtime.salvage import Complete
    from rosetta.settings import Settings
    from rosetta.store.artifact import Artifact


@dataclass
class EvaluationReport:
    """What ``rosetta evaluate`` measured, and how it compares with the score the artifact recorded."""

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


def evaluate(definition: Path, model_name: str, *, settings: Settings, split: str = "test",
             metric: str | None = None, dataset: str | None = None, uncompiled: bool = False, jobs: int = 1,
             complete: Complete | None = None, on_progress: Callable[[int, int], None] | None = None,
             repeats: int | None = None) -> EvaluationReport:
    """Score what the runtime would send for ``model`` (its artifact, or the fallback render) on a
    split. A model that cannot decode greedily answers each example ``repeats`` times (default: as
    many as the artifact's score was measured with) and is compared within its recorded interval."""
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
    recorded_interval = scores_then.get(SELECTED_DEV_CI if split == "dev" else "") or scores_then.get(f"{split}_ci95")
    interval = recorded_interval if scores_then.get("decoding") == "sampled" else None  # how far a draw may move it
    rows = score_split(agent, prompt, context.metric, examples, draws=draws, jobs=jobs, complete=complete, label=used,
                       on_progress=on_progress)
    score = sum(r["score"] for r in rows) / len(rows) if rows else 0.0
    report = EvaluationReport(context.signature.name, context.model.id, split, context.metric.name, score,
                              len(examples), sum(1 for r in rows if r["valid"]), sum(r["calls"] for r in rows), used,
                              recorded, rows, interval=tuple(interval) if interval else None, draws=draws)
    if artifact is not None and report.reproduced is False:
        report.differences = score_differences(artifact, context, prompt, split, len(examples))
    return report


def score_split(agent: Agent[Any], prompt: RenderedPrompt, metric: Metric, examples: Sequence[Example], *,
                draws: int = 1, jobs: int = 1, complete: Complete | None = None, label: str,
                on_progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """One scored row per example and draw, scored as the search scores (:class:`Evaluator`: the same
    call, the same failures counted against the prompt or stopping the run, the same calls counted),
    each answer asked afresh; ``jobs`` answers at a time, ``on_progress(done, total)`` after each."""
    from rosetta.optimize.cache import EvalCache
    from rosetta.optimize.evaluation import Budget, Evaluator

    done, total = 0, draws * len(examples)

    def answered() -> None:
        nonlocal done
        done += 1
        if on_progress is not None:
            on_progress(done, total)

    evaluator = Evaluator(agent, metric, EvalCache(None), Budget(), jobs=jobs, complete=complete, on_answer=answered,
                          call_label=label)
    rows = []
    for draw in range(draws):
        for answer, example in zip(evaluator.answers(prompt, examples, draw), examples, strict=True):
            rows.append({"id": example.id, "score": evaluator.score(answer, example), "valid": answer.valid,
                         "calls": answer.calls, "output": answer.data, "expected": example.output,
                         **({"draw": draw} if draws > 1 else {}), **({"error": answer.error} if answer.error else {})})
    return rows


def score_differences(artifact: Artifact, context: Context, prompt: RenderedPrompt, split: str,
                      examples: int) -> list[str]:
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
    recorded_answerer = provenance.scores.get("answerer_sha256")
    answerer = answerer_revision(context.model.id, LocalSettings.of(context.settings))
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
