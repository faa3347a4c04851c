"""The optimizer's "best" is never worse than its prior, and the same on every machine (issue 79).

The search screens challengers on half of dev with the prior (the nearest-demos prompt) never cut;
the best challenger replaces the prior only when a one-sided paired test on the other half, rows
that chose nothing, says it is better, and the same test decides whether the winner replaces the
active artifact; a tie keeps what is there. The answers come from a real OpenAI-compatible HTTP
server on 127.0.0.1 (tests/fault_server.py) that the project declares as a model.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import scripted_model
from fault_server import FaultServer
from scripted_model import TOY_AGENT, write_toy_project

from rosetta.optimize.context import load_context
from rosetta.optimize.race import split_dev
from rosetta.optimize.space import label_function
from rosetta.optimize.study import SearchSettings
from rosetta.optimize.target import OptimizeRequest, optimize
from rosetta.settings import load_settings
from rosetta.store.artifact import read_artifact

MODEL = "openai/toy-srv"
ARTIFACT = Path("compiled/toy-sorter/openai/toy-srv.yaml")
CONTEXT = ["Each note is about one topic. Pick the label that fits it.",
           "Enterprise customers have a 1-hour SLA for p1."]
CONSTRAINTS = ["- Never invent a fifth label.", "- Notes about hats are never gamma."]
AGENT = TOY_AGENT.replace("## Context\nEach note is about one topic. Pick the label that fits it.\n",
                          "## Context\n" + "\n".join(CONTEXT) + "\n\n## Constraints\n" + "\n".join(CONSTRAINTS) + "\n")
ALPHA = json.dumps({"label": "alpha"})


def project(root: Path, server: FaultServer, *, dev: int = 20) -> Path:
    """The toy project with Context and Constraints sections, its model an HTTP endpoint."""
    root.mkdir(parents=True)
    write_toy_project(root, dev=dev)
    (root / "signatures" / "toy-sorter.md").write_text(AGENT, encoding="utf-8")
    with (root / "pyproject.toml").open("a", encoding="utf-8") as pyproject:
        pyproject.write(f'\n[tool.rosetta.models."{MODEL}"]\napi_base = "{server.url}"\n'
                        'context_window = 8192\nmax_output_tokens = 256\n')
    return root


def search(root: Path, **settings: Any) -> Any:
    knobs = {"max_calls": 120, "proposer": None, **settings}
    return optimize(OptimizeRequest(definition=root / "signatures" / "toy-sorter.md", model=MODEL,
                                    settings=SearchSettings(**knobs)), settings=load_settings(root))


def serving(answer: Callable[[list[dict[str, Any]]], str], seconds: float = 0.0) -> FaultServer:
    return FaultServer([("reply", answer, seconds)])


def test_when_every_candidate_ties_the_prior_is_active_and_keeps_every_line_of_the_definition(tmp_path: Path) -> None:
    # an endpoint that gives every prompt the same answer: before, the winner ("label-balanced +
    # terse-instruction") replaced the Context section with the one-line description, and became active
    with serving(lambda messages: ALPHA) as server:
        root = project(tmp_path / "p", server)
        report = search(root)
    assert report.status == "written"
    artifact = read_artifact(root / ARTIFACT)
    race = artifact.provenance.optimizer["race"]
    assert artifact.provenance.optimizer["kind"] == "nearest-k" and race["winner"] == race["prior"]
    assert race["confirmation"]["replaced"] is False and race["confirmation"]["p"] == 1.0  # a tie keeps the prior
    for line in CONTEXT + CONSTRAINTS:
        assert line in artifact.prompt.system


def test_an_instruction_variant_rewords_the_identity_and_keeps_every_section(tmp_path: Path) -> None:
    """The terse candidate replaces the identity sentence only. It replaced the body's Role section
    too, so a hand-made variant (instructions = the description) dropped a rubric written there and
    still passed --check (issue 81): the body's sections all stay now."""
    from rosetta.render.prompt import Knobs
    from rosetta.render.renderer import render

    with serving(lambda messages: ALPHA) as server:
        root = project(tmp_path / "p", server)
        context = load_context(root / "signatures" / "toy-sorter.md", MODEL, settings=load_settings(root))
    terse = render(context.signature, context.model, Knobs(instructions=context.signature.description),
                   adapters={context.adapter.name: context.adapter})
    assert context.signature.description in terse.system
    assert "You are a Note Sorter" not in terse.system  # the identity sentence gives way
    for line in ("You sort short notes.", *CONTEXT, *CONSTRAINTS):  # everything the body says stays
        assert line in terse.system


def test_a_challenger_better_on_screening_rows_only_does_not_replace_the_prior(tmp_path: Path) -> None:
    """The terse-instruction prompt is always right on the screening rows and answers "alpha" like every
    other prompt on the rest: it leads the screening, and the rows that chose nothing show no gain."""
    root = tmp_path / "p"
    screening: set[str] = set()
    description = ""

    def answer(messages: list[dict[str, Any]]) -> str:
        system, asked = str(messages[0].get("content") or ""), str(messages[-1].get("content") or "")
        if description and description in system and "You are a" not in system \
                and any(note in asked for note in screening):
            return scripted_model.toy_answer([{"role": "system", "content": scripted_model.RULEBOOK},
                                              {"role": "user", "content": asked}])
        return ALPHA

    with serving(answer) as server:
        project(root, server, dev=30)
        context = load_context(root / "signatures" / "toy-sorter.md", MODEL, settings=load_settings(root))
        description = context.signature.description
        rows, _ = split_dev(context.data.dev, 0, label_function(context.signature))
        screening = {row.inputs["text"] for row in rows}
        report = search(root, max_calls=200)
    race = report.outcome.race
    challenger = race["challenger"]
    assert race["finalists"][challenger] == 1.0 and "terse-instruction" in race["challenger_kind"]  # it led
    confirmation = race["confirmation"]
    assert confirmation["challenger"] == confirmation["prior"] and not confirmation["replaced"]
    assert race["winner"] == race["prior"] and report.outcome.kind == "nearest-k"


def test_activation_on_a_tie_keeps_the_incumbent(tmp_path: Path) -> None:
    with serving(lambda messages: ALPHA) as server:
        root = project(tmp_path / "p", server)
        assert search(root).status == "written"  # the prior: the nearest-demos prompt
        active = (root / ARTIFACT).read_bytes()
        other = search(root, nearest_demos=False)  # another prompt (the plain k-shot one), as good on every row
    assert other.status == "kept as a version" and (root / ARTIFACT).read_bytes() == active
    assert re.search(r"not activated: on the 13 confirmation rows \(dev rows that chose nothing\) it scores ([0-9.]+) "
                     r"against the active artifact's \1, one-sided paired test p = 1 ", other.activation)


def stuttering(messages: list[dict[str, Any]]) -> str:
    """The toy model's answer, except that a third of the notes first get an answer that is no JSON (the
    runtime then retries with the error): answers cost 1 or 2 calls, fixed per request, not per arrival."""
    asked = str(messages[-1].get("content") or "")
    first = sum(m["role"] == "assistant" and "not json" in str(m.get("content")) for m in messages) == 0
    if first and int(hashlib.sha256(asked.encode()).hexdigest(), 16) % 3 == 0:
        return "not json, sorry"
    return scripted_model.toy_answer(messages)


def test_the_same_bytes_at_any_jobs_and_from_a_warm_cache(tmp_path: Path) -> None:
    """Three projects search with the same seed, data and a budget tight enough that retries decide who is
    admitted, at -j 1, 4 and 16 against an endpoint whose answers arrive in random order; then the last
    one searches again from its warm cache. Before, -j 16 overran the budget and chose on fewer rows."""
    import time

    jitter = random.Random(79)

    def late(messages: list[dict[str, Any]]) -> str:
        time.sleep(jitter.random() * 0.01)
        return stuttering(messages)

    with serving(late) as server:
        roots = {jobs: project(tmp_path / f"j{jobs}", server) for jobs in (1, 4, 16)}
        reports = {jobs: search(root, max_calls=75, jobs=jobs) for jobs, root in roots.items()}
        assert server.peak > 1  # answers really ran at once
        (roots[16] / ARTIFACT).unlink()
        warm = search(roots[16], max_calls=75, jobs=16)
    written = {jobs: (root / ARTIFACT).read_bytes() for jobs, root in roots.items()}
    assert written[1] == written[4] == written[16] == (roots[16] / ARTIFACT).read_bytes()
    outcome = reports[1].outcome
    assert warm.outcome.paid_calls == 0 and warm.outcome.calls == outcome.calls <= 75
    assert outcome.cut_short > 0  # retries made answers dearer than planned: the budget stopped some candidates
    for jobs in (4, 16):
        assert (reports[jobs].outcome.phases, reports[jobs].outcome.cut_short) == (outcome.phases, outcome.cut_short)


def test_a_plain_render_gives_way_only_to_a_prompt_that_beats_it(tmp_path: Path, cli: Any) -> None:
    """The plain render `rosetta compile` wrote is what users are served: the search's winner replaces it
    only by the same paired test, on the same rows; against an endpoint that answers every prompt alike
    the plain render stays, and the optimized artifact is kept as a version."""
    with serving(lambda messages: ALPHA) as server:
        root = project(tmp_path / "p", server)
        assert cli("-C", root, "compile", root / "signatures", "--model", MODEL).exit_code == 0
        plain = (root / ARTIFACT).read_bytes()
        report = search(root)
    assert report.status == "kept as a version" and (root / ARTIFACT).read_bytes() == plain
    assert re.search(r"not activated: on the 13 confirmation rows \(dev rows that chose nothing\) it scores "
                     r"([0-9.]+) against the active artifact's \1, one-sided paired test p = 1 ", report.activation)
