"""The budget is the search's own: a cached answer costs what the paid one did against
``--max-calls``, and starts only when the same check lets a paid one start. So a search with the
same seed, data and budget writes the same bytes whether its evaluation cache is cold or was warmed
by another run (a larger budget, another seed), and never spends past ``--max-calls``.

Before, cached answers skipped the check: on a cache warmed by a larger budget, candidates that
the cold run held back for the finalists' calls answered anyway, and the search logged 112 calls
within ``--max-calls 100``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import scripted_model
from scripted_model import write_toy_project

from rosetta.settings import load_settings
from rosetta.datasets import Example
from rosetta.optimize.cache import Answer, EvalCache
from rosetta.optimize.evaluation import Budget, BudgetExhausted, Evaluator
from rosetta.optimize.metrics import Metric
from rosetta.optimize.study import SearchSettings
from rosetta.optimize.target import OptimizeRequest, optimize


def search(root: Path, model: str, **settings: Any) -> Any:
    knobs = {"trials": None, "proposer": None, "nearest_demos": False, **settings}
    request = OptimizeRequest(definition=root / "signatures" / "toy-sorter.md", model=model,
                              settings=SearchSettings(**knobs), activate=True)
    return optimize(request, settings=load_settings(root)).outcome


@pytest.mark.parametrize("model, budget, warmer", [
    # about half of scripted/stutter's answers take a retry: the race holds calls back for its later rungs
    ("scripted/stutter", 100, {"max_calls": 300}),  # failed before: 112 calls, 4 more candidates through rung 0
    ("scripted/stutter", 100, {"max_calls": 100, "seed": 1}),  # failed before
    # guards that held before too: every answer retried (garbage), no retries at all (toy)
    ("scripted/garbage", 101, {"max_calls": 301}),
    ("scripted/toy", 40, {"max_calls": 120}),
])
def test_a_cache_warmed_by_another_run_changes_nothing_the_search_writes(
        tmp_path: Path, model: str, budget: int, warmer: dict[str, Any]) -> None:
    scripted_model.register()
    cold, warm = tmp_path / "cold", tmp_path / "warm"
    for root in (cold, warm):
        root.mkdir()
        write_toy_project(root)
    artifact = Path("compiled/toy-sorter") / f"{model}.yaml"
    first = search(cold, model, max_calls=budget)
    search(warm, model, **warmer)  # another study (its budget or seed differ) leaves its answers in the cache
    again = search(warm, model, max_calls=budget)
    assert (warm / artifact).read_bytes() == (cold / artifact).read_bytes()
    assert again.paid_calls < first.paid_calls  # the cache was warm: the same search, fewer calls paid
    assert again.calls == first.calls <= budget and again.phases == first.phases
    assert again.cut_short == first.cut_short


def test_a_cached_verdict_starts_only_when_its_worst_case_fits() -> None:
    # a judge's cached verdict used to be charged without a check (answers: see the test above, whose stutter
    # cases failed for that): it could start where a paid one could not
    graded: list[object] = []
    judge = Metric("judge", lambda p, e: graded.append(p) or 1.0, needs_model=True, worst_case_calls=lambda: 3)
    budget = Budget(max_calls=10, calls=8)  # 2 calls left: a verdict may take 3 (its answer and 2 retries)
    evaluator = Evaluator(agent=None, metric=judge, cache=EvalCache(None), budget=budget)
    answer, example = Answer({"label": "alpha"}, "", True, 1, 0.0), Example("e1", {"text": "x"}, {"label": "alpha"})
    with pytest.raises(BudgetExhausted, match="--max-calls 10"):
        evaluator.score(answer, example)
    budget.calls = 7
    assert evaluator.score(answer, example) == 1.0 and budget.calls == 8 and budget.paid_calls == 1
    with pytest.raises(BudgetExhausted, match="--max-calls 10"):
        evaluator.score(answer, example)  # cached now, and refused all the same
    budget.calls = 7
    assert evaluator.score(answer, example) == 1.0 and budget.calls == 8 and budget.paid_calls == 1  # charged, unpaid
    assert len(graded) == 1
