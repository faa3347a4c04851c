"""The race's plan, dev order and choices, and the label-odds score: pure functions, no model."""

from __future__ import annotations

import math
import sys
from types import SimpleNamespace

import pytest
from conftest import REPO

from rosetta.optimize.label_odds import LabelField, label_field, label_probability
from rosetta.optimize.race import (
    FIRST_ROWS,
    Plan,
    Standing,
    dev_order,
    leaders,
    one_sided_p,
    plan,
    replaces,
    rungs,
    screening_rows,
    split_dev,
    tie_order,
    winner,
)


def _unspendable(race: Plan, budget: int, cap: int = 80) -> bool:
    """Whether no rung of ``race`` could take one more challenger within ``budget``."""
    left = budget - race.calls()
    return all(keep == (cap if rung == 0 else race.keep[rung - 1]) or left < rows - before
               for rung, (keep, rows, before) in enumerate(zip(race.keep, race.rows, (0, *race.rows))))


@pytest.mark.parametrize("dev, budget", [(50, 150), (40, 134), (30, 150), (16, 40), (50, 1000), (200, 400)])
def test_the_plan_fits_the_budget_screens_on_a_third_of_dev_and_spends_what_it_can(dev: int, budget: int) -> None:
    race = plan(dev, budget)
    assert race is not None and race.calls() <= budget
    assert race.rows[-1] == screening_rows(dev) and race.rows[-1] + race.confirm == dev  # the rest confirms
    assert race.anchors == 1 and race.keep[-1] >= 1  # the prior on all of dev, and a challenger to test
    assert race.calls() == dev + race.answers_after(-1, race.keep[0])
    assert list(race.rows) == sorted(set(race.rows)) and list(race.keep) == sorted(race.keep, reverse=True)
    # more candidates than one pass over dev per candidate would allow
    assert race.candidates >= min(budget // dev, 81)
    assert _unspendable(race, budget)


def test_150_calls_on_50_dev_rows_race_tens_of_candidates_from_two_rows() -> None:
    # the first rung's size is bench/race_rungs.py's choice: two rows, whatever the scoring
    assert FIRST_ROWS == 2
    # the prior's 50 answers; 12 challengers on 17 screening rows; the best one on the other 33
    assert plan(50, 146) == Plan((2, 6, 17), (12, 4, 2), 33)
    assert plan(40, 148) == Plan((2, 5, 14), (23, 6, 2), 26)  # vuln-triage's dev: all 148 answers planned
    assert plan(40, 148, anchors=2) == Plan((2, 5, 14), (12, 3, 1), 26, anchors=2)  # two seeded prompts on dev
    assert plan(50, 146, first=8) == Plan((8, 17), (5, 2), 33)  # an informed first cut races fewer
    assert rungs(50, 25) == (25, 50) and rungs(16, 10) == (16,) and rungs(200, 2) == (2, 6, 20, 63, 200)


def test_calls_a_cut_in_thirds_leaves_over_buy_candidates_in_rung_0_then_in_later_rungs() -> None:
    assert plan(40, 135) == Plan((2, 5, 14), (16, 6, 2), 26)
    # twelve candidates cost 92 of 200 calls: the prior's 16 answers, 11 challengers on all 6 screening rows, in one
    # rung (a rung that cuts no challenger decides nothing), and the best one on the 10 confirmation rows
    assert plan(16, 200, 12) == Plan((6,), (11,), 10)
    assert plan(16, 57, 1) == Plan((6,), (0,), 10)  # one candidate: the prior alone, on all of dev
    narrow = Plan((2, 6, 16), (12, 4, 2), 16)
    assert narrow.widened(2, 4, 25) == Plan((2, 6, 16), (12, 4, 4), 16)  # two more finalists, 10 answers each
    assert narrow.widened(1, 12, 3) == narrow  # a rung-1 challenger costs 4 answers
    assert narrow.answers_after(1, 4) == 2 * 10 + 16  # the last rung, then the best challenger confirms


def test_no_plan_below_the_priors_pass_and_none_pruner_scores_everyone_on_the_screening_rows() -> None:
    assert plan(50, 49) is None and plan(50, 50) == Plan((17,), (0,), 33)  # the prior alone answers all of dev
    assert plan(50, 99, anchors=2).anchors == 1  # one pass over dev is all the budget pays for: one seeded prompt
    flat = plan(30, 150, halving=False)
    assert flat == Plan((10,), (10,), 20) and flat.calls() == 30 + 10 * 10 + 20
    unbounded = plan(50, None, 24)
    assert unbounded.candidates == 24 and unbounded.keep[-1] <= 3


def test_the_first_rung_size_is_the_one_the_simulation_chose() -> None:
    # bench/race_rungs.py's finding, kept as a guard: with the budget fixed, racing more candidates from
    # two rows gives a better winner than an informed first cut among fewer, though the best raced
    # survives that first cut less often
    import numpy as np

    sys.path.insert(0, str(REPO / "bench"))
    import race_rungs

    small, informed = (race_rungs.measure(plan(50, 148, first=first), "synthetic:skewed", np.random.default_rng(55),
                                          400, 50, []) for first in (FIRST_ROWS, 8))
    assert small["true"] > informed["true"] + 0.01
    assert small["survived"][0] < informed["survived"][0]


def test_the_dev_order_interleaves_labels_and_both_halves_cover_them() -> None:
    rows = [SimpleNamespace(id=str(i), output={"label": label}) for i, label in enumerate("aaaaaabbbc")]
    order = dev_order(rows, 0, lambda output: output["label"])
    assert [r.output["label"] for r in order[:3]] == ["a", "b", "c"] and sorted(order, key=lambda r: r.id) == rows
    assert dev_order(rows, 0, lambda output: output["label"]) == order  # seeded
    screening, confirming = split_dev(rows, 0, lambda output: output["label"])
    assert len(screening) == screening_rows(10) == 4 and sorted(screening + confirming, key=lambda r: r.id) == rows
    assert sorted(r.output["label"] for r in screening) == ["a", "a", "b", "c"]  # each label in proportion
    assert [r.output["label"] for r in screening][:3] == ["a", "b", "c"]  # the screening opens with several labels
    four = [SimpleNamespace(id=str(i), output={"label": "abcd"[i % 4]}) for i in range(16)]  # an interleave's period
    screening, confirming = split_dev(four, 3, lambda output: output["label"])
    for label in "abcd":  # every third row of the interleaved order would not cover the labels alike
        assert sum(r.output["label"] == label for r in screening) in (1, 2)


def test_the_paired_test_replaces_the_prior_only_on_a_clear_gain_and_never_on_a_tie() -> None:
    prior = [1.0, 0.0] * 5
    assert replaces(prior, prior) == (False, 1.0)  # a tie keeps the prior
    assert replaces([1.0] * 10, prior) == (True, pytest.approx(1 / 32))  # five wins, no loss
    assert replaces([1.0] * 8 + [1.0, 0.0], prior) == (False, pytest.approx(1 / 16))  # four: not enough at 95%
    assert not replaces([0.0] * 10, prior)[0]  # worse: never
    # an exact sign-flip test: 5 wins, 1 loss of equal size → P(sum ≥ 4) = 7/64
    assert one_sided_p([1, 1, 1, 1, 1, -1]) == pytest.approx(7 / 64)
    # fractional per-field scores; many rows fall back to seeded draws, the same every time
    scores = [0.5, 0.25, -0.25, 0.75, 0.1, 0.0, 0.3] * 6
    assert one_sided_p(scores) == one_sided_p(scores) < 0.01


def _standing(candidate: int, scores: list[float], tokens: int = 100, tie: int = 0) -> Standing:
    return Standing(candidate, tuple(scores), tuple(round(s) for s in scores), tokens, tie=tie)


def test_ties_go_to_a_seeded_order_not_to_the_lower_candidate_number() -> None:
    # the seeded prompts (the unoptimized render, first-k, nearest-k) come first in the space's order: ties
    # used to go to them
    ties = tie_order(25, seed=0)
    assert sorted(ties) == list(range(25)) and tie_order(25, seed=0) == ties and tie_order(25, seed=1) != ties
    tied = [_standing(c, [1, 0], tie=ties[c]) for c in range(25)]
    assert leaders(tied, 1) == [ties.index(0)] != [0]
    firsts = [tie_order(25, seed).index(0) for seed in range(250)]  # who wins a 25-way tie, over seeds
    assert firsts.count(0) < 30 and len(set(firsts)) > 20
    assert leaders([_standing(3, [1, 0], tie=2), _standing(1, [0, 1], tie=1), _standing(2, [0, 0], tie=0)], 2) == [1, 3]
    assert winner([_standing(4, [1, 1], tie=1), _standing(6, [1, 1], tie=0)]).candidate == 6


def test_the_winner_prefers_the_shorter_prompt_within_noise() -> None:
    best = _standing(5, [1, 1, 0, 1, 1, 0, 1, 1], tokens=900)
    close = _standing(7, [1, 0, 1, 1, 1, 0, 1, 0], tokens=300)  # a row behind: within noise
    far = _standing(9, [0, 0, 0, 1, 0, 0, 1, 0], tokens=100)
    assert winner([best, close, far]).candidate == 7
    assert winner([best, far]).candidate == 5
    assert winner([best, close], tolerance=0.0).candidate == 5


def _entry(token: str, logprob: float, top: list[tuple[str, float]]) -> dict:
    return {"token": token, "logprob": logprob, "top_logprobs": [{"token": t, "logprob": p} for t, p in top]}


def test_the_correct_labels_probability_comes_from_the_answers_tokens() -> None:
    field = LabelField("label", ("positive", "negative", "neutral"))
    ln = math.log
    content = [_entry('{"', 0.0, [('{"', 0.0)]), _entry("label", 0.0, [("label", 0.0)]),
               _entry('":"', 0.0, [('":"', 0.0)]),
               _entry("n", ln(0.6), [("n", ln(0.6)), ("p", ln(0.3)), ("positive", ln(0.1))]),
               _entry("ega", ln(0.5), [("ega", ln(0.5)), ("eu", ln(0.5))]),
               _entry("tive", 0.0, [("tive", 0.0)]), _entry('"}', 0.0, [('"}', 0.0)])]
    assert label_probability(content, field, "negative") == pytest.approx(0.3)
    assert label_probability(content, field, "neutral") == pytest.approx(0.3)
    assert label_probability(content, field, "positive") == pytest.approx(0.4)
    assert label_probability(content[:2], field, "positive") is None  # the answer holds no label


def test_the_value_may_start_inside_a_token() -> None:
    field = LabelField("label", ("yes", "no"))
    content = [_entry('{"label": "y', math.log(0.8), [('{"label": "y', math.log(0.8)), ('{"label": "n', math.log(0.2))]),
               _entry('es"}', 0.0, [('es"}', 0.0)])]
    assert label_probability(content, field, "yes") == pytest.approx(0.8)
    assert label_probability(content, field, "no") == pytest.approx(0.2)


def test_label_odds_apply_only_where_the_metric_scores_one_label() -> None:
    label_only = SimpleNamespace(output_schema={"type": "object", "properties": {
        "label": {"type": "string", "enum": ["a", "b"]}}})
    with_reason = SimpleNamespace(output_schema={"type": "object", "properties": {
        "severity": {"type": "string", "enum": ["high", "low"]}, "rationale": {"type": "string"}}})
    exact, fields = SimpleNamespace(name="exact", settings={}), SimpleNamespace(name="fields", settings={})
    weighted = SimpleNamespace(name="fields", settings={"fields": {"severity": 1.0}})
    assert label_field(label_only, exact) == LabelField("label", ("a", "b"))
    assert label_field(with_reason, exact) is None and label_field(with_reason, fields) is None
    assert label_field(with_reason, weighted) == LabelField("severity", ("high", "low"))
    assert label_field(label_only, SimpleNamespace(name="judge", settings={})) is None
