"""Rubric review and generate → review → retry, against the deterministic scripted model
(tests/scripted_model.py): ``scripted/judge`` passes "The label is X" only when the answer's label
is X, and ``scripted/toy`` answers X when a reviewer's critique names that failed criterion."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import scripted_model
from conftest import REPO
from scripted_model import write_toy_project

from rosetta.errors import UsageError
from rosetta.runtime.agent import load
from rosetta.runtime.verdicts import read_review
from rosetta.runtime.rubric import Criterion, Rubric


@pytest.fixture(autouse=True)
def scripted() -> None:
    scripted_model.register()


@pytest.fixture
def toy(tmp_path: Path) -> object:
    write_toy_project(tmp_path)
    shutil.copy(REPO / "signatures/rubric-reviewer.md", tmp_path / "signatures/rubric-reviewer.md")
    return load("toy-sorter", project=tmp_path)


def test_rubrics_come_from_lines_lists_weights_and_ids() -> None:
    assert Rubric.of("Cites a CVE\n\n  Names the fix  ").criteria == (
        Criterion("C1", "Cites a CVE"), Criterion("C2", "Names the fix"))
    weighted = Rubric.of(["Cites a CVE", {"criterion": "Names the fix", "weight": 3}])
    assert weighted.criteria[1] == Criterion("C2", "Names the fix", 3.0)
    assert Rubric.of({"ID-1": "Cites a CVE"}).text() == "ID-1: Cites a CVE"
    for bad, message in (([], "no criteria"), (["ok", ""], "C2 is empty"),
                         ([{"criterion": "x", "weight": 0}], "weight must be a positive number")):
        with pytest.raises(UsageError, match=message):
            Rubric.of(bad)


def test_the_verdict_is_derived_from_the_criteria_and_indeterminate_never_fails() -> None:
    rubric = Rubric.of(["a", "b", "c", {"criterion": "d", "weight": 2}])
    answer = {"verdict": "pass",  # the judge's own overall verdict is not trusted
              "criteria": [{"id": "C1", "verdict": "pass"}, {"id": "c2", "verdict": "fail", "reasoning": "no"},
                           {"id": "C3", "verdict": "indeterminate"}],
              "issues": ["b is missing"], "suggested_fixes": ["add b"]}
    review = read_review(answer, rubric)
    assert review.verdict == "fail" and not review.passed
    assert [c.verdict for c in review.criteria] == ["pass", "fail", "indeterminate", "indeterminate"]  # C4 missing
    assert review.score == pytest.approx((1 + 0 + 0.5 + 2 * 0.5) / 5)
    assert "- C2 (b): no" in review.feedback() and "- add b" in review.feedback()
    unsure = read_review({"criteria": [{"id": "C1", "verdict": "pass"}]}, Rubric.of(["a", "b"]))
    assert unsure.verdict == "indeterminate" and unsure.passed
    never = read_review(None, Rubric.of(["a", "b"]), valid=False)
    assert never.verdict == "indeterminate" and never.score == 0.5 and not never.judge_valid
    assert "never validated" in never.criteria[0].reasoning


def test_a_passing_review_is_attached_and_nothing_is_regenerated(toy) -> None:
    before = scripted_model.calls
    result = toy.run({"text": "a note about apples"}, model="scripted/toy", review=["The label is alpha"],
                     review_model="scripted/judge", retry_once=True)
    assert result.data == {"label": "alpha"} and result.review.verdict == "pass" and not result.retried
    assert scripted_model.calls - before == 2  # one answer, one review


def test_a_failed_review_regenerates_once_with_the_critique(toy) -> None:
    before = scripted_model.calls
    result = toy.run({"text": "a note about apples"}, model="scripted/toy", review=["The label is gamma"],
                     review_model="scripted/judge", retry_once=True)
    assert result.retried and result.first_review.verdict == "fail"
    assert result.data == {"label": "gamma"} and result.review.verdict == "pass"
    assert len(result.attempts) == 2 and scripted_model.calls - before == 4  # answer, review, answer, review
    assert result.review.to_dict()["criteria"][0]["verdict"] == "pass"


def test_without_retry_once_a_failed_review_is_only_reported(toy) -> None:
    result = toy.run({"text": "a note about apples"}, model="scripted/toy", review="The label is gamma",
                     review_model="scripted/judge")
    assert result.review.verdict == "fail" and not result.retried and result.data == {"label": "alpha"}
    assert result.review.issues == ["C1 does not hold: The label is gamma"]


def test_a_judge_that_never_answers_validly_decides_nothing(toy) -> None:
    result = toy.run({"text": "a note about apples"}, model="scripted/toy", review=["The label is gamma"],
                     review_model="scripted/garbage", retry_once=True)
    assert not result.review.judge_valid and result.review.verdict == "indeterminate" and not result.retried


def test_retry_once_needs_a_rubric(toy) -> None:
    with pytest.raises(UsageError, match="retry_once needs a rubric"):
        toy.run({"text": "a note about apples"}, model="scripted/toy", retry_once=True)


def test_a_review_never_carries_a_credential_the_judge_quoted(toy) -> None:
    """Issue 53: every field of a Result is screened, the review included (the judge quotes criteria)."""
    key = "AKIA" + "IOSFODNN7" + "EXAMPLE"
    result = toy.run({"text": "a note about apples"}, model="scripted/toy", review=[f"Never print {key}"],
                     review_model="scripted/judge")
    assert result.review.verdict == "fail" and result.review.issues
    said = result.review.to_dict()  # what the judge wrote (the criteria's text is the caller's own rubric)
    assert key not in repr([said["issues"], said["suggested_fixes"], [c["reasoning"] for c in said["criteria"]]])
    assert "does not hold" in result.review.issues[0] and "[redacted" in result.review.issues[0]


def test_without_a_judge_the_review_is_refused_before_the_answer_is_paid_for(tmp_path: Path) -> None:
    """Issue 83, item 6: the answer was paid for, then a UsageError about the missing judge
    discarded it. Now no call is made."""
    write_toy_project(tmp_path)  # no rubric-reviewer agent
    toy = load("toy-sorter", project=tmp_path)
    before = scripted_model.calls
    for run in (lambda **o: toy.run({"text": "apples"}, model="scripted/toy", **o),
                lambda **o: toy.chat("scripted/toy").send({"text": "apples"}, **o),
                lambda **o: "".join(toy.stream({"text": "apples"}, model="scripted/toy", **o))):
        with pytest.raises(UsageError, match="reviewing needs the rubric-reviewer agent"):
            run(review=["The label is alpha"])
    assert scripted_model.calls == before


def test_a_review_that_cannot_run_keeps_the_paid_answer_ungraded(toy, tmp_path: Path) -> None:
    """Issue 83, item 6: a judge that does not fit the review model's window raised RenderError after
    the answer was paid for. Now the answer comes back, its review indeterminate, saying why."""
    judge = tmp_path / "signatures" / "rubric-reviewer.md"
    judge.write_text(re.sub(r"minimum_context_window: \d+", "minimum_context_window: 10000000", judge.read_text()))
    result = toy.run({"text": "a note about apples"}, model="scripted/toy", review=["The label is alpha"],
                     review_model="scripted/judge", retry_once=True)
    assert result.data == {"label": "alpha"} and result.valid and not result.retried
    assert result.review.verdict == "indeterminate" and not result.review.judge_valid
    assert "the review could not run" in result.review.criteria[0].reasoning
    assert "context window" in result.review.criteria[0].reasoning


def test_the_judge_grading_the_model_that_answered_uses_the_calls_endpoint_and_key(toy) -> None:
    """Issue 83, item 6: the judge's requests went to the declared endpoint with key ``none``."""
    import json

    from fault_server import FaultServer

    review = json.dumps({"verdict": "pass", "criteria": [{"id": "C1", "verdict": "pass", "reasoning": "alpha",
                                                          "confidence": 1.0}], "issues": [], "suggested_fixes": []})
    with FaultServer([("ok", json.dumps({"label": "alpha"})), ("ok", review)]) as server:
        result = toy.run({"text": "a note about apples"}, model="openai/gpt-4o", fallbacks=[], review=["The label is alpha"],
                         api_base=server.url, api_key="sk-test-the-callers-key")
    assert result.review.verdict == "pass" and len(server.requests) == 2
    assert [r["authorization"] for r in server.requests] == ["Bearer sk-test-the-callers-key"] * 2


def test_a_retry_that_cannot_run_returns_the_first_answer_with_its_failed_review(toy, caplog) -> None:
    """Issue 84: Results are frozen, so the review is attached to a new Result, never to the one a
    stage already handed on; when the regeneration after a failed review fails, the first answer
    comes back with the review that failed it (not ungraded, not lost)."""
    from rosetta.local.litellm_offline import import_litellm

    litellm, answered = import_litellm(), []

    def complete(**kwargs: object) -> object:
        if kwargs["model"] == "scripted/toy":
            answered.append(kwargs["model"])
            if len(answered) == 2:
                raise litellm.BadRequestError(message="the retry is refused", model="toy", llm_provider="scripted")
        return litellm.completion(**kwargs)

    result = toy.run({"text": "a note about apples"}, model="scripted/toy", review=["The label is gamma"],
                     review_model="scripted/judge", retry_once=True, complete=complete)
    assert len(answered) == 2 and result.data == {"label": "alpha"} and not result.retried
    assert result.review is not None and result.review.verdict == "fail" and result.review.judge_valid
    assert "the retry after a failed review could not run" in caplog.text
    with pytest.raises(AttributeError):
        result.raw = "changed"  # type: ignore[misc]  # frozen: what a caller holds never changes
