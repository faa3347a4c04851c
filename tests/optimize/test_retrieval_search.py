"""The search weighs how demos are chosen, not only which (issue 55): retrieval is a policy — how
many demos, from which pool, the neighbours' labels in turn or not, diversity (MMR), which end the
most similar goes — and drawn policies race beside fixed demo sets, so the search can find a better
policy than the seeded plain nearest demos."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_optimize import ARTIFACT, scripted, toy  # noqa: F401  (fixtures: the scripted provider, the toy project)

from rosetta.settings import load_settings
from rosetta.optimize.context import load_context
from rosetta.optimize.space import DIVERSITIES, NEAREST, SearchSpace, build_space, label_function
from rosetta.parts import Demo
from rosetta.render.prompt import Retrieval
from rosetta.render.renderer import render
from rosetta.store.artifact import read_artifact
from scripted_model import write_toy_project


def space_and_context(root: Path, boot: int = 5) -> tuple[SearchSpace, Any]:
    context = load_context(root / "signatures" / "toy-sorter.md", "scripted/toy", settings=load_settings(root))
    train = context.data.train
    booted = tuple(Demo(id=f"boot:{row.id}", inputs=row.inputs, output=row.output) for row in train[:boot])
    space = build_space(context.signature, context.model, context.adapter, train, bootstrapped=booted, demo_sets=25,
                        label_of=label_function(context.signature))
    return space, context


def test_drawn_policies_cover_every_knob_and_take_turns_with_fixed_sets(toy: Path) -> None:
    space, _ = space_and_context(toy)
    assert space.balance_field == "label" and len(space.bootstrapped_pool) == 5
    candidates = space.candidates(0)
    policies = [p for p in candidates[3:] if p.get("demo_set") == NEAREST]
    fixed = [p for p in candidates[3:] if p.get("demo_set", -1) >= 0]
    assert len(policies) == len(fixed)  # half the drawn candidates are policies, half fixed sets, in turn
    assert [p.get("demo_set") == NEAREST for p in candidates[3:9]] == [True, False] * 3
    assert {p["retrieval_balance"] for p in policies} == {False, True}
    assert {p["retrieval_diversity"] for p in policies} == set(DIVERSITIES)
    assert {p["retrieval_order"] for p in policies} == {"similar_last", "similar_first"}
    assert {p["retrieval_pool"] for p in policies} == {"labeled", "bootstrapped"}
    assert {p["demo_count"] for p in policies} == {1, 2, 3}
    for params in policies:
        knobs = space.knobs(params)
        assert knobs.demo_selection == "nearest"
        assert knobs.demo_ids == (space.bootstrapped_pool if params["retrieval_pool"] == "bootstrapped"
                                  else space.nearest_pool)
        expected = Retrieval(diversity=params["retrieval_diversity"],
                             balance="label" if params["retrieval_balance"] else None,
                             order=params["retrieval_order"])
        assert knobs.retrieval == (None if expected == Retrieval() else expected)
    # plain nearness is the seeded candidate; its prompt carries no policy (its bytes are as before)
    assert space.knobs(space.nearest_params()).retrieval is None
    assert space.describe()["retrieval"] == {"pool": ["labeled", "bootstrapped"], "balance": [False, True],
                                             "diversity": list(DIVERSITIES),
                                             "order": ["similar_last", "similar_first"]}


def test_a_balanced_policy_renders_neighbours_of_every_label(toy: Path) -> None:
    space, context = space_and_context(toy)
    params = space._retrieved(3, {"retrieval_balance": True})
    searchable = context.signature.model_copy(update={"demos": space.demos})
    prompt = render(searchable, context.model, space.knobs(params))
    chosen = prompt.demo_pool.choose({"text": "Note from dev: something about apples and more."})
    plain = render(searchable, context.model, space.knobs(space.nearest_params())).demo_pool.choose(
        {"text": "Note from dev: something about apples and more."})
    assert len({d.output["label"] for d in plain}) == 1  # the nearest rows share the question's topic
    assert len({d.output["label"] for d in chosen}) == 3 and chosen[-1].output["label"] == "alpha"


def test_the_search_finds_a_policy_better_than_plain_nearest_demos(toy: Path, cli: Any) -> None:
    """scripted/contrast trusts demos only when they show more than one label: plain nearest demos
    (mostly the question's topic: often one label) then answer "alpha"; a policy taking labels in turn
    is always right. It must beat the prior (plain nearest demos) on confirmation rows by the paired
    test: 30 dev rows give 20 (16 give 10, too few to tell this gain from luck)."""
    write_toy_project(toy, dev=30)
    result = cli("-C", toy, "compile", toy / "signatures", "--model", "scripted/contrast", "--optimize",
                 "--max-calls", "200")
    assert result.exit_code == 0, result.output
    artifact = read_artifact(toy / ARTIFACT.with_name("contrast.yaml"))
    record = artifact.provenance.optimizer
    assert record["kind"] == "retrieval-policy" and record["origin"] == "drawn"
    confirmation = record["race"]["confirmation"]
    assert confirmation["replaced"] and confirmation["rows"] == 20 and confirmation["p"] <= 0.05
    assert confirmation["challenger"] == 1.0 > confirmation["prior"]
    knobs = artifact.provenance.knobs
    assert knobs["demo_selection"] == "nearest" and artifact.prompt.demo_pool.policy is not None
    assert knobs["retrieval"]["balance"] == "label" or knobs["retrieval"]["diversity"] > 0
    assert artifact.provenance.scores["dev"] == pytest.approx(1.0)
    units = json.loads(cli("-C", toy, "trials", "toy-sorter", "-m", "scripted/contrast", "-f", "json").stdout)["trials"]
    plain = [unit["score"] for unit in units if unit["kind"] == "nearest-k" and unit["score"] is not None]
    assert plain and min(plain) < 1.0  # the seeded plain nearest demos: often a single label, then "alpha"
    evaluated = cli("-C", toy, "evaluate", "toy-sorter", "-m", "scripted/contrast", "--split", "dev")
    assert evaluated.exit_code == 0, evaluated.output
    assert "1.000" in evaluated.output
