"""A declared model end to end against a real OpenAI-compatible server, no mocks: llama-cpp-python's
own server (``python -m llama_cpp.server``) serves the embedded Gemma GGUF through its chat template,
and a project declares it in ``[tool.rosetta.models]``. rosetta compiles for it, runs an enum
classifier and a JSON extractor on it (valid on the first attempt: the schema travels in
``response_format: {"type": "json_object", "schema": …}``, which the server turns into a grammar),
streams, answers 8 concurrent ``arun`` calls, and falls back to the embedded model when the server
stops, each model on its own prompt."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from conftest import LOCAL_MODEL, REPO
from llama_server import CONTEXT, Server

import rosetta
from rosetta.runtime.result import RetryPolicy
from rosetta.store.artifact import read_header

SERVED = "gemma-270m-server"
MODEL = f"openai/{SERVED}"

EXTRACTOR = """\
---
name: version-extractor
version: "1.0.0"
description: Pulls the affected package and the first fixed version out of a security advisory.
identity:
  role: Advisory Reader
  expertise: [security advisories]
output:
  schema:
    type: object
    properties:
      package: {type: string, description: "The affected package, as the advisory names it."}
      fixed_in: {type: [string, "null"], description: "The first fixed version, or null when none is out."}
    required: [package, fixed_in]
    additionalProperties: false
  required: true
inputs:
  advisory: {type: string, description: "One advisory's text."}
generation_params:
  default: {temperature: 0.0, max_output_tokens: 60}
portability:
  enabled: true
  minimum_context_window: 4000
  model_preferences: [my-gemma]
---
## Role
You read one security advisory and report the affected package and the first version that fixes it.

## Constraints
- Copy the package name exactly as written.
- Use null when the advisory says no fix is released.
"""

QUESTIONS = ["What is the capital of France?", "Who wrote Hamlet?", "How many legs does a spider have?",
             "What does NASA stand for?", "Why is the sky blue?", "Where is Mount Everest?",
             "When did the Berlin Wall fall?", "What is a prime number?"]


@pytest.fixture(scope="module")
def server(local_model_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    from rosetta.local.weights import model_path

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ROSETTA_CACHE_DIR", str(local_model_cache))
        gguf = model_path(LOCAL_MODEL)
    running = Server(gguf, tmp_path_factory.mktemp("server") / "server.log", alias=SERVED)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def project(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project declaring the server, with question-type (an enum classifier) and a JSON extractor."""
    root = tmp_path_factory.mktemp("declared")
    (root / "signatures").mkdir()
    shutil.copy(REPO / "signatures" / "question-type.md", root / "signatures")
    (root / "signatures" / "version-extractor.md").write_text(EXTRACTOR, encoding="utf-8")
    (root / "pyproject.toml").write_text(f"""\
[project]
name = "demo"

[tool.rosetta.models."{MODEL}"]
api_base = "{server.url}"
adapter = "open-source"
class = "open"
context_window = {CONTEXT}
max_output_tokens = 1024
prompt_style = "chat"
structured_output = "json_object"
family = "gemma"
aliases = ["my-gemma"]
capabilities = {{ system_message = false }}  # Gemma's chat template has no system turn
""", encoding="utf-8")
    return root


@pytest.fixture(autouse=True)
def _cache(local_model: str) -> None:
    """Every test here may fall back to the embedded model: its weights come from the session's cache."""


def _agent(project: Path, name: str) -> rosetta.Agent:
    return rosetta.load(name, project=project)


def test_compile_writes_an_artifact_per_model_each_in_its_own_style(project, cli):
    result = cli("--project", project, "compile", project / "signatures", "--model", "my-gemma",
                 "--model", LOCAL_MODEL)
    assert result.exit_code == 0, result.output
    for name in ("question-type", "version-extractor"):
        chat = _agent(project, name).explain("my-gemma")
        assert chat.kind == "artifact" and chat.model == MODEL, chat.reason
        assert chat.prompt.structured_output.value == "json_object"
        assert chat.prompt.system_placement.value == "first_user_turn"  # the declaration says: no system role
        local = _agent(project, name).explain(LOCAL_MODEL)
        assert local.kind == "artifact" and local.prompt.system_placement.value == "completion"
        text = Path(chat.artifact).read_text(encoding="utf-8")
        assert server_url_absent(text, project)


def server_url_absent(text: str, project: Path) -> bool:
    """An artifact holds the prompt, never where or how it is served."""
    return "api_base" not in text and "127.0.0.1" not in text and "api_key" not in text


@pytest.mark.parametrize("agent, inputs", [
    ("question-type", "question=What is the capital of France?"),
    ("version-extractor", ("advisory=CVE-2023-44487: the Go module golang.org/x/net before 0.17.0 lets a remote "
                           "client exhaust server resources. Upgrade to 0.17.0.")),
])
def test_rosetta_run_answers_valid_json_on_the_first_attempt(project, cli, agent, inputs):
    result = cli("--project", project, "run", agent, "--model", "my-gemma", "-i", inputs)
    assert result.exit_code == 0, result.output
    schema = _agent(project, agent).spec.output.schema_
    jsonschema.validate(json.loads(result.stdout), schema)
    assert f"1 attempt(s) [{MODEL}:ok]" in result.stderr


def test_stream_yields_the_answer_as_it_arrives(project):
    agent = _agent(project, "question-type")
    stream = agent.stream({"question": "Who painted the Mona Lisa?"}, "my-gemma", fallbacks=[])
    chunks, result = list(stream), stream.result()
    assert result.valid and result.model == MODEL and [a.outcome for a in result.attempts] == ["ok"]
    assert len(chunks) > 1 and "".join(chunks) == result.raw
    assert result.artifact == read_header(Path(agent.explain("my-gemma").artifact).read_text()).content_sha256


def test_eight_concurrent_aruns_all_answer_valid(project):
    agent = _agent(project, "question-type")

    async def ask_all():
        return await asyncio.gather(*(agent.arun({"question": q}, "my-gemma", fallbacks=[],
                                                 policy=RetryPolicy(timeout=240)) for q in QUESTIONS))

    results = asyncio.run(ask_all())
    assert all(r.valid and r.model == MODEL and [a.outcome for a in r.attempts] == ["ok"] for r in results)
    labels = {r.data["label"] for r in results}
    assert labels <= {"abbreviation", "description", "entity", "human", "location", "number"}
    # the same question asked alone gets the same answer (temperature 0 on the server)
    alone = agent.run({"question": QUESTIONS[0]}, "my-gemma", fallbacks=[])
    assert alone.raw == results[0].raw


def test_doctor_probes_the_declared_endpoint(project, cli, server):
    result = cli("--project", project, "doctor")
    assert MODEL in result.output and "reachable" in result.output and "unreachable" not in result.output


def test_a_stopped_server_falls_back_to_the_embedded_model_on_its_own_prompt(project, server, cli):
    agent = _agent(project, "question-type")
    server.stop()
    result = agent.run({"question": "What is the capital of Peru?"}, "my-gemma", fallbacks=[LOCAL_MODEL],
                       policy=RetryPolicy(attempts=2, base=0.05))
    assert result.valid and result.model == LOCAL_MODEL
    assert [a.outcome for a in result.attempts] == ["transient", "transient", "ok"]
    assert [a.model for a in result.attempts] == [MODEL, MODEL, LOCAL_MODEL]
    local = agent.explain(LOCAL_MODEL)
    assert result.artifact == local.artifact_id and local.kind == "artifact"  # the embedded model's own artifact
    assert "unreachable" in cli("--project", project, "doctor").output
