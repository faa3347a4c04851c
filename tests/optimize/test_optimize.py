"""`rosetta compile --optimize` against the deterministic scripted model (see tests/scripted_model.py):
the search finds the known best variant within budget, pruning saves calls, budgets and --dry-run
hold, a study killed with SIGKILL resumes, a weak proposer never breaks the search, and the
artifact's recorded test score is reproduced by `rosetta evaluate` through the runtime."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import scripted_model
from scripted_model import RULEBOOK, write_toy_project

from rosetta.settings import load_settings
from rosetta.errors import RosettaError
from rosetta.optimize.context import load_context
from rosetta.optimize.rescore import evaluate, score_differences
from rosetta.optimize.study import SearchSettings
from rosetta.optimize.target import OptimizeRequest, optimize
from rosetta.store.artifact import parse_artifact

TESTS = Path(__file__).resolve().parents[1]
ARTIFACT = Path("compiled/toy-sorter/scripted/toy.yaml")


@pytest.fixture(autouse=True)
def scripted() -> None:
    scripted_model.register()


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    root = tmp_path / "toy"
    root.mkdir()
    write_toy_project(root)
    return root


def run(root: Path, **settings: object) -> object:
    # nearest demos are off unless a test asks: they make the toy model perfect (see
    # test_nearest_demos_win_where_each_request_needs_its_own_examples), which would end every search at trial 2
    knobs = {"trials": 12, "proposer": "scripted/proposer", "nearest_demos": False, **settings}
    request = OptimizeRequest(definition=root / "signatures" / "toy-sorter.md", model="scripted/toy",
                              settings=SearchSettings(**knobs))
    return optimize(request, settings=load_settings(root))


def calls_made() -> int:
    return scripted_model.calls


def test_search_finds_the_known_best_variant_within_budget(toy: Path) -> None:
    before = calls_made()
    report = run(toy, max_calls=200, baseline_test=True)
    outcome = report.outcome
    # the default render scores the alpha topics only; the proposed RULEBOOK instruction is always right
    assert outcome.baseline_dev < 0.6 and outcome.dev_score == 1.0 and outcome.test_score == 1.0
    assert RULEBOOK in outcome.prompt.knobs.instructions
    assert outcome.calls <= 200 and calls_made() - before == outcome.calls + outcome.test_calls
    artifact = parse_artifact((toy / ARTIFACT).read_text(), path=str(toy / ARTIFACT))
    assert artifact.provenance.scores["dev"] == 1.0 and artifact.provenance.scores["baseline_test"] == 0.25
    assert artifact.provenance.optimizer["proposer"] == {"model": "scripted/proposer", "asked": 3, "usable": 1,
                                                         "calls": 3, "note": "2 of 3 proposals dropped (not JSON "
                                                         "with an instruction, too short)"}
    assert artifact.provenance.budget["calls"] == outcome.calls
    assert artifact.provenance.dataset_sha256 and artifact.prompt.system.count(RULEBOOK) == 1
    # trial 0 is exactly the unoptimized render: its dev score is what the uncompiled prompt scores
    uncompiled = evaluate(toy / "signatures/toy-sorter.md", "scripted/toy", settings=load_settings(toy), split="dev",
                          uncompiled=True)
    assert outcome.baseline_dev == uncompiled.score


def test_nearest_demos_win_where_each_request_needs_its_own_examples(toy: Path, cli: object) -> None:
    # the toy model copies the label of a demo about the request's topic: no fixed set of three demos
    # covers the eight topics, the three train rows nearest to each request always include one
    report = run(toy, proposer=None, nearest_demos=True, baseline_test=True)
    outcome = report.outcome
    assert outcome.dev_score == 1.0 and outcome.test_score == 1.0 and outcome.baseline_test == 0.25
    prompt = outcome.prompt
    assert prompt.knobs.demo_selection == "nearest" and prompt.demos == () and prompt.demo_pool.count == 3
    assert len(prompt.demo_pool.demos) == 24 and outcome.space["nearest_demos"] == 24
    request = {"text": "Note 99 from elsewhere: all about eagles today."}
    turns = prompt.messages(request)
    assert sum("eagles" in t["content"] for t in turns if t["role"] == "user") == 4  # 3 demos + the request
    artifact = parse_artifact((toy / ARTIFACT).read_text(), path=str(toy / ARTIFACT))
    assert artifact.prompt == prompt and artifact.provenance.knobs["demo_selection"] == "nearest"
    # the runtime picks the same demos per request: the recorded test score is reproduced
    result = cli("-C", toy, "evaluate", "toy-sorter", "--model", "scripted/toy", "-f", "json")
    assert json.loads(result.stdout)["reproduced"] is True, result.output


def test_trial_1_is_the_plain_k_shot_prompt_of_train_s_first_rows(toy: Path) -> None:
    import optuna

    from rosetta.optimize.space import build_space
    from rosetta.optimize.study import open_storage

    outcome = run(toy, proposer=None, trials=3).outcome
    storage, _ = open_storage(None, toy / ".rosetta/studies/toy-sorter/scripted__toy.journal")
    first, second = optuna.load_study(study_name=outcome.study, storage=storage).trials[:2]
    assert first.user_attrs.get("default") and second.user_attrs.get("few_shot")
    assert second.params["demo_set"] == 0 and second.params["demo_order"] == "forward"
    assert {k: v for k, v in second.params.items() if not k.startswith("demo_")} == \
        {k: v for k, v in first.params.items() if not k.startswith("demo_")}  # only the demos differ
    context = load_context(toy / "signatures/toy-sorter.md", "scripted/toy", settings=load_settings(toy))
    space = build_space(context.signature, context.model, context.adapter, context.data.train)
    first_rows = tuple(f"train:{e.id}" for e in context.data.train[:3])  # count_range max is 3
    assert second.params["demo_count"] == 3 and space.knobs(second.params).demo_ids == first_rows


def test_same_seed_same_artifact_and_a_warm_cache_pays_nothing(toy: Path, tmp_path: Path) -> None:
    run(toy)
    first = (toy / ARTIFACT).read_bytes()
    other = tmp_path / "again"
    other.mkdir()
    write_toy_project(other)
    run(other)
    assert (other / ARTIFACT).read_bytes() == first  # byte-identical from the same inputs and seed
    before = calls_made()
    (toy / ARTIFACT).unlink()
    again = run(toy)
    assert (toy / ARTIFACT).read_bytes() == first
    assert again.outcome.paid_calls == 0 and calls_made() - before == 0  # every answer came from the cache
    # --force starts a new study beside the old one: the same race, answered from the cache
    forced = optimize(OptimizeRequest(definition=toy / "signatures/toy-sorter.md", model="scripted/toy", force=True,
                                      settings=SearchSettings(trials=12, proposer="scripted/proposer",
                                                              nearest_demos=False)), settings=load_settings(toy))
    assert forced.outcome.study_run == forced.outcome.study + "~2" and forced.outcome.paid_calls == 0
    assert (toy / ARTIFACT).read_bytes() == first


def test_racing_compares_many_more_candidates_for_the_same_calls(toy: Path, tmp_path: Path) -> None:
    flat_root = tmp_path / "flat"
    flat_root.mkdir()
    write_toy_project(flat_root, dev=30)
    write_toy_project(toy, dev=30)
    # no proposer: demo choice is all there is, and some demo sets trail the best one from the start
    raced = run(toy, pruner="halving", proposer=None, max_calls=150, trials=None, baseline_test=True).outcome
    flat = run(flat_root, pruner="none", proposer=None, max_calls=150, trials=None).outcome
    assert raced.trials >= 2 * flat.trials and raced.pruned > 0 and flat.pruned == 0
    assert raced.calls <= 150 and flat.calls <= 150 and raced.stopped is None
    # the winner answered all of dev: 10 screening rows, then 20 confirmation rows
    assert (raced.race["rows"][-1], raced.race["confirm"], raced.dev_examples) == (10, 20, 30)
    assert raced.phases["proposals"] == 0 and sum(raced.phases.values()) == raced.calls
    # not `>= flat.dev_score`: that held while ties went to the lower candidate number, so to the four the flat
    # search scored; now a seeded order breaks ties, and with 0/1 scores on 2 rows most candidates tie. Racing
    # more candidates wins on average (bench/race_rungs.py), not on every draw
    assert raced.dev_score >= raced.baseline_dev
    # without --baseline too: without nearest demos the unoptimized render is a seeded prompt, on all of dev
    assert flat.baseline_dev is not None


def test_a_challenger_replaces_the_prior_only_by_the_paired_test_on_the_confirmation_rows(toy: Path) -> None:
    # no nearest demos: the prior is the better of the seeded prompts on the screening rows (the unoptimized
    # render, train's first rows as demos); the proposer's RULEBOOK, always right, beats it on the 13 rows that
    # chose nothing
    outcome = run(toy, trials=30).outcome
    race = outcome.race
    assert race["prior"] in (0, 1) and race["challenger"] == race["winner"] != race["prior"]
    confirmation = race["confirmation"]
    assert confirmation["rows"] == 13 and confirmation["replaced"] and confirmation["p"] <= 0.05
    assert confirmation["challenger"] == 1.0 > confirmation["prior"] and outcome.dev_score == 1.0
    assert outcome.phases["confirmation"] == 13 and outcome.confirm_scores == (1.0,) * 13  # the prior's: in "prior"
    assert RULEBOOK in outcome.prompt.knobs.instructions


def test_max_calls_sizes_the_race(toy: Path) -> None:
    before = calls_made()
    outcome = run(toy, max_calls=80, proposer=None, trials=None).outcome
    # the two seeded prompts' passes over the 20 dev rows and a challenger's over the 13 confirmation rows leave
    # 25 answers to screen challengers with
    assert outcome.calls <= 80 and outcome.stopped is None and outcome.trials >= 8
    assert calls_made() - before == outcome.calls + outcome.test_calls
    assert run(toy, max_calls=30, proposer=None, trials=None).outcome.trials == 1  # one pass over dev: the prior


def test_max_calls_is_a_hard_cap_when_answers_take_retries(toy: Path) -> None:
    # every scripted/garbage answer fails validation, so each takes the runtime's corrections too:
    # an answer starts only when its worst case still fits (101 is no multiple of 2 or 3 calls)
    before = calls_made()
    request = OptimizeRequest(definition=toy / "signatures" / "toy-sorter.md", model="scripted/garbage",
                              settings=SearchSettings(trials=50, max_calls=101, proposer=None))
    written = toy / "compiled/toy-sorter/scripted/garbage.yaml"
    outcome = optimize(request, settings=load_settings(toy)).outcome
    assert outcome.calls <= 101 and calls_made() - before == outcome.calls + outcome.test_calls
    # the prior answered all 20 dev rows first (60 calls); the 41 left, at 3 calls an answer, pay for no challenger
    # screened and confirmed: they stopped, reported as such, not as eliminated
    assert outcome.dev_examples == 20 and outcome.race["finalists"] == {} and outcome.kind == "nearest-k"
    assert outcome.cut_short >= outcome.trials - outcome.race["keep"][-1] - outcome.pruned > 0
    artifact = parse_artifact(written.read_text(), path="a")
    assert artifact.provenance.optimizer["cut_short"] == outcome.cut_short
    assert artifact.provenance.budget["phases"] == outcome.phases


def test_retries_in_the_first_rungs_never_take_the_finalists_calls(toy: Path) -> None:
    # about half of scripted/stutter's answers take a retry, which the plan (made on answers) cannot
    # know in advance: the race keeps the later rungs' calls at the retry rate it has seen, so the
    # first rung's last candidates stop instead, and the leaders answer all the screening rows, the prior all of
    # dev (without it the finalists got 6 rows of 16)
    request = OptimizeRequest(definition=toy / "signatures" / "toy-sorter.md", model="scripted/stutter",
                              settings=SearchSettings(trials=None, max_calls=100, proposer=None, nearest_demos=False))
    outcome = optimize(request, settings=load_settings(toy)).outcome
    assert outcome.calls <= 100 and outcome.race["rows"][-1] == 7 and outcome.race["confirm"] == 13
    assert outcome.race["prior"] is not None and outcome.phases["prior"] >= 2 * 20  # the two seeded prompts
    assert outcome.dev_examples == 20  # the winner answered all of dev
    assert 1 <= outcome.cut_short < outcome.race["keep"][0]  # the first rung's last candidates, reported as stopped


def test_a_budget_below_one_dev_pass_is_a_clear_error(toy: Path) -> None:
    from rosetta.errors import UsageError

    with pytest.raises(UsageError, match="less than one pass over dev"):
        run(toy, max_calls=5, proposer=None)


def test_dry_run_estimates_and_calls_nothing(toy: Path, cli: object) -> None:
    before = calls_made()
    result = cli("-C", toy, "compile", toy / "signatures", "--model", "scripted/toy", "--optimize", "--dry-run",
                 "--trials", "5", "--max-calls", "50", "--proposer", "scripted/proposer")
    assert result.exit_code == 0, result.output
    # the search stays within --max-calls (3 proposals and 44 answers, each up to 3 calls with its retries: the 45
    # calls left after the proposals and one answer's retries pay for the prior's 20, a challenger's 13
    # confirmation rows, and 11 screening answers);
    # the test pass comes on top: 16 answers, up to 48 calls
    # litellm's price for the scripted model
    assert "at most 98 calls, about $0.0226 if all are made; nothing was called" in " ".join(result.output.split())
    assert "the search: at most 50 calls (--max-calls 50): 3 proposals, 0 bootstrap answers, a race planned at 44 " \
        "answers" in " ".join(result.output.split())
    assert "the test pass, outside --max-calls so that the winner's test score covers every row: 16 test answers, " \
        "at most 48 calls" in " ".join(result.output.split())
    assert "no bootstrapped demos: the answer is only a label" in result.output
    assert "the prior answers all 20 dev rows; then at most 3 challengers (fitted again when the space holds fewer " \
        "distinct prompts) race on screening rows per rung [2, 7], keeping [3, 1], and the best answers the 13 " \
        "confirmation rows" in " ".join(result.output.split())
    assert calls_made() == before and not (toy / ARTIFACT).exists()


def test_weak_proposer_falls_back_to_demo_search(toy: Path) -> None:
    report = run(toy, proposer="scripted/garbage", trials=8, baseline_test=True)
    note = report.outcome.proposals.note
    assert "gave no usable instruction" in note and "demos, format knobs and the terse built-in" in note
    artifact = parse_artifact((toy / ARTIFACT).read_text(), path="a")
    assert artifact.provenance.optimizer["proposer"]["usable"] == 0
    assert any("terse built-in instruction only" in n for n in artifact.provenance.optimizer["notes"])
    assert artifact.provenance.optimizer["space"]["instructions"] == 2  # the original and the terse one
    assert report.outcome.dev_score >= report.outcome.baseline_dev


def test_a_proposer_that_takes_a_schema_is_asked_through_one(toy: Path) -> None:
    from rosetta.optimize.proposer import PROPOSAL_SCHEMA, propose
    from rosetta.optimize.study import _schema_output

    context = load_context(toy / "signatures" / "toy-sorter.md", "scripted/toy", settings=load_settings(toy))
    sent: list[dict] = []

    def complete(**kwargs: object) -> object:  # litellm's own mock answer, after recording the request
        sent.append(kwargs)
        return scripted_model.litellm.completion(**{**kwargs, "model": "gpt-4o",
                                                    "mock_response": json.dumps({"instruction": scripted_model
                                                                                 .GOOD_INSTRUCTION})})
    proposals = propose(context.signature, context.data.train, model="gpt-4o", count=2, complete=complete,
                        structured=True)
    assert proposals.usable == (scripted_model.GOOD_INSTRUCTION,) and len(sent) == 2  # the second: a copy
    assert sent[0]["response_format"]["json_schema"]["schema"] == PROPOSAL_SCHEMA
    plain = propose(context.signature, context.data.train, model="gpt-4o", count=1, complete=complete)
    assert "response_format" not in sent[-1] and plain.usable == (scripted_model.GOOD_INSTRUCTION,)
    loop = '{"instruction": "Sort notes. Sort notes. Sort'
    cut_off = propose(context.signature, context.data.train, model="gpt-4o", count=1, structured=True,
                      complete=lambda **kw: scripted_model.litellm.completion(**{**kw, "mock_response": loop}))
    assert cut_off.dropped == ("unfinished JSON (a loop or the token limit cut it off)",)
    # the embedded model constrains its output to the schema; a model litellm cannot place is asked in text
    assert _schema_output("local/gemma-3-270m") and not _schema_output("ollama/llama3") \
        and not _schema_output(None)


def test_pareto_takes_the_shortest_prompt_within_tolerance(toy: Path) -> None:
    report = run(toy, pareto=True, trials=12)
    outcome = report.outcome
    assert outcome.dev_score == 1.0  # only the RULEBOOK instruction reaches 1.0 here
    import optuna

    from rosetta.optimize.study import open_storage

    storage, _ = open_storage(None, toy / ".rosetta/studies/toy-sorter/scripted__toy.journal")
    study = optuna.load_study(study_name=outcome.study, storage=storage)
    final = len(outcome.race["rows"]) - 1
    best = [t for t in study.get_trials() if t.user_attrs.get("rung") == final and t.value is not None
            and t.value >= 1.0 - 0.02]
    assert best and outcome.prompt.tokens["total"] == min(t.user_attrs["prompt_tokens"] for t in best)


def test_evaluate_reproduces_the_recorded_test_score(toy: Path, cli: object) -> None:
    run(toy, baseline_test=True)
    settings = load_settings(toy)
    report = evaluate(toy / "signatures/toy-sorter.md", "scripted/toy", settings=settings)
    assert report.score == report.recorded == 1.0 and report.selection.endswith("toy.yaml")
    baseline = evaluate(toy / "signatures/toy-sorter.md", "scripted/toy", settings=settings, uncompiled=True)
    assert baseline.score == 0.25 and baseline.recorded is None
    result = cli("-C", toy, "evaluate", "toy-sorter", "--model", "scripted/toy")
    assert result.exit_code == 0 and "reproduced exactly" in result.output
    # not a terminal (a CI log): plain progress lines, the first answer and the last
    assert "evaluating toy-sorter → scripted/toy: 1/16 answers" in result.output
    assert "evaluating toy-sorter → scripted/toy: 16/16 answers" in result.output
    # had it differed with nothing known changed, the model itself answered differently
    context = load_context(toy / "signatures/toy-sorter.md", "scripted/toy", settings=settings)
    artifact = parse_artifact((toy / ARTIFACT).read_text(), path=str(toy / ARTIFACT))
    assert score_differences(artifact, context, artifact.prompt, "test", 16) == [
        "the same prompt, data and metric: scripted/toy answered differently than at compile time (its provider "
        "is not deterministic even at temperature 0, or its weights changed); see --format json for each "
        "example's answer"]


def test_a_sampling_prompt_is_seeded_per_example_so_evaluate_reproduces_its_score(toy: Path, cli: object) -> None:
    definition = toy / "signatures/toy-sorter.md"
    definition.write_text(definition.read_text().replace("temperature: 0.0", "temperature: 0.9").replace(
        "model_preferences: [scripted/toy]", "model_preferences: [scripted/dice]"))
    request = OptimizeRequest(definition=definition, model="scripted/dice",
                              settings=SearchSettings(trials=3, proposer=None))
    recorded = optimize(request, settings=load_settings(toy)).outcome.test_score
    # scripted/dice answers random labels: only the per-example seed makes a second run draw the same ones
    report = evaluate(definition, "scripted/dice", settings=load_settings(toy))
    assert report.recorded == pytest.approx(recorded, abs=5e-7) and report.reproduced
    assert 0.0 < report.score < 1.0  # it really sampled: neither all right nor all wrong
    again = evaluate(definition, "scripted/dice", settings=load_settings(toy))
    assert [row["output"] for row in again.rows] == [row["output"] for row in report.rows]  # 16 draws repeat


def test_evaluate_says_why_a_score_differs(toy: Path, cli: object) -> None:
    run(toy, trials=3, proposer=None)
    test = toy / "datasets/toy-sorter/test.jsonl"
    rows = [json.loads(line) for line in test.read_text().splitlines()]
    for row in rows[:4]:
        row["output"]["label"] = "delta" if row["output"]["label"] != "delta" else "alpha"
    test.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = cli("-C", toy, "evaluate", "toy-sorter", "--model", "scripted/toy", "--metric", "schema_valid")
    assert result.exit_code == 0, result.output
    assert "differs" in result.output
    assert "the labeled data changed since the artifact was compiled" in result.output
    assert "the metric differs: compiled with exact, scored now with schema_valid" in result.output
    report = json.loads(cli("-C", toy, "evaluate", "toy-sorter", "--model", "scripted/toy", "-f", "json").stdout)
    assert report["reproduced"] is False and report["differences"][0].startswith("the labeled data changed")


def test_evaluate_prints_one_line_for_answers_that_do_not_validate(toy: Path, cli: object) -> None:
    result = cli("-C", toy, "evaluate", "toy-sorter", "--model", "scripted/garbage", "--uncompiled")
    assert result.exit_code == 0, result.output
    assert "16 answers did not validate and scored 0; the first: toy-sorter on scripted/garbage" in result.output
    assert "returning an answer that does not validate" in result.output  # the first one's own message, once
    assert result.output.count("does not validate") == 1
    result = cli("-C", toy, "optimize", "toy-sorter", "--model", "scripted/garbage", "--trials", "2",
                 "--proposer", "none")
    assert result.exit_code == 0, result.output
    assert result.output.count("does not validate") == 1 and "answers did not validate and scored 0" in result.output


def test_plain_compile_keeps_the_optimized_artifact_and_new_data_searches_again(toy: Path, cli: object) -> None:
    run(toy)
    optimized = (toy / ARTIFACT).read_bytes()
    result = cli("-C", toy, "compile", toy / "signatures", "--model", "scripted/toy")
    assert result.exit_code == 0 and (toy / ARTIFACT).read_bytes() == optimized
    assert run(toy).status == "up to date"
    dev = toy / "datasets/toy-sorter/dev.jsonl"
    dev.write_text(dev.read_text() + json.dumps({"id": "extra", "inputs": {"text": "about hats"},
                                                "output": {"label": "alpha"}}) + "\n")
    assert run(toy).status == "written"


def test_an_edit_that_leaves_the_prompt_as_it_was_carries_the_optimized_artifact_over(toy: Path,
                                                                                      cli: object) -> None:
    """Moving model_preferences (here: adding a second model) changes the source hash, not the
    prompt: the search and its scores carry over instead of costing another search. (No proposer:
    instructions a proposer wrote are no source, so --check could not pass them; see the next test.)"""
    from rosetta.store.measured import measured_ids

    run(toy, proposer="none")
    before = parse_artifact((toy / ARTIFACT).read_text(), path="before")
    definition = toy / "signatures" / "toy-sorter.md"
    definition.write_text(definition.read_text().replace("model_preferences: [scripted/toy]",
                                                         "model_preferences: [scripted/toy, scripted/other]"))
    calls = calls_made()
    result = cli("-C", toy, "compile", definition, "--model", "scripted/toy")
    assert result.exit_code == 0 and "carried over" in result.output and calls_made() == calls
    after = parse_artifact((toy / ARTIFACT).read_text(), path="after")
    assert after.prompt == before.prompt and after.provenance.scores == before.provenance.scores
    assert after.provenance.source_sha256 != before.provenance.source_sha256
    assert "carried over" in after.provenance.optimizer["notes"][-1]
    assert {before.content_sha256, after.content_sha256} <= measured_ids(toy)  # its scores still count as measured
    checked = cli("-C", toy, "compile", definition, "--model", "scripted/toy", "--check")
    assert checked.exit_code == 0, checked.output


def test_instructions_a_proposer_wrote_fail_the_check_saying_why(toy: Path, cli: object) -> None:
    """No source holds a proposer's text, so neither --check nor the strict runtime can tell it from a
    forgery: both refuse it, saying so; the plain runtime serves it."""
    from rosetta.runtime.agent import load

    run(toy, max_calls=200)
    assert parse_artifact((toy / ARTIFACT).read_text(), path="won").prompt.knobs.instructions
    checked = cli("-C", toy, "compile", toy / "signatures" / "toy-sorter.md", "--model", "scripted/toy", "--check")
    assert checked.exit_code == 1 and "written by a proposer model" in checked.output
    assert load("toy-sorter", project=toy).explain("scripted/toy").kind == "artifact"
    with pytest.raises(RosettaError, match="proposer"):
        load("toy-sorter", project=toy, strict=True).prompt_for("scripted/toy")


def test_an_edit_that_changes_the_prompt_leaves_the_optimized_artifact_stale_not_replaced(toy: Path,
                                                                                       cli: object) -> None:
    run(toy)
    optimized = (toy / ARTIFACT).read_bytes()
    definition = toy / "signatures" / "toy-sorter.md"
    definition.write_text(definition.read_text().replace("JSON with a `label`.", "JSON with a `label`, lower case."))
    result = cli("-C", toy, "compile", definition, "--model", "scripted/toy")
    assert result.exit_code == 1 and "stale" in result.output and "--optimize" in result.output
    assert (toy / ARTIFACT).read_bytes() == optimized  # never silently replaced by an unoptimized render
    forced = cli("-C", toy, "compile", definition, "--model", "scripted/toy", "--force")
    assert forced.exit_code == 0 and not parse_artifact((toy / ARTIFACT).read_text(), path="x").provenance.optimizer


def test_a_model_that_cannot_decode_greedily_records_sampled_scores_and_evaluate_compares_within_them(
        toy: Path, cli: object) -> None:
    request = OptimizeRequest(definition=toy / "signatures" / "toy-sorter.md", model="scripted/sampler",
                              settings=SearchSettings(trials=3, proposer=None, nearest_demos=False, repeats=2))
    assert optimize(request, settings=load_settings(toy)).status == "written"
    artifact = parse_artifact((toy / "compiled/toy-sorter/scripted/sampler.yaml").read_text(), path="x")
    scores = artifact.provenance.scores
    assert not artifact.prompt.sampling_params and "temperature" not in artifact.prompt.generation
    assert scores["decoding"] == "sampled" and scores["repeats"] == 2
    low, high = scores["test_ci95"]
    assert low < scores["test"] < high
    result = cli("-C", toy, "evaluate", "toy-sorter", "--model", "scripted/sampler")
    assert result.exit_code == 0, result.output
    assert "answered 2 times" in result.output and "within its 95% interval" in result.output
    once = evaluate(toy / "signatures" / "toy-sorter.md", "scripted/sampler", settings=load_settings(toy),
                    repeats=1)
    assert once.draws == 1 and once.interval == (low, high)


def test_out_is_where_an_optimized_artifact_goes(toy: Path, cli: object, tmp_path: Path) -> None:
    """Issue 38: `--out DIR` was ignored with --optimize, replacing the active artifact in compiled/."""
    elsewhere = tmp_path / "candidates"
    result = cli("-C", toy, "compile", toy / "signatures" / "toy-sorter.md", "--model", "scripted/toy", "--optimize",
                 "--trials", "2", "--proposer", "none", "--fixed-demos", "--out", elsewhere)
    assert result.exit_code == 0, result.output
    assert (elsewhere / "toy-sorter/scripted/toy.yaml").is_file() and not (toy / ARTIFACT).exists()


def test_a_study_in_sqlite_runs_without_optunas_heartbeat_warning(toy: Path, tmp_path: Path) -> None:
    """Issue 38: `--storage sqlite:///…` printed "Heartbeat of storage is supposed to be used with
    Study.optimize" on every trial (the search asks and tells; optuna beats only inside optimize)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = run(toy, trials=2, storage=f"sqlite:///{tmp_path / 'studies.db'}")
    assert report.status == "written"
    assert not [w for w in caught if "Heartbeat" in str(w.message)], [str(w.message) for w in caught]


def test_killed_study_resumes_losing_at_most_the_call_in_flight(toy: Path, tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    reference.mkdir()
    write_toy_project(reference)
    command = [sys.executable, "-m", "scripted_model", "compile", "signatures/toy-sorter.md", "--model",
               "scripted/toy", "--optimize", "--trials", "10", "--proposer", "none"]
    base_env = {**os.environ, "PYTHONPATH": str(TESTS)}

    def go(root: Path, log: Path, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(command, cwd=root, env={**base_env, "SCRIPTED_LOG": str(log), **env},
                              capture_output=True, text=True, timeout=300)

    whole = go(reference, tmp_path / "whole.log")
    assert whole.returncode == 0, whole.stderr
    whole_calls = len((tmp_path / "whole.log").read_text().splitlines())

    killed = go(toy, tmp_path / "resumed.log", SCRIPTED_KILL_AFTER="60")
    assert killed.returncode == -9 and not (toy / ARTIFACT).exists()
    resumed = go(toy, tmp_path / "resumed.log")
    assert resumed.returncode == 0, resumed.stderr
    paid = len((tmp_path / "resumed.log").read_text().splitlines())
    assert paid <= whole_calls + 1  # only the answer in flight at the kill was asked twice
    # the resumed study ends where the uninterrupted one did
    assert (toy / ARTIFACT).read_text().split("\nprompt:")[1] == (reference / ARTIFACT).read_text().split(
        "\nprompt:")[1]


def test_dspy_bootstrap_backend_writes_a_rosetta_artifact(toy: Path) -> None:
    request = OptimizeRequest(definition=toy / "signatures" / "toy-sorter.md", model="scripted/toy",
                              settings=SearchSettings(proposer=None), optimizer="dspy-bootstrap")
    report = optimize(request, settings=load_settings(toy))
    artifact = parse_artifact((toy / ARTIFACT).read_text(), path="a")
    assert artifact.provenance.optimizer["name"] == "dspy-bootstrap"
    assert "DSPy dspy-bootstrap chose" in artifact.provenance.optimizer["notes"][0]
    demos = artifact.prompt.demo_ids
    assert demos and all(d.startswith("dspy:") for d in demos)  # DSPy's demos, rendered by rosetta
    assert report.outcome.dev_score > 0.25  # demos covering topics beat the bare render
    again = evaluate(toy / "signatures/toy-sorter.md", "scripted/toy", settings=load_settings(toy))
    assert again.score == again.recorded  # parity holds for DSPy-chosen prompts too


def test_dspy_scores_unparsable_answers_0_instead_of_giving_up(toy: Path) -> None:
    # DSPy's own default cancels an optimizer after 10 answers it cannot parse; a small model misses
    # that many easily, so rosetta's backend lets DSPy score them 0 and finish
    request = OptimizeRequest(definition=toy / "signatures" / "toy-sorter.md", model="scripted/garbage",
                              settings=SearchSettings(proposer=None), optimizer="dspy-bootstrap")
    report = optimize(request, settings=load_settings(toy))
    assert report.status == "written" and report.outcome.dev_score == 0.0


def test_dspy_mipro_failing_on_a_weak_proposer_is_a_clear_error(toy: Path, cli: object) -> None:
    result = cli("-C", toy, "optimize", "toy-sorter", "--model", "scripted/toy", "--optimizer", "dspy-mipro",
                 "--proposer", "scripted/garbage")
    # MIPROv2's proposer cannot parse the garbage answers and DSPy raises: a usage error, never a traceback
    assert result.exit_code == 2, result.output
    assert "DSPy dspy-mipro failed on scripted/toy: AdapterParseError" in result.output
    assert "--optimizer rosetta" in result.output and "Traceback" not in result.output
    assert not (toy / ARTIFACT).exists()


def test_judge_metric_grades_with_the_rubric_reviewer_and_caches_its_verdicts(toy: Path) -> None:
    import shutil

    from conftest import REPO

    definition = toy / "signatures/toy-sorter.md"
    definition.write_text(definition.read_text().replace(
        "evaluation:\n  metric: exact\n",
        "evaluation:\n  metric: judge\n  judge: scripted/judge\n"
        "  rubric: [The label matches the reference, The answer is polite]\n"))
    with pytest.raises(Exception, match="needs the rubric-reviewer agent"):
        run(toy, proposer=None, trials=2)
    shutil.copy(REPO / "signatures/rubric-reviewer.md", toy / "signatures/rubric-reviewer.md")
    outcome = run(toy, proposer=None, trials=3, baseline_test=True).outcome
    # a right label: C1 passes (1) and C2 is indeterminate (½) → 0.75; a wrong one 0.25
    assert outcome.baseline_test == pytest.approx(0.25 * 0.75 + 0.75 * 0.25)
    before = calls_made()
    (toy / ARTIFACT).unlink()
    run(toy, proposer=None, trials=3, baseline_test=True)
    assert calls_made() == before  # the judge's verdicts came from the cache too


def test_a_judge_verdict_starts_only_when_its_retries_fit_the_budget() -> None:
    from rosetta.datasets import Example
    from rosetta.optimize.cache import Answer, EvalCache
    from rosetta.optimize.evaluation import Budget, BudgetExhausted, Evaluator
    from rosetta.optimize.metrics import Metric

    graded: list[object] = []
    judge = Metric("judge", lambda p, e: graded.append(p) or 1.0, needs_model=True, worst_case_calls=lambda: 3)
    budget = Budget(max_calls=10, calls=8)  # 2 calls left; a verdict may take 3 (its answer and 2 retries)
    evaluator = Evaluator(agent=None, metric=judge, cache=EvalCache(None), budget=budget)
    with pytest.raises(BudgetExhausted, match="--max-calls 10"):
        evaluator.score(Answer({"label": "alpha"}, "", True, 1, 0.0), Example("e1", {"text": "x"}, {"label": "alpha"}))
    assert graded == [] and budget.calls == 8
    budget.calls = 7  # 3 left: the verdict fits
    assert evaluator.score(Answer({"label": "alpha"}, "", True, 1, 0.0),
                           Example("e1", {"text": "x"}, {"label": "alpha"})) == 1.0


def test_cached_local_answers_belong_to_the_decoder_build_that_gave_them(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A change to the embedded decoder (its loop check, its grammar) must not be answered from a
    cache the old one filled: the recorded score would then not reproduce. Hosted keys stay put."""
    from rosetta.local import revision
    from rosetta.optimize import cache

    class Prompt:
        def __init__(self, model: str) -> None:
            self.model = model

        def to_dict(self) -> dict[str, object]:
            return {**dict.fromkeys(cache.SENT, "same"), "model": self.model}

    engine = tmp_path / "engine"
    engine.mkdir()
    (engine / "decoder.py").write_text("LOOP_WINDOW = 96\n")
    (engine / "weights.py").write_text("PREFIX = 'local/'\n")
    monkeypatch.setattr(revision, "PACKAGE", engine)
    local, hosted = Prompt("local/gemma-3-270m"), Prompt("openai/gpt-4o")
    revision.engine_revision.cache_clear()
    try:
        before = cache.prompt_key(local), cache.prompt_key(hosted)
        assert cache.prompt_key(local) == before[0]  # stable while nothing changes
        (engine / "weights.py").write_text("PREFIX = 'embedded/'\n")  # finds the file, answers nothing
        revision.engine_revision.cache_clear()
        assert cache.prompt_key(local) == before[0]
        (engine / "decoder.py").write_text("LOOP_WINDOW = 64\n")
        revision.engine_revision.cache_clear()
        assert cache.prompt_key(local) != before[0]
        assert cache.prompt_key(hosted) == before[1]
    finally:
        revision.engine_revision.cache_clear()  # later tests hash the real modules again


def test_an_artifact_names_the_decoder_build_it_was_scored_on(toy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Greedy answers of the embedded model depend on the llama.cpp build (kernels compiled for other
    instructions round differently): the artifact records the build, evaluate names a changed one as
    the reason a score differs, and --optimize does not call an artifact of another build up to date."""
    from rosetta.optimize import provenance, rescore, target

    def decoder(revision: str, build: str) -> None:  # the scripted model stands in for a local/ one
        for module in (target, provenance, rescore):  # the up-to-date check, the recorded scores, evaluate's reasons
            monkeypatch.setattr(module, "answerer_revision", lambda model, settings=None: revision)
        for module in (provenance, rescore):
            monkeypatch.setattr(module, "answerer_build", lambda model: build)

    decoder("a" * 64, "llama-cpp-python 0.3.36; CPU : AVX2 = 1")
    assert run(toy, trials=3, proposer=None).status == "written"
    artifact = parse_artifact((toy / ARTIFACT).read_text(), path=str(toy / ARTIFACT))
    assert artifact.provenance.scores["answerer_sha256"] == "a" * 64
    assert artifact.provenance.scores["answerer_build"] == "llama-cpp-python 0.3.36; CPU : AVX2 = 1"
    assert run(toy, trials=3, proposer=None).status == "up to date"

    decoder("b" * 64, "llama-cpp-python 0.3.36; CPU : AVX512 = 1")
    context = load_context(toy / "signatures/toy-sorter.md", "scripted/toy", settings=load_settings(toy))
    assert score_differences(artifact, context, artifact.prompt, "test", 16) == [
        "a different decoder build answers now (now llama-cpp-python 0.3.36; CPU : AVX512 = 1; then "
        "llama-cpp-python 0.3.36; CPU : AVX2 = 1; rosetta's decoding code counts too): greedy answers can "
        "differ between builds, so compile --optimize --force on this one to record scores it reproduces"]
    assert run(toy, trials=3, proposer=None).status == "written"  # re-scored under the build that answers now

    decoder("", "")  # a hosted model: no build to compare
    hosted = parse_artifact((toy / ARTIFACT).read_text(), path=str(toy / ARTIFACT))
    assert not score_differences(hosted, context, hosted.prompt, "test", 16)[0].startswith("a different decoder")


def test_the_rubric_judge_reserves_its_answer_and_its_validation_retries(toy: Path) -> None:
    import shutil

    from conftest import REPO

    from rosetta.optimize.judge import RubricJudge
    from rosetta.runtime.agent import judge_reviewer

    shutil.copy(REPO / "signatures/rubric-reviewer.md", toy / "signatures/rubric-reviewer.md")
    judge = judge_reviewer(toy, "scripted/judge", kind=RubricJudge)
    assert judge.agent().explain("scripted/judge").prompt.model_class == "open"
    assert judge.worst_case_calls() == 3  # an open model's answer gets two corrective retries


def test_dry_run_counts_the_baseline_test_pass_and_judge_calls(toy: Path, cli: object) -> None:
    import shutil

    from conftest import REPO

    definition = toy / "signatures/toy-sorter.md"
    definition.write_text(definition.read_text().replace(
        "evaluation:\n  metric: exact\n",
        "evaluation:\n  metric: judge\n  judge: scripted/judge\n  rubric: [The label matches the reference]\n"))
    shutil.copy(REPO / "signatures/rubric-reviewer.md", toy / "signatures/rubric-reviewer.md")
    args = ("-C", toy, "compile", definition, "--model", "scripted/toy", "--optimize", "--dry-run", "--trials", "5",
            "--proposer", "none", "--baseline")
    # each answer is planned with its verdict (2 calls): 8 bootstrap answers (16 calls), one answer's worst
    # case beyond that (2 retries, a verdict's 2) and the prior's pass over 20 dev rows (40 calls) need 60
    refused = cli(*args, "--max-calls", "59")
    assert refused.exit_code == 2 and "allow at least 60 calls" in refused.output, refused.output
    result = cli(*args, "--max-calls", "100")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    # (100 - 16 - 4) // 2 = 40 answers: the prior's 20, a challenger's 7 screening and 13 confirmation rows
    assert "the search: at most 100 calls (--max-calls 100): 0 proposals, 8 bootstrap answers, a race planned " \
        "at 40 answers" in text and "at most 1 challenger (fitted again when the space holds fewer distinct " \
        "prompts) races on screening rows per rung [7], keeping [1]" in text
    # test 16 × 2 (--baseline) and up to 20 dev rows of the unoptimized render, each answer up to 1 + 2 retries
    # + a verdict of 3 calls: 52 × 6
    assert "32 test answers and up to 20 dev answers of the unoptimized render, at most 312 calls" in text
    assert "each answer may take 2 validation retries and a judge's verdict of up to 3 calls" in text
    assert "at most 412 calls" in text


def test_a_search_logged_to_a_file_says_how_it_goes(toy: Path, cli: object) -> None:
    """Outside a terminal (CI logs) the live bar cannot redraw: the search prints a plain line per
    phase and trial instead, so an hour-long compile is never silent."""
    result = cli("-C", toy, "compile", toy / "signatures", "--model", "scripted/toy", "--optimize", "--trials", "3",
                 "--max-calls", "60", "--proposer", "none")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("toy-sorter → scripted/toy: ")]
    assert lines[0].startswith("toy-sorter → scripted/toy: starting · 0/3 candidates · best – · 0 calls · ")
    assert any(": racing · " in line for line in lines)
    assert "scoring the winner on test (0/16) · 3/3 candidates" in lines[-2]  # test answers are counted apart
    assert lines[-1].startswith("toy-sorter → scripted/toy: done · 3/3")
    # the prior on all of dev, two challengers in one rung (none is cut before the 7 screening rows), then the
    # better on the 13 confirmation rows
    assert "calls by phase: 20 prior, 14 rung 0, 13 confirmation" in " ".join(result.output.split())
    assert len(lines) == len(set(lines)) and len(lines) <= 10


def test_a_declared_proposer_is_called_on_its_own_endpoint(toy: Path, monkeypatch) -> None:
    """``--proposer`` may name a model the project declares: its proposals go to that endpoint (a
    real HTTP server here), by the model's id, with the keyless placeholder, never OPENAI_API_KEY."""
    from fault_server import FaultServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-vendor-key-never-sent")
    with FaultServer([("ok", json.dumps({"instruction": scripted_model.GOOD_INSTRUCTION}))]) as server:
        with (toy / "pyproject.toml").open("a", encoding="utf-8") as pyproject:
            pyproject.write(f'\n[tool.rosetta.models."openai/proposer-srv"]\napi_base = "{server.url}"\n'
                            'aliases = ["my-proposer"]\ncontext_window = 8192\nmax_output_tokens = 1024\n')
        report = run(toy, max_calls=60, proposer="my-proposer", proposals=2)
    assert scripted_model.GOOD_INSTRUCTION in report.outcome.proposals.usable
    assert server.requests and all(r["body"]["model"] == "proposer-srv" and r["authorization"] == "Bearer none"
                                   for r in server.requests)


def test_a_dry_run_over_a_tree_skips_agents_without_data_and_lists_them(toy: Path, cli) -> None:
    import shutil

    from conftest import REPO

    shutil.copy(REPO / "signatures" / "vuln-triage.md", toy / "signatures" / "vuln-triage.md")  # no datasets/ folder
    result = cli("--project", toy, "compile", toy / "signatures", "--model", "scripted/toy", "--optimize",
                 "--dry-run")
    assert result.exit_code == 0, result.output
    assert "dry run toy-sorter → scripted/toy" in result.output
    assert "skipped 1 agent without labeled data" in result.output and "vuln-triage.md" in result.output
    alone = cli("--project", toy, "compile", toy / "signatures" / "vuln-triage.md", "--model", "scripted/toy",
                "--optimize", "--dry-run")
    assert alone.exit_code == 2 and "no dataset folder" in alone.output  # one agent named: its error stands
    # a test split kept for `rosetta verify` alone is no data to learn from: skipped the same way
    (toy / "datasets" / "vuln-triage").mkdir()
    shutil.copy(REPO / "datasets" / "vuln-triage" / "test.jsonl", toy / "datasets" / "vuln-triage" / "test.jsonl")
    result = cli("--project", toy, "compile", toy / "signatures", "--model", "scripted/toy", "--optimize",
                 "--dry-run")
    assert result.exit_code == 0 and "skipped 1 agent without labeled data to learn from" in result.output
    alone = cli("--project", toy, "compile", toy / "signatures" / "vuln-triage.md", "--model", "scripted/toy",
                "--optimize", "--dry-run")
    assert alone.exit_code == 2 and "no train / dev examples in" in " ".join(alone.output.split())


def test_a_worse_search_is_kept_as_a_version_not_activated(toy: Path, cli: object) -> None:
    """A search that does not beat the active artifact on its confirmation rows (dev rows that chose
    nothing), on the same data or on other data (a small --dataset subset), never replaces it
    silently: it is kept as a version, and said so."""
    from rosetta.store.versions import list_versions

    definition = toy / "signatures" / "toy-sorter.md"
    best = run(toy, max_calls=200)
    active = (toy / ARTIFACT).read_bytes()
    assert best.status == "written" and best.outcome.test_score == 1.0

    def search(**options: object) -> object:
        settings = SearchSettings(trials=1, pruner="none", proposer=None, nearest_demos=False)
        return optimize(OptimizeRequest(definition=definition, model="scripted/toy", settings=settings, force=True,
                                        **options), settings=load_settings(toy))

    worse = search()
    assert worse.status == "kept as a version" and worse.outcome.dev_score < 1.0
    assert re.search(r"not activated: on the 13 confirmation rows \(dev rows that chose nothing\) it scores "
                     r"0\.[0-9]+ against the active artifact's 1\.0", worse.activation)
    assert (toy / ARTIFACT).read_bytes() == active and Path(worse.artifact).is_file()
    assert sorted(v.current for v in list_versions(toy / ARTIFACT)) == [False, True]  # listed, not served
    # both were measured here, so `rosetta versions` shows both one's scores (issue 81: a planted one's it does not)
    assert [v.measured_here for v in list_versions(toy / ARTIFACT, root=toy)] == [True, True]
    small = toy / "small"
    small.mkdir()
    for split in ("train", "dev", "test"):
        rows = (toy / "datasets" / "toy-sorter" / f"{split}.jsonl").read_text().splitlines()[:5]
        (small / f"{split}.jsonl").write_text("\n".join(rows) + "\n")
    subset = cli("-C", toy, "compile", definition, "--model", "scripted/toy", "--optimize", "--dataset", small,
                 "--max-calls", "20", "--proposer", "none", "--force")
    assert subset.exit_code == 0, subset.output
    # scored on other data (a subset): both answer its 3 confirmation rows, and a tie keeps the active one
    assert "not activated: on the 3 confirmation rows (dev rows that chose nothing)" in " ".join(subset.output.split())
    assert re.search(r"kept as version [0-9a-f]{7,}\.", " ".join(subset.output.split()))
    assert (toy / ARTIFACT).read_bytes() == active
    forced = search(activate=True)
    assert forced.status == "written" and (toy / ARTIFACT).read_bytes() != active


def test_the_proposal_phase_reports_progress_with_counts(toy: Path) -> None:
    phases: list[str] = []
    request = OptimizeRequest(definition=toy / "signatures" / "toy-sorter.md", model="scripted/toy",
                              settings=SearchSettings(trials=4, proposer="scripted/proposer", proposals=2,
                                                      nearest_demos=False, max_calls=80))
    optimize(request, settings=load_settings(toy), on_status=lambda status: phases.append(status.phase))
    seen = list(dict.fromkeys(phases))
    assert seen.index("proposing instructions 1/2") < seen.index("proposing instructions 2/2") < seen.index("racing")


def test_a_dspy_program_round_trips_into_an_artifact_version(toy: Path, cli: object) -> None:
    """to_dspy_program() → a DSPy optimizer → from_dspy(): its demos and instructions come back as a
    version of the artifact, rendered by rosetta for the model, listed but not served."""
    import dspy

    import rosetta
    from rosetta.signature import lower
    from rosetta.store.artifact import read_artifact

    signature = lower(rosetta.load_definition(toy / "signatures" / "toy-sorter.md"))
    program = signature.to_dspy_program()
    assert list(program.signature.output_fields) == ["label"]
    rows = scripted_model.toy_rows("train", 6)
    train = [signature.dspy_example(row["inputs"], row["output"]) for row in rows]
    compiled = dspy.LabeledFewShot(k=3).compile(program, trainset=train)
    compiled.predictors()[0].signature = compiled.predictors()[0].signature.with_instructions("Sort the note.")
    version = rosetta.from_dspy(compiled, "toy-sorter", "scripted/toy", project=toy)
    artifact = read_artifact(version)
    assert artifact.provenance.optimizer["name"] == "dspy-import" and artifact.model == "scripted/toy"
    chosen = [signature.output_from_dspy(demo) for demo in compiled.predictors()[0].demos]
    assert len(chosen) == 3 and [json.loads(m.content) for m in artifact.prompt.demos[1::2]] == chosen
    assert "Sort the note." in artifact.prompt.system
    listing = cli("-C", toy, "versions", "toy-sorter", "--model", "scripted/toy", "-f", "json")
    rows = {row["id"]: row for row in json.loads(listing.stdout)["versions"]}
    assert rows[artifact.content_sha256]["optimizer"] == "dspy-import" and not rows[artifact.content_sha256]["active"]


def test_a_fifo_or_symlink_at_the_study_journal_is_refused_not_waited_on(toy: Path, tmp_path: Path) -> None:
    """Issue 52: the default journal under .rosetta/ is a trusted file, read and written only when plain."""
    from rosetta.errors import UsageError
    from rosetta.settings import ProjectState

    journal = ProjectState.of(toy).study("toy-sorter", "scripted/toy")
    journal.parent.mkdir(parents=True)
    os.mkfifo(journal)
    with pytest.raises(UsageError, match="FIFO"):
        run(toy)
    journal.unlink()
    outside = tmp_path / "outside.journal"
    journal.symlink_to(outside)
    with pytest.raises(UsageError, match="symlink"):
        run(toy)
    assert not outside.exists()
