"""Honest candidate kinds (issue 55): every candidate says what it is — seeded (the same prompt in
every search: unoptimized, first-k, nearest-k) or drawn with the seed (label-balanced, diverse,
bootstrapped, sampled demo sets; a proposed or terse instruction; a format knob) — in the study, in
`rosetta trials`, in the artifact's optimizer record and in the compile summary."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import optuna
from test_optimize import ARTIFACT, scripted, toy  # noqa: F401  (fixtures: the scripted provider, the toy project)

from rosetta.settings import load_settings
from rosetta.optimize.context import load_context
from rosetta.optimize.space import DRAWN, DRAWN_SETS, NEAREST, SEEDED, SearchSpace, build_space, label_function, origin
from rosetta.optimize.study import open_storage
from rosetta.parts import Demo
from rosetta.store.artifact import read_artifact


def space_of(root: Path, **options: Any) -> SearchSpace:
    context = load_context(root / "signatures" / "toy-sorter.md", "scripted/toy", settings=load_settings(root))
    train = context.data.train
    boot = (Demo(id=f"boot:{train[0].id}", inputs=train[0].inputs, output=train[0].output),)
    return build_space(context.signature, context.model, context.adapter, train, bootstrapped=boot, demo_sets=13,
                       label_of=label_function(context.signature), instructions=("Answer with the note's label.",),
                       **options)


def test_every_candidate_is_named_for_how_it_was_made(toy: Path) -> None:
    space = space_of(toy)
    labels = {f"train:{row['id']}": row["output"]["label"] for row in
              map(json.loads, (toy / "datasets/toy-sorter/train.jsonl").read_text().splitlines())}
    for seed in (0, 1):
        candidates = space.candidates(seed)
        kinds = [space.kind(params) for params in candidates]
        assert kinds[:3] == ["unoptimized", "first-k", "nearest-k"]
        for params, kind in zip(candidates, kinds, strict=True):
            demos = kind.split(" + ")[0]
            assert origin(kind) == ("seeded" if kind in SEEDED else "drawn")
            if params.get("demo_set") == NEAREST:  # seeded only as plain nearness at the largest count
                assert kind == ("nearest-k" if params == space.nearest_params() else "retrieval-policy")
            elif params.get("demo_set", -1) >= 1:  # drawn: the set's own kind, then what else the draw changed
                assert demos in DRAWN and origin(kind) == "drawn"
                chosen = space.knobs(params).demo_ids
                if demos == "label-balanced":  # each label equally often
                    assert len(set(Counter(labels[i] for i in chosen).values())) == 1
                if demos == "bootstrapped":
                    assert any(i.startswith("boot:") for i in chosen)
        # the seeded candidates are the same prompts whatever the seed; the drawn ones are not
        seeded = [params for params, kind in zip(candidates, kinds, strict=True) if kind in SEEDED]
        assert seeded == [params for params in space.candidates(2) if space.kind(params) in SEEDED]
    assert set(space.set_kinds[1:5]) == set(DRAWN_SETS)  # the draws take turns
    terse, proposed = {**space.default_params(), "instruction": 1}, {**space.default_params(), "instruction": 2}
    assert space.kind(terse) == "terse-instruction" and space.kind(proposed) == "proposed-instruction"
    assert space.kind({**proposed, "demo_set": 2, "demo_count": 2, "delimiter": "xml"}) == \
        f"{space.set_kinds[2]} + proposed-instruction + delimiter"


def test_a_space_without_demos_names_its_instruction_and_format_variants() -> None:
    space = SearchSpace(instructions=(None, "A proposed rewrite."), instruction_kinds=("definition", "proposed"),
                        delimiters=("auto", "xml"), reasoning=("auto", "on", "off"))
    kinds = [space.kind(params) for params in space.candidates(0)]
    assert kinds[0] == "unoptimized" and all(origin(kind) == "drawn" for kind in kinds[1:])
    assert "proposed-instruction" in kinds and all(
        set(kind.split(" + ")) <= {"proposed-instruction", "delimiter", "reasoning"} for kind in kinds[1:])


def test_the_study_trials_the_artifact_and_the_summary_name_the_winners_kind(toy: Path, cli: Any) -> None:
    result = cli("-C", toy, "compile", toy / "signatures", "--model", "scripted/toy", "--optimize", "--trials", "12",
                 "--max-calls", "200", "--proposer", "scripted/proposer", "--fixed-demos")
    assert result.exit_code == 0, result.output
    artifact = read_artifact(toy / ARTIFACT)
    record = artifact.provenance.optimizer
    # the winner is the proposed RULEBOOK instruction, on a drawn demo set: found by the search
    assert "proposed-instruction" in record["kind"] and record["origin"] == "drawn"
    assert f"winner candidate {record['race']['winner']} ({record['kind']}, drawn)" in " ".join(result.output.split())
    storage, _ = open_storage(None, toy / ".rosetta/studies/toy-sorter/scripted__toy.journal")
    units = optuna.load_study(study_name=record["study"], storage=storage).trials
    assert units and all(unit.user_attrs.get("kind") for unit in units)  # stopped units too
    assert {unit.user_attrs["kind"] for unit in units if unit.user_attrs["candidate"] == record["race"]["winner"]} \
        == {record["kind"]}
    assert {unit.user_attrs["kind"] for unit in units if unit.user_attrs["candidate"] in (0, 1)} == \
        {"unoptimized", "first-k"}
    rows = json.loads(cli("-C", toy, "trials", "toy-sorter", "-m", "scripted/toy", "-f", "json").stdout)["trials"]
    assert {(row["candidate"], row["kind"], row["origin"]) for row in rows if row["candidate"] == 0} == \
        {(0, "unoptimized", "seeded")}
    table = " ".join(cli("-C", toy, "trials", "toy-sorter", "-m", "scripted/toy").stdout.split())
    assert f"candidate {record['race']['winner']} ({record['kind']}, drawn):" in table
