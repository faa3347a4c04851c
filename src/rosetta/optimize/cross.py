"""The cross-model matrix: does each model do best with its own prompt?

Every model's prompt — its compiled artifact, else what the runtime falls back to — is sent as is
(the same messages, demos and generation parameters; only the model changes) to every model and
scored on one labeled split through the runtime's call path. Rows say whose prompt, columns which
model answered; a last row scores each model's own uncompiled render, the baseline that
optimizing is meant to beat. The claim rosetta's compile step rests on is that each column's
best row is the column's own model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rosetta.errors import Problem, UsageError
from rosetta.optimize.context import Context, load_context
from rosetta.optimize.rescore import score_split
from rosetta.store.cross import UNCOMPILED  # the matrix's last row: each model's own uncompiled render

if TYPE_CHECKING:
    from rosetta.runtime.salvage import Complete
    from rosetta.settings import Settings


@dataclass
class CrossMatrix:
    """Scores of every model's prompt on every model, on one split."""

    agent: str
    split: str
    metric: str
    examples: int
    models: list[str]  # canonical ids, in the order asked (rows and columns alike)
    prompts: dict[str, str]  # row model → what its prompt is (artifact path, or "uncompiled: why")
    scores: dict[str, dict[str, float]]  # row (whose prompt, or UNCOMPILED) → column (who answered) → score
    valid: dict[str, dict[str, int]] = field(default_factory=dict)  # the same, counting valid answers
    recorded: str | None = None  # where the matrix was kept for the runtime, when it was

    def best(self, column: str) -> list[str]:
        """The rows scoring highest on ``column`` (all of them on a tie)."""
        top = max(self.scores[row][column] for row in self.scores)
        return [row for row in self.scores if self.scores[row][column] >= top - 5e-7]

    def own_prompt_wins(self, column: str) -> bool:
        """Whether ``column``'s own prompt scores at least as well there as every other model's."""
        own = self.scores[column][column]
        return all(own >= self.scores[row][column] - 5e-7 for row in self.models)

    def to_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "split": self.split, "metric": self.metric, "examples": self.examples,
                "models": self.models, "prompts": self.prompts, "scores": self.scores, "valid": self.valid,
                "recorded": self.recorded,
                "best": {column: self.best(column) for column in self.models},
                "own_prompt_wins": {column: self.own_prompt_wins(column) for column in self.models}}


def cross_evaluate(definition: Path, models: Sequence[str], *, settings: Settings, split: str = "test",
                   metric: str | None = None, dataset: str | None = None, jobs: int = 1,
                   complete: Complete | None = None, on_progress: Callable[[int, int], None] | None = None,
                   record: bool = False) -> CrossMatrix:
    """Score every model's prompt on every model of ``models`` (two or more) on ``split``;
    ``on_progress(done, total)`` counts answers over the whole matrix. ``record``: keep the matrix in
    ``compiled/<agent>/cross.yaml``, where the runtime's fallback reads it (:mod:`rosetta.store.cross`)."""
    contexts: dict[str, Context] = {}
    for name in models:
        context = load_context(definition, name, settings=settings, metric=metric, dataset=dataset)
        contexts.setdefault(context.model.id, context)  # two names of one model count once
    if len(contexts) < 2:
        raise UsageError(Problem(f"the matrix needs two models or more; got {', '.join(contexts)}", field="--cross",
                                 hint="name each model to compare, e.g. --cross local/gemma-3-270m "
                                      "--cross local/smollm2-135m-instruct"))
    ids = list(contexts)
    first = contexts[ids[0]]
    examples = first.data.split(split)
    selections = {model: contexts[model].agent.explain(model) for model in ids}
    prompts = {model: selection.artifact or f"uncompiled: {selection.reason}" for model, selection in selections.items()}
    sent = [(row, column, replace(selections[row].prompt, model=column)) for row in ids for column in ids]
    sent += [(UNCOMPILED, column, contexts[column].agent.selector.render_uncompiled(contexts[column].model))
             for column in ids]
    total, done = len(sent) * len(examples), 0
    scores: dict[str, dict[str, float]] = {}
    valid: dict[str, dict[str, int]] = {}
    for row, column, prompt in sent:
        def progressed(answered: int, _: int, before: int = done) -> None:
            if on_progress is not None:
                on_progress(before + answered, total)

        label = f"{'uncompiled render' if row == UNCOMPILED else f'prompt of {row}'} on {column}"
        rows = score_split(first.agent, prompt, first.metric, examples, jobs=jobs, complete=complete, label=label,
                           on_progress=progressed)
        done += len(examples)
        scores.setdefault(row, {})[column] = sum(r["score"] for r in rows) / len(rows) if rows else 0.0
        valid.setdefault(row, {})[column] = sum(1 for r in rows if r["valid"])
    matrix = CrossMatrix(first.signature.name, split, first.metric.name, len(examples), ids, prompts, scores, valid)
    if record:
        from datetime import datetime, timezone

        from rosetta.store.cross import CrossRecord
        from rosetta.store.publish import write_cross

        lent = {model: s.version if s.kind == "artifact" else None for model, s in selections.items()}
        measured = datetime.now(timezone.utc).isoformat(timespec="seconds")
        matrix.recorded = str(write_cross(settings.compiled_dir, CrossRecord(
            matrix.agent, split, matrix.metric, matrix.examples, first.data.sha256, measured, lent, scores)))
    return matrix
