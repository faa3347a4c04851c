"""Nearest demos: each request gets the pooled examples most similar to it, the same way at compile
time and at run time, and prompts without a pool keep exactly the data (and bytes) they had."""

from __future__ import annotations

import pytest

from conftest import REPO
from rosetta.definition import load_definition
from rosetta.errors import UsageError
from rosetta.render import Knobs, render
from rosetta.render.nearest import nearest
from rosetta.render.prompt import RenderedPrompt
from rosetta.signature import Demo, lower

REPORTS = {
    "sqli": ("SQL injection in the search endpoint: the q parameter is concatenated into the query; "
             "sqlmap dumped the users table.", "critical"),
    "xss": ("Reflected XSS on /profile: the name parameter is echoed without escaping; a script tag runs.", "medium"),
    "banner": ("The server banner reveals the nginx version number in every response header.", "informational"),
    "csrf": ("No CSRF token on the email change form; a logged-in victim visiting my page changes their email.",
             "high"),
    "xss2": ("Stored XSS in comments: a script tag in the comment body runs for every reader of the page.", "high"),
}


@pytest.fixture(scope="module")
def triage():
    path = REPO / "signatures" / "vuln-triage.md"
    demos = tuple(Demo(id=key, inputs={"report": text}, output={"severity": label, "rationale": "Because."})
                  for key, (text, label) in REPORTS.items())
    return lower(load_definition(path)).model_copy(update={"demos": demos})


def test_nearest_ranks_by_shared_rare_words_and_keeps_pool_order_on_ties() -> None:
    pool = ["red apples and pears", "green apples", "blue sky", "blue sky"]
    assert nearest("apples, green ones", pool, 2) == [1, 0]
    assert nearest("the blue sky", pool, 2) == [2, 3]  # a tie: the earlier row first
    assert nearest("nothing in common", pool, 3) == [0, 1, 2]  # no overlap at all: pool order
    assert nearest("apples", pool, 10) == [1, 0, 2, 3]  # the shorter text about apples is the closer one
    assert nearest("apples", pool, 0) == [] and nearest("x", [], 2) == []


def test_each_request_gets_its_nearest_demos_the_closest_last(triage) -> None:
    prompt = render(triage, "openai/gpt-4o", Knobs(demo_ids=tuple(REPORTS), demo_count=2, demo_selection="nearest"))
    assert prompt.demos == () and prompt.demo_pool.count == 2 and prompt.demo_ids == tuple(REPORTS)
    assert prompt.knobs.demo_selection == "nearest" and prompt.knobs.demo_count == 2
    messages = prompt.messages({"report": "A script tag in a comment runs: stored XSS on the forum page."})
    demo_requests = [m["content"] for m in messages[1:-1] if m["role"] == "user"]
    assert len(demo_requests) == 2 and "Stored XSS in comments" in demo_requests[-1]
    assert "Reflected XSS" in demo_requests[0]
    other = prompt.messages({"report": "Your nginx banner shows the version number of the server."})
    assert "server banner" in [m["content"] for m in other if m["role"] == "user"][-2]
    # the demo turns are rendered exactly like fixed demos of the same rows
    fixed = render(triage, "openai/gpt-4o", Knobs(demo_ids=("xss", "xss2"), demo_count=2))
    assert [m["content"] for m in messages[1:-1]] == [m.content for m in fixed.demos]
    # the budget is checked against the longest demos a request could get
    longest = render(triage, "openai/gpt-4o", Knobs(demo_ids=("sqli", "csrf"), demo_count=2))
    assert prompt.tokens["demos"] == longest.tokens["demos"]


def test_a_base_model_gets_its_nearest_demos_in_the_completion_text(triage) -> None:
    prompt = render(triage, "local/gemma-3-270m", Knobs(demo_ids=tuple(REPORTS), demo_count=1,
                                                        demo_selection="nearest"))
    text = prompt.messages({"report": "The response header banner reveals the nginx version."})[0]["content"]
    assert "server banner reveals" in text and "sqlmap" not in text
    assert text.rstrip().endswith("Answer:")


def test_a_pooled_prompt_survives_its_plain_data_and_others_keep_theirs(triage) -> None:
    pooled = render(triage, "sonnet", Knobs(demo_ids=tuple(REPORTS), demo_count=2, demo_selection="nearest"))
    data = pooled.to_dict()
    assert data["demo_pool"]["count"] == 2 and data["knobs"]["demo_selection"] == "nearest"
    assert RenderedPrompt.from_dict(data) == pooled
    fixed = render(triage, "sonnet", Knobs(demo_ids=("sqli",), demo_count=1)).to_dict()
    assert "demo_pool" not in fixed and "demo_selection" not in fixed["knobs"]
    assert RenderedPrompt.from_dict(fixed).demo_pool is None


def test_an_unknown_demo_selection_is_a_clear_error() -> None:
    with pytest.raises(UsageError) as caught:
        Knobs(demo_selection="random")
    assert "demo_selection" in str(caught.value) and "fixed | nearest" in str(caught.value)


# -- the retrieval policy (issue 55): a search can choose how demos are retrieved, not only which ----------


def test_diversity_keeps_near_duplicates_from_filling_the_prompt() -> None:
    pool = ["stored xss in comments runs a script", "stored xss in comments runs a script tag",
            "reflected xss echoes a script", "sql injection dumps the users table"]
    assert rank_of("stored xss comments script", pool, 2) == [0, 1]  # nearest only: both near-duplicates
    assert rank_of("stored xss comments script", pool, 2, diversity=0.3) == [0, 1]  # a little: still similarity
    assert rank_of("stored xss comments script", pool, 2, diversity=0.5) == [0, 3]  # the second adds something


def test_balance_takes_the_labels_in_turn_most_similar_label_first() -> None:
    pool = ["xss in the search box", "xss in the search page", "xss in the profile", "sql injection in the login"]
    labels = ["high", "high", "medium", "critical"]
    assert rank_of("xss in search", pool, 3) == [0, 1, 2]  # nearest only: two of one label
    assert rank_of("xss in search", pool, 3, labels=labels) == [0, 2, 3]  # high, medium, then critical
    assert rank_of("xss in search", pool, 4, labels=labels) == [0, 2, 3, 1]  # labels in turn, then what is left


def rank_of(query: str, pool: list[str], count: int, **policy: object) -> list[int]:
    from rosetta.render.nearest import rank

    return rank(query, pool, count, **policy)  # type: ignore[arg-type]


def test_a_retrieval_policy_is_rendered_recorded_and_read_back(triage) -> None:
    knobs = Knobs(demo_ids=tuple(REPORTS), demo_count=2, demo_selection="nearest",
                  retrieval={"balance": "severity", "order": "similar_first", "diversity": 0.2})
    prompt = render(triage, "openai/gpt-4o", knobs)
    assert prompt.demo_pool.policy == prompt.knobs.retrieval and prompt.knobs.retrieval.balance == "severity"
    data = prompt.to_dict()
    assert data["demo_pool"]["policy"] == {"diversity": 0.2, "balance": "severity", "order": "similar_first"}
    assert data["knobs"]["retrieval"] == data["demo_pool"]["policy"]
    assert RenderedPrompt.from_dict(data) == prompt
    request = {"report": "A script tag in a comment runs: stored XSS on the forum page."}
    shown = [m["content"] for m in prompt.messages(request)[1:-1] if m["role"] == "assistant"]
    # the most similar first, then another severity: the plain policy would show two XSS reports
    assert '"high"' in shown[0] and '"high"' not in shown[1]
    # prompts without a policy keep their bytes: nothing new in their data
    plain = render(triage, "openai/gpt-4o", Knobs(demo_ids=tuple(REPORTS), demo_count=2, demo_selection="nearest"))
    assert "policy" not in plain.to_dict()["demo_pool"] and "retrieval" not in plain.to_dict()["knobs"]


@pytest.mark.parametrize(("policy", "said"), [
    ({"diversity": 2}, "from 0 to 1"), ({"order": "random"}, "similar_last | similar_first"),
    ({"k": 3}, "unknown retrieval setting"), ("mmr", "must be a table"),
])
def test_a_malformed_retrieval_policy_is_a_clear_error(policy: object, said: str) -> None:
    with pytest.raises(UsageError, match=said):
        Knobs(demo_selection="nearest", retrieval=policy)


def test_balancing_on_a_field_the_output_lacks_is_refused(triage) -> None:
    from rosetta.errors import RenderError

    with pytest.raises(RenderError, match="not a field of vuln-triage's output"):
        render(triage, "openai/gpt-4o", Knobs(demo_ids=tuple(REPORTS), demo_count=2, demo_selection="nearest",
                                              retrieval={"balance": "label"}))
