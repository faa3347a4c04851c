"""Issue 85, part 2: `rosetta export promptfoo AGENT` writes a promptfoo suite (one prompt and one
provider per compiled artifact, the labeled rows as tests scored by the agent's schema and metric),
and real promptfoo (from npm) runs it against llama-cpp-python's server on the embedded model, with
results that agree with `rosetta evaluate` row by row."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import question_type_project
from fault_server import FaultServer
from llama_server import Server

from rosetta.export.promptfoo import BRIDGE, CONFIG
from rosetta.export.promptfoo_bridge import Bridge

SERVED = "gemma-270m-server"
MODEL = f"openai/{SERVED}"
PROMPTFOO = "promptfoo@0.121.20"  # pinned: the suite's format is checked against this release


def declare(root: Path, url: str) -> None:
    """Declare an OpenAI-compatible server at ``url`` in the project as ``my-gemma``."""
    with (root / "pyproject.toml").open("a", encoding="utf-8") as toml:
        toml.write(f"""
[tool.rosetta.models."{MODEL}"]
api_base = "{url}"
adapter = "open-source"
class = "open"
context_window = 16384
max_output_tokens = 1024
prompt_style = "chat"
structured_output = "json_object"
family = "gemma"
aliases = ["my-gemma"]
capabilities = {{ system_message = false }}
""")


@pytest.fixture
def compiled(tmp_path, cli):
    """question-type with 6 test rows, compiled for a declared server and for gpt-4o."""
    root = question_type_project(tmp_path / "project", train=4, dev=4, test=6)
    declare(root, "http://127.0.0.1:9/v1")
    result = cli("--project", root, "compile", root / "signatures", "--model", "my-gemma", "--model", "openai/gpt-4o")
    assert result.exit_code == 0, result.output
    return root


def read_suite(folder: Path) -> dict:
    return yaml.safe_load((folder / CONFIG).read_text(encoding="utf-8"))


def test_the_suite_has_one_prompt_and_provider_per_artifact_and_the_rows_as_tests(compiled, cli):
    result = cli("--project", compiled, "export", "promptfoo", "question-type")
    assert result.exit_code == 0, result.output
    folder = compiled / "promptfoo" / "question-type"
    suite = read_suite(folder)
    models = sorted([MODEL, "openai/gpt-4o"])
    assert [p["config"]["model"] for p in suite["prompts"]] == models
    assert [p["label"] for p in suite["providers"]] == models
    for prompt, provider in zip(suite["prompts"], suite["providers"], strict=True):
        assert provider["prompts"] == [prompt["label"]]  # each model gets its own prompt, and only it
        assert provider["id"] == f"file://{BRIDGE}" and prompt["id"] == f"file://{BRIDGE}:prompt"
    rows = [json.loads(line) for line in (compiled / "datasets/question-type/test.jsonl").read_text().splitlines()]
    assert [t["description"] for t in suite["tests"]] == [r["id"] for r in rows]
    first = suite["tests"][0]
    assert first["vars"] == rows[0]["inputs"]
    schema, metric = first["assert"]
    assert schema["type"] == "is-json" and schema["value"]["properties"]["label"]["enum"]
    assert metric["type"] == "python" and metric["metric"] == "exact" and metric["config"] == {
        "expected": rows[0]["output"]}
    assert suite["env"]["PROMPTFOO_DISABLE_TEMPLATING"] == "true"
    assert "wrote" in result.output and "2 prompt(s)" in result.output and "6 test row(s)" in result.output


def test_the_bridge_gives_each_model_its_artifacts_messages_and_refuses_a_changed_artifact(compiled, cli):
    import rosetta

    assert cli("--project", compiled, "export", "promptfoo", "question-type", "--model", "my-gemma",
               "--limit", "2").exit_code == 0
    suite = read_suite(compiled / "promptfoo" / "question-type")
    assert [p["label"] for p in suite["providers"]] == [MODEL] and len(suite["tests"]) == 2
    bridge = bridge_of(compiled / "promptfoo" / "question-type")
    question = {"question": 'Who wrote "Hamlet"? {{ not a template }}'}
    agent = rosetta.load("question-type", project=compiled)
    assert bridge.messages(MODEL, {"vars": question, "config": {"model": MODEL}}) == \
        agent.prompt_for(MODEL).messages(question)
    with pytest.raises(ValueError, match="not in this export"):
        bridge.messages("openai/gpt-4o", {"vars": question})
    definition = compiled / "signatures" / "question-type.md"  # changed and compiled again after the export
    definition.write_text(definition.read_text().replace("## Constraints\n", "## Constraints\n- Answer in one word.\n"),
                          encoding="utf-8")
    assert cli("--project", compiled, "compile", definition, "--model", "my-gemma").exit_code == 0
    stale = bridge_of(compiled / "promptfoo" / "question-type")
    with pytest.raises(ValueError, match="export promptfoo question-type` again"):
        stale.messages(MODEL, {"vars": question})


def bridge_of(folder: Path) -> Bridge:
    """The Bridge the exported file builds, without running promptfoo."""
    namespace: dict = {}
    exec((folder / BRIDGE).read_text(encoding="utf-8"), namespace)
    return namespace["bridge"]


def test_the_provider_sends_the_messages_it_is_given_with_the_artifacts_parameters(compiled, cli):
    answer = json.dumps({"label": "human"})
    with FaultServer([("ok", answer)]) as server:
        text = (compiled / "pyproject.toml").read_text().replace("http://127.0.0.1:9/v1", server.url)
        (compiled / "pyproject.toml").write_text(text, encoding="utf-8")
        assert cli("--project", compiled, "compile", compiled / "signatures", "--model", "my-gemma").exit_code == 0
        assert cli("--project", compiled, "export", "promptfoo", "question-type", "-m", "my-gemma").exit_code == 0
        bridge = bridge_of(compiled / "promptfoo" / "question-type")
        context = {"vars": {"question": "Who wrote Hamlet?"}, "config": {"model": MODEL}}
        messages = bridge.messages(MODEL, context)
        response = bridge.call_api(json.dumps(messages), {"config": {"model": MODEL}}, context)
    assert response["output"] == answer and response["metadata"]["model"] == MODEL
    (sent,) = server.requests
    body = sent["body"]
    assert body["messages"] == messages and body["temperature"] == 0.0 and body["response_format"]["type"] == "json_object"
    assert sent["authorization"] == "Bearer none"  # a project's endpoint gets no vendor key
    graded = bridge.get_assert(response["output"], {"config": {"expected": {"label": "human"}},
                                                    "metadata": response["metadata"]})
    assert graded == {"pass": True, "score": 1.0, "reason": "exact 1.000"}
    wrong = bridge.get_assert('{"label": "entity"}', {"config": {"expected": {"label": "human"}},
                                                      "metadata": response["metadata"]})
    assert wrong["pass"] is False and wrong["score"] == 0.0 and '"human"' in wrong["reason"]
    invalid = bridge.get_assert("not json", {"config": {"expected": {"label": "human"}},
                                             "metadata": response["metadata"]})
    assert invalid["pass"] is False and invalid["reason"].startswith("invalid answer")


@pytest.mark.parametrize("args, message", [
    (["--model", "anthropic/claude-sonnet-4-5"], "no artifact for anthropic/claude-sonnet-4-5"),
    (["--split", "train", "--dataset", "nowhere"], "nowhere"),
])
def test_a_model_without_an_artifact_or_bad_data_is_a_usage_error(compiled, cli, args, message):
    result = cli("--project", compiled, "export", "promptfoo", "question-type", *args)
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def test_a_planted_link_cannot_send_the_suite_outside_the_project(compiled, cli, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (compiled / "promptfoo").symlink_to(outside, target_is_directory=True)  # a cloned project's trap
    result = cli("--project", compiled, "export", "promptfoo", "question-type")
    assert result.exit_code == 2 and "symlink" in result.output and "--out" in result.output
    assert not any(outside.iterdir())
    mine = tmp_path / "mine"  # a folder the user names is the user's
    assert cli("--project", compiled, "export", "promptfoo", "question-type", "--out", mine).exit_code == 0
    assert (mine / CONFIG).is_file() and (mine / BRIDGE).is_file()


def test_an_agent_never_compiled_is_a_usage_error(tmp_path, cli):
    root = question_type_project(tmp_path / "project", train=2, dev=2, test=2)
    result = cli("--project", root, "export", "promptfoo", "question-type")
    assert result.exit_code == 2 and "no compiled artifact" in result.output and "rosetta compile" in result.output


@pytest.fixture(scope="module")
def promptfoo() -> Path:
    """promptfoo from npm, installed once per machine into the test cache (about 90 s, 400 MB)."""
    npm = shutil.which("npm")
    assert npm, "npm is needed to install promptfoo (Node.js 20 or newer)"
    home = Path(os.environ.get("ROSETTA_TEST_CACHE", Path.home() / ".cache" / "rosetta-tests"))
    folder = home / PROMPTFOO.replace("@", "-")
    binary = folder / "node_modules" / ".bin" / "promptfoo"
    if not binary.exists():
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        subprocess.run([npm, "install", "--prefix", str(partial), "--no-audit", "--no-fund", "--loglevel", "error",
                        PROMPTFOO], check=True, timeout=900, capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
    return binary


@pytest.mark.slow
def test_promptfoo_runs_the_suite_on_the_embedded_model_and_agrees_with_rosetta_evaluate(
        tmp_path, cli, promptfoo, local_model_cache, monkeypatch):
    import rosetta
    from rosetta.local.weights import model_path

    monkeypatch.setenv("ROSETTA_CACHE_DIR", str(local_model_cache))
    root = question_type_project(tmp_path / "project", train=4, dev=4, test=3)
    server = Server(model_path("local/gemma-3-270m"), tmp_path / "server.log", alias=SERVED)
    try:
        declare(root, server.url)
        assert cli("--project", root, "compile", root / "signatures", "--model", "my-gemma").exit_code == 0
        evaluated = cli("--project", root, "evaluate", "question-type", "--model", "my-gemma", "--format", "json")
        assert evaluated.exit_code == 0, evaluated.output
        rosetta_rows = {row["id"]: row for row in json.loads(evaluated.stdout)["rows"]}
        assert cli("--project", root, "export", "promptfoo", "question-type").exit_code == 0
        rosetta_artifact = rosetta.load("question-type", project=root).explain(MODEL).artifact_id
        folder = root / "promptfoo" / "question-type"
        environment = {**os.environ, "PROMPTFOO_DISABLE_TELEMETRY": "1", "PROMPTFOO_DISABLE_UPDATE": "1",
                       "PROMPTFOO_CONFIG_DIR": str(tmp_path / "promptfoo-home"), "NO_COLOR": "1"}
        run = subprocess.run([str(promptfoo), "eval", "-c", CONFIG, "-o", "results.json", "--no-cache", "-j", "1",
                              "--no-progress-bar", "--no-table"], cwd=folder, env=environment, capture_output=True,
                             text=True, timeout=600)
        assert (folder / "results.json").exists(), run.stdout[-3000:] + run.stderr[-3000:]
    finally:
        server.stop()
    results = json.loads((folder / "results.json").read_text())["results"]["results"]
    assert len(results) == len(rosetta_rows) == 3
    for cell in results:
        row = rosetta_rows[cell["testCase"]["description"]]
        assert cell["provider"]["label"] == MODEL and not cell["response"].get("error"), cell["response"]
        assert cell["response"]["metadata"]["artifact"] == rosetta_artifact  # the exported artifact answered
        assert json.loads(cell["response"]["output"]) == row["output"]  # the same answer to the same messages
        (schema, metric) = cell["gradingResult"]["componentResults"]
        assert schema["pass"] is row["valid"] and metric["score"] == row["score"]
        assert cell["success"] is (row["valid"] and row["score"] == 1.0)
    assert run.returncode == (0 if all(r["score"] == 1.0 for r in rosetta_rows.values()) else 100)
