"""What an optimized artifact's provenance records of the search that chose its prompt: the knobs,
the scores (with the intervals named for what they leave out), the calls spent and how the winner
was found. Kept apart from :mod:`rosetta.optimize.target`, which runs the search and writes the
artifact, because ``rosetta evaluate`` (:mod:`rosetta.optimize.rescore`) reads these records back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rosetta.local.project import LocalSettings
from rosetta.local.revision import answerer_build, answerer_revision
from rosetta.optimize.evaluation import interval95
from rosetta.optimize.space import origin

if TYPE_CHECKING:
    from rosetta.optimize.context import Context
    from rosetta.optimize.study import SearchOutcome

SELECTED_DEV_CI = "dev_ci95_ignoring_selection"
"""The winner's dev score's 95% interval, under a name that says what it leaves out: the race chose
the winner for scoring high on those rows, so the interval is optimistic (``test_ci95`` is not)."""


def budget_of(outcome: SearchOutcome) -> dict[str, Any]:
    """The calls and cost the search spent (test's counted apart), per phase, and why it stopped early."""
    return {"calls": outcome.calls, "cost_usd": round(outcome.cost, 6), "test_calls": outcome.test_calls,
            **({"phases": outcome.phases} if outcome.phases else {}),
            **({"stopped": outcome.stopped} if outcome.stopped else {})}


def optimizer_of(name: str, identity: dict[str, Any], outcome: SearchOutcome) -> dict[str, Any]:
    """How the winner was found: by whom, on which split (always dev: test chose nothing), what kind
    of candidate it is, and the race behind it."""
    return {"name": name, "identity": identity, "chosen_on": "dev",
            **({"kind": outcome.kind, "origin": origin(outcome.kind)} if outcome.kind else {}),
            "study": outcome.study, "trials": outcome.trials,
            "pruned": outcome.pruned, **({"cut_short": outcome.cut_short} if outcome.cut_short else {}),
            **({"race": outcome.race, "scoring": outcome.scoring} if outcome.race else {}),
            "space": outcome.space, "proposer": outcome.proposals.describe(),
            **({"notes": outcome.notes} if outcome.notes else {})}


def knobs_of(outcome: SearchOutcome) -> dict[str, Any]:
    """The knobs the winner was rendered with, those left unset omitted."""
    knobs = outcome.prompt.knobs.to_dict()
    if knobs.get("instructions") is None:
        knobs.pop("instructions", None)
    return {key: value for key, value in knobs.items() if value is not None}


def scores_of(outcome: SearchOutcome, context: Context) -> dict[str, Any]:
    """The winner's scores with their intervals, the baseline's, and what they depend on (sampled
    decoding, the decoder build): what ``rosetta evaluate`` compares its own score with."""
    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 6)

    scores: dict[str, Any] = {"metric": context.metric.name, "dev": rounded(outcome.dev_score),
                              "test": rounded(outcome.test_score), "dev_examples": len(context.data.dev),
                              "test_examples": len(context.data.test)}
    if outcome.dev_examples and outcome.dev_examples != len(context.data.dev):  # the budget cut the final rung
        scores["dev_scored"] = outcome.dev_examples
    if outcome.dev_interval is not None:  # named for what it is: dev chose the winner, so it is optimistic
        scores[SELECTED_DEV_CI] = list(outcome.dev_interval)
    test_interval = interval95(outcome.test_per_example)
    if test_interval is not None:  # test chose nothing: the honest estimate of the next rows' score
        scores["test_ci95"] = list(test_interval)
    if outcome.baseline_dev is not None:
        scores["baseline_dev"] = rounded(outcome.baseline_dev)
    if outcome.baseline_test is not None:
        scores["baseline_test"] = rounded(outcome.baseline_test)
    if not outcome.prompt.sampling_params:  # the model cannot decode greedily: an estimate, not a constant
        scores.update({"decoding": "sampled", "repeats": outcome.test_draws})
    revision = answerer_revision(context.model.id, LocalSettings.of(context.settings))
    if revision:  # the embedded model: which decoder build gave the scored answers
        scores["answerer_sha256"] = revision
        scores["answerer_build"] = answerer_build(context.model.id)
    return scores
