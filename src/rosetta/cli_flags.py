"""The search flags shared by ``rosetta compile --optimize`` and ``rosetta optimize`` (a module of
their own so that both commands can declare them without importing each other)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import typer


@dataclass(frozen=True)
class SearchFlags:
    """The search flags shared by ``compile --optimize`` and ``optimize``."""

    metric: str | None = None
    dataset: str | None = None
    trials: int = 20
    max_calls: int | None = None
    max_cost: float | None = None
    timeout: float | None = None
    dry_run: bool = False
    seed: int = 0
    storage: str | None = None
    proposer: str | None = None
    proposals: int = 3
    optimizer: str = "rosetta"
    minibatch: int = 10
    pruner: str = "halving"
    pareto: bool = False
    baseline: bool = False
    jobs: int = 1
    force: bool = False
    nearest_demos: bool = True

    def settings(self, model: str, worker: bool = False) -> Any:
        from rosetta.compile.optimize.study import SearchSettings

        proposer = None if (self.proposer or "").lower() == "none" else (self.proposer or model)
        return SearchSettings(trials=self.trials, max_calls=self.max_calls, max_cost=self.max_cost,
                              timeout_s=self.timeout, seed=self.seed, minibatch=self.minibatch, pruner=self.pruner,
                              proposer=proposer, proposals=self.proposals, pareto=self.pareto, jobs=self.jobs,
                              storage=self.storage, worker=worker, baseline_test=self.baseline,
                              nearest_demos=self.nearest_demos)


MetricOpt = Annotated[str | None, typer.Option("--metric", help="exact | fields | schema_valid | numeric | judge | "
                                               "module:function.", show_default="the definition's evaluation.metric")]
DatasetOpt = Annotated[str | None, typer.Option("--dataset", help="Folder of train/dev/test JSONL or CSV, or "
                                                "hub:owner/name.", show_default="datasets/<agent>/")]
TrialsOpt = Annotated[int, typer.Option("--trials", min=1, help="Variants to try (study-wide, across resumes and "
                                        "workers).")]
MaxCallsOpt = Annotated[int | None, typer.Option("--max-calls", min=1, help="Most model calls for the search "
                                                 "(the final test pass is extra).")]
MaxCostOpt = Annotated[float | None, typer.Option("--max-cost", min=0, help="Most USD for the search (litellm "
                                                  "prices).")]
TimeoutOpt = Annotated[float | None, typer.Option("--timeout", min=1, help="Stop searching after this many "
                                                  "seconds.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print the estimated calls and cost; call nothing.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of the sampler, demo sets and dev order.")]
StorageOpt = Annotated[str | None, typer.Option("--storage", help="optuna storage URL (sqlite:///x.db, "
                                                "postgresql://...) shared by workers.",
                                                show_default=".rosetta/studies/<agent>/<model>.journal")]
ProposerOpt = Annotated[str | None, typer.Option("--proposer", help="Model that proposes instruction rewrites, "
                                                 "or 'none'.", show_default="the target model")]
ProposalsOpt = Annotated[int, typer.Option("--proposals", min=0, help="Instruction candidates to ask for.")]
OptimizerOpt = Annotated[str, typer.Option("--optimizer", help="rosetta | dspy-mipro | dspy-bootstrap.")]
MinibatchOpt = Annotated[int, typer.Option("--minibatch", min=1, help="Dev examples per pruning step.")]
PrunerOpt = Annotated[str, typer.Option("--pruner", help="halving | median | none.")]
ParetoOpt = Annotated[bool, typer.Option("--pareto", help="Score vs prompt tokens: take the shortest prompt "
                                         "within 0.02 of the best score.")]
BaselineOpt = Annotated[bool, typer.Option("--baseline", help="Also score the unoptimized render on test and "
                                           "record it.")]
NearestDemosOpt = Annotated[bool, typer.Option("--nearest-demos/--fixed-demos", help="Also try giving each "
                                               "request the train rows most similar to it as demos (chosen per "
                                               "request), or only fixed demo sets.")]
JobsOpt = Annotated[int, typer.Option("--jobs", "-j", min=1, help="Evaluation calls at once.")]


