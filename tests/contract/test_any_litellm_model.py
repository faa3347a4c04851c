"""Issue 54: any model litellm routes is one rosetta renders, compiles and runs. For one model of
each host most teams use — Azure OpenAI, Azure AI, Bedrock (Claude and Nova), Vertex AI (Gemini and
Claude), Groq, OpenRouter, Mistral, Together, DeepSeek, xAI, Fireworks — none a catalog id (several
are catalog models on another host, which keep that model's rules: test_one_model_many_hosts.py):
``rosetta render`` and ``compile`` (and ``compile --check``) succeed, and a run reaches a local
recorder through litellm's own route for the host, signed as the host expects, with the body that
host's transformation makes of the model's rules: a temperature only where litellm's map allows
sampling, and the host's own structured-output form (response_format json_schema, Anthropic's
output_config, Bedrock's outputConfig, Gemini's responseSchema, or a forced tool)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cloud_credentials import api_base_for, cloud_env
from vendor_recorder import VendorRecorder

import rosetta

ANSWER = {"severity": "high", "rationale": "Unauthenticated SQL injection in the login form."}
REPORT = {"report": "SQL injection in the login form lets an unauthenticated attacker bypass authentication."}


def json_schema(strict: bool | None) -> Callable[[dict[str, Any]], Any]:
    """OpenAI-shaped hosts: ``response_format`` json_schema carrying the agent's schema."""
    def check(body: dict[str, Any]) -> None:
        form = body["response_format"]
        assert form["type"] == "json_schema" and "severity" in form["json_schema"]["schema"]["properties"]
        assert form["json_schema"].get("strict") is strict
        assert "output_config" not in body and "tools" not in body
    return check


def json_mode(body: dict[str, Any]) -> None:
    """A model whose family has no native structured output, on any host (Llama 3.3 70B: Groq has no
    json_schema for it, so none of its hosts gets one): JSON mode, the schema in the prompt."""
    assert body["response_format"] == {"type": "json_object"} and "tools" not in body
    assert '"severity"' in body["messages"][0]["content"]


def output_config(body: dict[str, Any]) -> None:
    """Anthropic's own Messages API (Azure AI, Vertex AI): ``output_config.format``."""
    assert body["output_config"]["format"]["type"] == "json_schema"
    assert "severity" in body["output_config"]["format"]["schema"]["properties"]
    assert "tools" not in body and "response_format" not in body


def respond_tool(body: dict[str, Any]) -> None:
    """A Claude the map does not know to take output_config: the forced ``respond`` tool."""
    assert [tool["name"] for tool in body["tools"]] == ["respond"]
    assert body["tool_choice"] == {"type": "tool", "name": "respond"}
    assert "output_config" not in body


def converse_output_config(body: dict[str, Any]) -> None:
    """Bedrock Converse: litellm turns output_config into ``outputConfig.textFormat``."""
    schema = json.loads(body["outputConfig"]["textFormat"]["structure"]["jsonSchema"]["schema"])
    assert "severity" in schema["properties"] and "toolConfig" not in body


def converse_json_tool(body: dict[str, Any]) -> None:
    """Bedrock Converse for a model without outputConfig: litellm forces its ``json_tool_call``."""
    assert body["toolConfig"]["toolChoice"] == {"tool": {"name": "json_tool_call"}}
    assert "severity" in body["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]["properties"]


def response_schema(body: dict[str, Any]) -> None:
    """Gemini: a JSON response MIME type and the schema in ``generationConfig`` (Vertex AI's JSON
    takes proto field names in either spelling; litellm writes snake_case)."""
    config = body["generationConfig"]
    mime = config.get("responseMimeType") or config.get("response_mime_type")
    schema = next(config[key] for key in ("responseJsonSchema", "response_json_schema", "responseSchema",
                                          "response_schema") if key in config)
    assert mime == "application/json" and "severity" in schema["properties"]


def sampled(body: dict[str, Any]) -> Any:
    """The temperature the body asks for, wherever the host's API puts it (None: none)."""
    for holder in (body, body.get("inferenceConfig") or {}, body.get("generationConfig") or {}):
        if "temperature" in holder:
            return holder["temperature"]
    return None


GEMINI_3_DEFAULT = 1.0
"""litellm's own temperature for a Gemini 3 request that names none (the vendor's recommended value)."""

CASES = [
    # model, the path litellm's route takes, the structured-output form, the temperature on the wire
    # (the definition's 0.0 where the map allows sampling; else none, or litellm's own default)
    ("azure/gpt-4o", "/openai/deployments/gpt-4o/chat/completions", json_schema(True), 0.0),
    ("azure_ai/claude-opus-5-5", "/anthropic/v1/messages", output_config, None),
    ("azure_ai/claude-haiku-4-5", "/anthropic/v1/messages", respond_tool, 0.0),
    ("bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0", "/converse", converse_output_config, 0.0),
    ("bedrock/us.amazon.nova-pro-v1:0", "/converse", converse_json_tool, 0.0),
    ("vertex_ai/gemini-2.5-pro", "/publishers/google/models/gemini-2.5-pro:generateContent", response_schema, 0.0),
    ("vertex_ai/gemini-3.8-flash", "/publishers/google/models/gemini-3.8-flash:generateContent", response_schema,
     GEMINI_3_DEFAULT),
    ("vertex_ai/claude-opus-5-5", "/publishers/anthropic/models/claude-opus-5-5:rawPredict", output_config, None),
    ("vertex_ai/claude-sonnet-4-5@20250929", ":rawPredict", respond_tool, 0.0),
    ("groq/openai/gpt-oss-120b", "/v1/chat/completions", json_schema(None), 0.0),
    ("openrouter/anthropic/claude-sonnet-4.5", "/v1/chat/completions", json_schema(None), 0.0),
    ("mistral/mistral-large-latest", "/v1/chat/completions", json_schema(None), 0.0),
    ("together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo", "/v1/chat/completions", json_mode, 0.0),
    ("deepseek/deepseek-chat", "/v1/chat/completions", json_schema(None), 0.0),
    ("xai/grok-4.3", "/v1/chat/completions", json_schema(None), 0.0),
    ("fireworks_ai/accounts/fireworks/models/deepseek-v3", "/v1/chat/completions", json_schema(None), 0.0),
]


@pytest.mark.parametrize(("model", "path", "form", "temperature"), CASES, ids=[case[0] for case in CASES])
def test_a_hosted_model_renders_compiles_and_runs(model: str, path: str, form: Callable[[dict[str, Any]], None],
                                                  temperature: float | None, tree: Path, cli: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from rosetta.local.litellm_offline import import_litellm

    sent: list[dict[str, Any]] = []

    def complete(**kwargs: Any) -> Any:
        sent.append(kwargs)
        return import_litellm().completion(**kwargs)

    definition = tree / "signatures" / "vuln-triage.md"
    shown = cli("--project", tree, "render", definition, "-m", model)
    assert shown.exit_code == 0 and f"vuln-triage on {model}" in shown.stdout, shown.output
    compiled = cli("--project", tree, "compile", definition, "-m", model)
    assert compiled.exit_code == 0, compiled.output
    assert cli("--project", tree, "compile", "--check", definition, "-m", model).exit_code == 0

    with VendorRecorder(json.dumps(ANSWER)) as recorder:
        cloud_env(recorder, monkeypatch, tree)
        agent = rosetta.load("vuln-triage", project=tree)
        assert agent.explain(model).kind == "artifact"
        result = agent.run(REPORT, model=model, fallbacks=[], api_base=api_base_for(model, recorder),
                           complete=complete)
        calls = [r for r in recorder.requests if r.path != "/token"]
    assert result.valid and result.data == ANSWER and result.model == model
    assert len(calls) == 1 and path in calls[0].path, [r.path for r in calls]
    body = calls[0].body
    form(body)
    assert sampled(body) == temperature
    assert ("temperature" in sent[0]) == (temperature == 0.0)  # rosetta sends one only where the map allows it
