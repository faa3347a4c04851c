"""Two embedded models in one process and one project: Gemma 3 270M (a base model, completion
prompts) and SmolLM2 135M Instruct (a chat model with its own template). Both go through the same
runtime paths; neither's answers, caches or artifacts stand in for the other's; and the cross-model
matrix scores each one's prompt on both."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
from conftest import CHAT_LOCAL_MODEL, LOCAL_MODEL, LOCAL_MODELS, REPO, question_type_project

import rosetta
from rosetta.local.revision import answerer_revision
from rosetta.optimize.cache import Answer, EvalCache, prompt_key

REPORT = ("Stored XSS in the comment editor: a logged-in user can embed <script> in a comment, which runs "
          "for every moderator who opens the review queue.")


def test_each_model_has_its_own_revision_and_cache_keys() -> None:
    """The same prompt sent to the two models is two cache entries: an answer one model gave is never
    replayed as the other's (the weights' sha256 is part of each model's revision)."""
    assert answerer_revision(LOCAL_MODEL) != answerer_revision(CHAT_LOCAL_MODEL) != ""
    assert answerer_revision("openai/gpt-4o") == ""
    prompt = rosetta.load("question-type", project=REPO).prompt_for(LOCAL_MODEL)
    keys = {model: prompt_key(replace(prompt, model=model)) for model in LOCAL_MODELS}
    assert keys[LOCAL_MODEL] != keys[CHAT_LOCAL_MODEL]
    cache = EvalCache(None)
    cache.put(keys[LOCAL_MODEL] + ":q-1", Answer({"label": "human"}, '{"label": "human"}', True, 1, 0.0))
    assert cache.get(keys[CHAT_LOCAL_MODEL] + ":q-1") is None
    assert cache.get(keys[LOCAL_MODEL] + ":q-1") is not None


@pytest.mark.parametrize("model", LOCAL_MODELS)
def test_both_models_answer_through_run_arun_and_stream(local_model: str, model: str) -> None:
    agent = rosetta.load("vuln-triage", project=REPO)
    schema = agent.spec.output.schema_
    result = agent.run({"report": REPORT}, model=model)
    assert result.valid and result.model == model, result.attempts
    jsonschema.validate(result.data, schema)
    assert asyncio.run(agent.arun({"report": REPORT}, model=model)).raw == result.raw  # greedy: the same answer
    stream = agent.stream({"report": REPORT}, model=model)
    chunks, streamed = list(stream), stream.result()
    assert "".join(chunks) == streamed.raw == result.raw


def test_the_chat_model_gets_its_chat_template_and_the_base_model_plain_text(local_model: str) -> None:
    from rosetta.local.models import load_model
    from rosetta.local.weights import resolve

    base, chat = (load_model(resolve(model)) for model in LOCAL_MODELS)
    assert (base.style, chat.style) == ("completion", "chat")
    formatted = chat.formatter(messages=[{"role": "system", "content": "Be brief."},
                                         {"role": "user", "content": "Hi"}]).prompt
    assert "<|im_start|>system\nBe brief.<|im_end|>" in formatted and formatted.rstrip().endswith(
        "<|im_start|>assistant")
    assert base.lock is not chat.lock and base.llm is not chat.llm  # one lock and one set of contexts each
    shown = rosetta.load("log-summarizer-open", project=REPO).explain(CHAT_LOCAL_MODEL)
    # no artifact of its own: Gemma's optimized completion-style artifact is not served to a chat model
    assert shown.kind == "uncompiled" and "system placement is completion" in shown.reason


@pytest.fixture
def tiny_project(tmp_path: Path, local_model: str) -> Path:
    """question-type with a few rows of its public data, no compiled artifacts."""
    return question_type_project(tmp_path / "qt", train=8, dev=2, test=3)


def _rosetta(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rosetta.cli", "-C", str(project), *args], capture_output=True,
                          text=True, check=False, timeout=900)


def test_the_cross_matrix_scores_every_prompt_on_every_model(tiny_project: Path) -> None:
    plot = tiny_project / "matrix.html"
    result = _rosetta(tiny_project, "evaluate", "question-type", "--cross", LOCAL_MODEL, "--cross", CHAT_LOCAL_MODEL,
                      "-f", "json", "--plot", str(plot))
    assert result.returncode == 0, result.stderr
    matrix = json.loads(result.stdout)
    assert matrix["models"] == list(LOCAL_MODELS) and matrix["examples"] == 3
    assert set(matrix["scores"]) == {*LOCAL_MODELS, "uncompiled"}
    assert all(0.0 <= score <= 1.0 for row in matrix["scores"].values() for score in row.values())
    # the diagonal is what `evaluate --model` scores (checked on the chat model, a process of its own);
    # with no artifacts, each model's prompt is its render
    alone = json.loads(_rosetta(tiny_project, "evaluate", "question-type", "--model", CHAT_LOCAL_MODEL,
                                "-f", "json").stdout)
    assert matrix["scores"][CHAT_LOCAL_MODEL][CHAT_LOCAL_MODEL] == alone["score"]
    for model in LOCAL_MODELS:
        assert matrix["scores"][model][model] == matrix["scores"]["uncompiled"][model]
        assert matrix["prompts"][model].startswith("uncompiled: ")
        assert matrix["best"][model] and all(row in matrix["scores"] for row in matrix["best"][model])
    assert "plotly" in plot.read_text(encoding="utf-8")
    # kept for the runtime's fallback, with what each row scored (no artifact here: None)
    from rosetta.store.cross import read_cross

    kept = read_cross(tiny_project / "compiled", "question-type")
    assert matrix["recorded"] == str(tiny_project / "compiled" / "question-type" / "cross.yaml")
    assert kept.scores == matrix["scores"] and kept.prompts == dict.fromkeys(LOCAL_MODELS)
    # (the table the same command prints without -f json: tests/optimize/test_cross_matrix.py)


def test_the_matrix_needs_two_models(tiny_project: Path) -> None:
    result = _rosetta(tiny_project, "evaluate", "question-type", "--cross", LOCAL_MODEL, "--cross", "gemma-3-270m")
    assert result.returncode != 0 and "two models or more" in result.stderr and "Traceback" not in result.stderr
    result = _rosetta(tiny_project, "evaluate", "question-type")
    assert result.returncode != 0 and "--model" in result.stderr and "Traceback" not in result.stderr


def test_verify_fast_runs_both_models_side_by_side(local_model: str, cli, tmp_path: Path) -> None:
    report = tmp_path / "fast.json"
    result = cli("-C", REPO, "verify", REPO / "signatures/vuln-triage.md", "--model", LOCAL_MODEL, "--model",
                 CHAT_LOCAL_MODEL, "--fast", "--json", report)
    assert result.exit_code in (0, 1), result.output  # 1 = a criterion failed: an honest result, not an error
    assert "Traceback" not in result.output
    models = {m["model"]: m for m in json.loads(report.read_text())["agents"][0]["models"]}
    assert set(models) == set(LOCAL_MODELS) and all(m["error"] is None for m in models.values())
    assert [r["kind"] for r in models[CHAT_LOCAL_MODEL]["runs"]] == ["example", "adversarial"]
    assert models[CHAT_LOCAL_MODEL]["prompt_source"] != models[LOCAL_MODEL]["prompt_source"]
