"""The race's plan, dev order and choices, and the label-odds score: pure functions, no model."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from rosetta.optimize.label_odds import LabelField, label_field, label_probability
from rosetta.optimize.race import Standing, dev_order, leaders, plan, winner


@pytest.mark.parametrize("dev, budget", [(50, 150), (40, 134), (30, 150), (16, 40), (50, 1000), (200, 400)])
def test_the_plan_fits_the_budget_and_ends_on_all_of_dev(dev: int, budget: int) -> None:
    race = plan(dev, budget)
    assert race is not None and race.calls() <= budget and race.rows[-1] == dev
    assert list(race.rows) == sorted(set(race.rows)) and list(race.keep) == sorted(race.keep, reverse=True)
    # more candidates than one pass over dev per candidate would allow
    assert race.candidates >= min(budget // dev, 81)


def test_150_calls_on_50_dev_rows_race_tens_of_candidates() -> None:
    race = plan(50, 146, scoring="odds")
    assert race.candidates == 24 and race.rows == (2, 6, 17, 50) and race.keep == (24, 8, 3, 1)
    plain = plan(50, 146)  # 0/1 scores need more rows in the first rung
    assert plain.rows[0] >= 3 and plain.candidates >= 9


def test_calls_the_halving_leaves_unspent_widen_the_first_rung() -> None:
    # in thirds, 9 candidates cost 98 and a tenth 138 (a second finalist): 37 of 135 calls went unused
    race = plan(40, 135)
    assert race.rows == (5, 14, 40) and race.keep == (16, 3, 1)
    assert race.calls() <= 135 < race.calls() + race.rows[0]


def test_no_plan_below_one_pass_and_none_pruner_scores_everyone_on_all_of_dev() -> None:
    assert plan(50, 49) is None
    flat = plan(30, 150, halving=False)
    assert flat.rows == (30,) and flat.keep == (5,)
    unbounded = plan(50, None, 24)
    assert unbounded.candidates == 24 and unbounded.keep[-1] <= 3


def test_the_dev_order_interleaves_labels() -> None:
    rows = [SimpleNamespace(id=str(i), output={"label": label}) for i, label in enumerate("aaaaaabbbc")]
    order = dev_order(rows, 0, lambda output: output["label"])
    assert [r.output["label"] for r in order[:3]] == ["a", "b", "c"] and sorted(order, key=lambda r: r.id) == rows
    assert dev_order(rows, 0, lambda output: output["label"]) == order  # seeded


def _standing(candidate: int, scores: list[float], tokens: int = 100) -> Standing:
    return Standing(candidate, tuple(scores), tuple(round(s) for s in scores), tokens)


def test_leaders_break_ties_by_candidate_and_the_winner_prefers_the_shorter_prompt_within_noise() -> None:
    assert leaders([_standing(3, [1, 0]), _standing(1, [0, 1]), _standing(2, [0, 0])], 2) == [1, 3]
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
