"""Issue 80: one model, many hosts. Six model families, each on every host litellm serves it from:
the family's rules (class, window, output limit, thinking reserve, sampling, capabilities,
lifecycle) and the prompt they shape are the same on every host; only the host's own parts differ
(its structured-output form, its parameter names, its credentials). Each request then goes to a
local recorder in that host's wire shape (OpenAI, Azure, Anthropic, Bedrock Converse, Vertex AI's
Gemini, Claude and OpenAPI routes) through the runtime, and the body it receives is checked field
by field against the one ``render``'s request makes, and for the family's rules on the wire.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cloud_credentials import API_PATHS, api_base_for, cloud_env
from conftest import REPO
from vendor_recorder import VendorRecorder

from rosetta.definition.loader import load_definition
from rosetta.providers.catalog import load_catalog
from rosetta.providers.model_entries import CatalogModel
from rosetta.render.prompt import RenderedPrompt
from rosetta.render.renderer import render
from rosetta.signature import lower

FAMILIES: dict[str, tuple[str, ...]] = {
    "o3": ("openai/o3", "azure/o3", "azure/us/o3", "openrouter/openai/o3"),
    "gpt-4o": ("openai/gpt-4o", "azure/gpt-4o", "openrouter/openai/gpt-4o"),
    "claude-sonnet-4-6": ("anthropic/claude-sonnet-4-6", "bedrock/anthropic.claude-sonnet-4-6",
                          "bedrock/us.anthropic.claude-sonnet-4-6", "vertex_ai/claude-sonnet-4-6",
                          "azure_ai/claude-sonnet-4-6", "openrouter/anthropic/claude-sonnet-4.6"),
    "gemini-2.5-pro": ("gemini/gemini-2.5-pro", "vertex_ai/gemini-2.5-pro", "openrouter/google/gemini-2.5-pro"),
    "llama-3.3-70b": ("groq/llama-3.3-70b-versatile", "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo",
                      "bedrock/us.meta.llama3-3-70b-instruct-v1:0", "vertex_ai/meta/llama-3.3-70b-instruct-maas",
                      "azure_ai/Llama-3.3-70B-Instruct", "openrouter/meta-llama/llama-3.3-70b-instruct"),
    "mistral-large-3": ("mistral/mistral-large-2512", "azure_ai/mistral-large-3",
                        "bedrock/mistral.mistral-large-3-675b-instruct", "openrouter/mistralai/mistral-large-2512"),
}
"""Per family, its direct id first, then the same model on other hosts (a cross-region ``us.`` id included)."""
HOSTED = [(family, model) for family, models in FAMILIES.items() for model in models]
ANSWER = {"severity": "high", "rationale": "Unauthenticated SQL injection in the login form."}
REPORT = {"report": "SQL injection in the login form lets an unauthenticated attacker bypass authentication."}
TRANSPORT = {"api_base", "api_key", "timeout", "num_retries", "max_retries", "metadata"}
CATALOG = load_catalog()


def family_rules(model: CatalogModel) -> dict[str, Any]:
    """What belongs to the model, not to its host."""
    return {"family": model.family, "class": model.model_class, "window": model.context_window,
            "max_output": model.max_output, "thinking_reserve": model.thinking_reserve,
            "capabilities": model.capabilities, "adapter": model.adapter, "prompt_style": model.prompt_style,
            "status": CATALOG.status(model), "underlying": model.underlying}


def shaped_by_family(prompt: RenderedPrompt) -> dict[str, Any]:
    """The parts of a rendered prompt the family's rules decide: everything but the structured-output
    form (and what only it changes: the schema's sanitizing and its tokens)."""
    return {"system": prompt.system, "demos": prompt.demos, "generation": prompt.generation,
            "sampling": prompt.sampling_params, "class": prompt.model_class, "adapter": prompt.adapter,
            "placement": prompt.system_placement, "tools": prompt.tools, "dropped": prompt.dropped}


@pytest.fixture(scope="module")
def signature() -> Any:
    return lower(load_definition(REPO / "signatures" / "vuln-triage.md", root=REPO))


@pytest.mark.parametrize("family", FAMILIES)
def test_a_model_gets_its_familys_rules_and_prompt_on_every_host(family: str, signature: Any) -> None:
    models = [CATALOG.resolve(model) for model in FAMILIES[family]]
    assert [m.id for m in models] == list(FAMILIES[family])  # each host keeps its own id: that is what is called
    direct = family_rules(models[0])
    for model in models[1:]:
        assert family_rules(model) == direct, model.id
    prompts = [render(signature, model) for model in models]
    for model, prompt in zip(models[1:], prompts[1:], strict=True):
        assert shaped_by_family(prompt) == shaped_by_family(prompts[0]), model.id


@pytest.mark.parametrize("model", ["azure/o3", "bedrock/us.anthropic.claude-sonnet-4-6", "vertex_ai/gemini-2.5-pro",
                                   "openrouter/openai/o3"])
def test_the_cases_of_the_issue_render_like_the_direct_id(model: str, signature: Any) -> None:
    """o3 and Claude 4.6 take no temperature anywhere; o3 and Gemini 2.5 Pro get their thinking room
    on every host; an Azure model keeps its class."""
    hosted = render(signature, model)
    direct = render(signature, CATALOG.resolve(model).underlying)
    assert hosted.generation == direct.generation and hosted.model_class == direct.model_class
    if "claude" in model or "o3" in model:
        assert "temperature" not in hosted.to_litellm(REPORT)
    if "o3" in model or "gemini" in model:
        assert hosted.generation["max_tokens"] > 16000


def _wire(body: dict[str, Any]) -> tuple[Any, Any]:
    """(the output-token limit, the temperature) wherever the host's wire shape puts them (Gemini's
    JSON takes its proto field names in either spelling)."""
    if "inferenceConfig" in body:
        return body["inferenceConfig"].get("maxTokens"), body["inferenceConfig"].get("temperature")
    if "generationConfig" in body:
        config = body["generationConfig"]
        return config.get("maxOutputTokens", config.get("max_output_tokens")), config.get("temperature")
    return body.get("max_completion_tokens", body.get("max_tokens")), body.get("temperature")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with pytest.MonkeyPatch.context() as patch, VendorRecorder(json.dumps(ANSWER)) as server:
        cloud_env(server, patch, tmp_path_factory.mktemp("cloud"))
        for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
            patch.setenv(variable, "test-not-a-real-key")
        yield server


@pytest.mark.parametrize(("family", "model"), HOSTED, ids=[model for _, model in HOSTED])
def test_each_host_receives_the_request_render_shows(family: str, model: str, served: VendorRecorder,
                                                     signature: Any) -> None:
    import rosetta
    from rosetta.local.litellm_offline import import_litellm

    litellm = import_litellm()
    provider = model.split("/", 1)[0]
    base = api_base_for(model, served) if provider in API_PATHS else served.base_for(provider)
    shown = render(signature, model)
    calls: list[dict[str, Any]] = []

    def capture(**kwargs: Any) -> Any:
        calls.append(kwargs)
        return litellm.completion(**kwargs)

    first = len(served.requests)
    result = rosetta.load("vuln-triage", project=REPO).run(REPORT, model=model, fallbacks=[], api_base=base,
                                                            complete=capture, validation_retries=0)
    assert result.valid and result.data == ANSWER and result.model == model
    sent = {key: value for key, value in calls[0].items() if key not in TRANSPORT}
    assert sent == shown.to_litellm(REPORT)
    run_body = _bodies(served, first)
    again = len(served.requests)
    litellm.completion(**shown.to_litellm(REPORT), api_base=base, num_retries=0)
    assert run_body == _bodies(served, again), "the body run sends is not the one render's request makes"
    limit, temperature = _wire(run_body[0])
    underlying = CATALOG.resolve(model)
    assert limit == shown.generation["max_tokens"], f"{model}: {limit} output tokens on the wire"
    assert (temperature is None) == (not underlying.capabilities.sampling_params), f"{model}: temperature {temperature}"


def _bodies(server: VendorRecorder, since: int) -> list[dict[str, Any]]:
    return [request.body for request in server.requests[since:] if request.path != "/token"]


TOOLED_AGENT = """---
name: ticket-router
description: Routes a support ticket, looking up the customer first.
portability:
  enabled: true
  body_format: markdown
  model_preferences: [gemini/gemini-2.5-pro]
tools:
  - name: lookup_customer
    description: The customer's plan and open tickets.
    parameters:
      type: object
      properties: {email: {type: string}}
      required: [email]
output:
  schema:
    type: object
    properties: {queue: {type: string, enum: [billing, technical, sales]}}
    required: [queue]
---
## Role
You route support tickets to a queue.
"""


@pytest.mark.parametrize("model", ["gemini/gemini-2.5-pro", "vertex_ai/gemini-2.5-pro"])
def test_gemini_with_tools_is_never_sent_a_json_response_type(model: str, tmp_path: Path, served: VendorRecorder) -> None:
    """The Gemini API refuses function calling beside ``response_mime_type: application/json``: an
    agent with tools answers through the forced ``respond`` function instead, and render says so."""
    from rosetta.local.litellm_offline import import_litellm
    from rosetta.render.mechanisms import RESPOND_TOOL

    definition = tmp_path / "ticket-router.md"
    definition.write_text(TOOLED_AGENT, encoding="utf-8")
    shown = render(lower(load_definition(definition, root=tmp_path)), model)
    assert shown.structured_output.value == "forced_tool"
    assert any("refuses response_schema beside function calling" in warning for warning in shown.warnings)
    provider = model.split("/", 1)[0]
    base = api_base_for(model, served) if provider in API_PATHS else served.base_for(provider)
    first = len(served.requests)
    import_litellm().completion(**shown.to_litellm({"request": "I was charged twice."}), api_base=base, num_retries=0)
    body = _bodies(served, first)[0]
    config = body.get("generationConfig") or {}
    assert not {"responseMimeType", "response_mime_type", "responseSchema", "response_schema",
                "responseJsonSchema", "response_json_schema"} & set(config), config
    names = [declaration["name"] for tool in body["tools"]
             for declaration in tool.get("functionDeclarations", tool.get("function_declarations", ()))]
    assert sorted(names) == sorted(["lookup_customer", RESPOND_TOOL])
    assert body["toolConfig"]["functionCallingConfig"]["mode"] == "ANY"



def test_rosetta_run_on_azure_o3_succeeds_against_an_azure_shaped_server(tree: Path, cli: Any,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's first failure: ``run -m azure/o3`` sent a temperature o3 refuses. Now it sends
    o3's request, in Azure's form (``max_completion_tokens``, the deployment path, ``api-key``)."""
    with VendorRecorder(json.dumps(ANSWER)) as server:
        cloud_env(server, monkeypatch, tree)
        monkeypatch.setenv("AZURE_API_BASE", server.root)
        ran = cli("--project", tree, "run", "vuln-triage", "-m", "azure/o3", "-i", f"report={REPORT['report']}")
        calls = [r for r in server.requests if r.path != "/token"]
    assert ran.exit_code == 0, ran.output
    assert json.loads(ran.stdout[ran.stdout.index("{"):ran.stdout.rindex("}") + 1]) == ANSWER
    assert [r.path for r in calls] == ["/openai/deployments/o3/chat/completions"]
    body = calls[0].body
    assert "temperature" not in body and body["max_completion_tokens"] > 16000 and "max_tokens" not in body


def test_no_azure_key_is_a_credentials_outcome_naming_the_variable(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No retry, no wait, no health penalty: the SDK's "Missing credentials" is told apart from a
    connection failure, and the error names AZURE_API_KEY."""
    import rosetta
    from rosetta.runtime.result import ModelCallError

    with VendorRecorder(json.dumps(ANSWER)) as server:
        cloud_env(server, monkeypatch, tree)
        monkeypatch.delenv("AZURE_API_KEY")
        agent = rosetta.load("vuln-triage", project=tree)
        with pytest.raises(ModelCallError) as failed:
            agent.run(REPORT, model="azure/o3", fallbacks=[], api_base=server.root)
        sent = [r for r in server.requests if r.path != "/token"]
    error = failed.value
    assert error.kind == "credentials" and error.missing == ("AZURE_API_KEY",) and not sent
    assert [(a.outcome, a.waited_s) for a in error.attempts] == [("credentials", 0.0)]
    assert "AZURE_API_KEY" in str(error)


def test_models_host_lists_each_family_as_the_host_serves_it(cli: Any) -> None:
    listed = cli("models", "--host", "azure", "-f", "json")
    assert listed.exit_code == 0, listed.output
    rows = {row["model"]: row for row in json.loads(listed.stdout)}
    o3 = rows["openai/o3"]
    assert "azure/o3" in o3["ids"] and "azure/us/o3" in o3["ids"]
    assert (o3["class"], o3["sampling_params"], o3["thinking_reserve"], o3["structured_output"]) == (
        "frontier", False, 16000, "json_schema_strict")
    assert not any(i.startswith("azure/azure_ai/") for row in rows.values() for i in row["ids"])  # another host's ids
    bedrock = {row["model"]: row for row in json.loads(cli("models", "--host", "bedrock", "-f", "json").stdout)}
    assert "bedrock/us.anthropic.claude-sonnet-4-6" in bedrock["anthropic/claude-sonnet-4-6"]["ids"]
    shown = cli("models", "--host", "openrouter")
    assert shown.exit_code == 0 and "still gets that model's rules" in shown.output
