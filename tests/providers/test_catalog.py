"""The model catalog: every documented alias resolves, unknown names fail helpfully, and our
capability table agrees with litellm's model map wherever litellm knows the model."""

from __future__ import annotations

import logging

import pytest

from rosetta.errors import UsageError
from rosetta.providers.adapter import load_adapters
from rosetta.providers.catalog import load_catalog
from rosetta.providers.kinds import StructuredOutput

REQUIRED_ALIASES = {
    "gemini/2.5-pro": "gemini/gemini-2.5-pro",
    "google/gemini-2.5-pro": "gemini/gemini-2.5-pro",
    "sonnet": "anthropic/claude-sonnet-5-5",
    "opus": "anthropic/claude-opus-5-5",
    "haiku": "anthropic/claude-haiku-5-5",
    "anthropic/claude-sonnet": "anthropic/claude-sonnet-5-5",
    "gpt": "openai/gpt-5.6",
    "gpt-mini": "openai/gpt-5.4-mini",
    "gemini-pro": "gemini/gemini-3.1-pro-preview",
    "gemini-flash": "gemini/gemini-3.8-flash",
    # pinned ids stay available for reproducibility (and retired ones for a clear error)
    "anthropic/claude-sonnet-4": "anthropic/claude-sonnet-4-20250514",
    "claude-sonnet-4-6": "anthropic/claude-sonnet-4-6",
    "openai/gpt-5.5": "openai/gpt-5.5",
    "openai/gpt-4o": "openai/gpt-4o",
    "openai/gpt-4.1": "openai/gpt-4.1",
    "o3": "openai/o3",
    "gemini-2.0-flash": "gemini/gemini-2.0-flash",
    "ollama/llama3.1": "ollama_chat/llama3.1",
    "ollama/mistral": "ollama_chat/mistral",
    "ollama/gemma2": "ollama_chat/gemma2",
    "local/gemma-3-270m": "local/gemma-3-270m",
}


@pytest.mark.parametrize("alias", sorted(REQUIRED_ALIASES))
def test_required_aliases_resolve(alias):
    assert load_catalog().resolve(alias).id == REQUIRED_ALIASES[alias]
    assert load_catalog().resolve(alias.upper()).id == REQUIRED_ALIASES[alias]


def test_every_catalog_model_names_an_existing_adapter():
    adapters = load_adapters()
    for model in load_catalog().models:
        assert model.adapter in adapters, model.id
        assert model.max_output <= model.context_window


def test_ollama_models_route_through_ollama_chat():
    assert all(not m.id.startswith("ollama/") for m in load_catalog().models)


def test_unknown_name_lists_the_nearest_known_names():
    with pytest.raises(UsageError) as caught:
        load_catalog().resolve("sonet")
    assert "sonnet" in caught.value.problems[0].hint


@pytest.fixture
def announcements():
    """Forget which models outside the catalog were announced (once per process)."""
    from rosetta.providers import catalog

    catalog._announced.clear()
    yield
    catalog._announced.clear()


def test_a_model_outside_the_catalog_takes_litellms_map_and_is_noted_once(caplog, announcements):
    with caplog.at_level(logging.INFO, logger="rosetta.providers.catalog"):
        model = load_catalog().resolve("deepseek/deepseek-chat")
        load_catalog().resolve("deepseek/deepseek-chat")
    assert not model.known and model.adapter == "open-source" and model.context_window >= 64000
    assert [r.levelname for r in caplog.records] == ["INFO"] and "litellm's model map" in caplog.text


def test_an_id_neither_list_knows_runs_with_one_warning_naming_its_defaults(caplog, announcements):
    """Issue 54: the catalog refines, it does not gate; a typo still says what it likely meant."""
    with caplog.at_level(logging.WARNING, logger="rosetta.providers.catalog"):
        typo = load_catalog().resolve("openai/gpt-4oo")
        load_catalog().resolve("openai/gpt-4oo")
    assert typo.adapter == "openai" and typo.context_window == 8192 and not typo.capabilities.structured_output
    assert len(caplog.records) == 1
    assert "8,192-token window" in caplog.text and "did you mean openai/gpt-4o?" in caplog.text


def test_the_strict_gate_refuses_ids_its_patterns_do_not_name():
    with pytest.raises(UsageError) as typo:
        load_catalog().resolve("openai/gpt-4oo", unlisted=[])
    assert "outside rosetta's catalog" in str(typo.value) and "openai/gpt-4o" in typo.value.problems[0].hint
    assert "unlisted_models" in typo.value.problems[0].hint
    assert load_catalog().resolve("deepseek/deepseek-chat", unlisted=["openai/*", "DeepSeek/*"]).id == "deepseek/deepseek-chat"
    with pytest.raises(UsageError):
        load_catalog().resolve("deepseek/deepseek-chat", unlisted=["openai/*"])
    assert load_catalog().resolve("sonnet", unlisted=[]).id == "anthropic/claude-sonnet-5-5"  # the catalog is never gated


@pytest.mark.parametrize("name", ["nonesuch/model-x", "sonet", "azure/", "ollama/"])
def test_a_name_litellm_cannot_route_is_an_error_naming_the_nearest(name):
    with pytest.raises(UsageError) as unknown:
        load_catalog().resolve(name)
    assert f"unknown model {name!r}" in str(unknown.value)
    if name == "sonet":
        assert "sonnet" in unknown.value.problems[0].hint


def test_a_bare_name_litellm_knows_gets_its_provider_prefix():
    assert load_catalog().resolve("gpt-4o-mini-2024-07-18").id == "openai/gpt-4o-mini-2024-07-18"


@pytest.mark.parametrize(("model", "adapter", "mechanism"), [
    ("azure/gpt-4o", "openai", None),  # the adapter's own: response_format json_schema, strict
    ("azure/my-deployment", "openai", None),  # a deployment name: the host decides
    ("azure_ai/claude-haiku-4-5", "anthropic", StructuredOutput.FORCED_TOOL),  # the map claims no output_config
    ("bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic", None),  # output_config → Bedrock outputConfig
    ("bedrock/us.amazon.nova-pro-v1:0", "open-source", StructuredOutput.RESPONSE_SCHEMA),
    ("vertex_ai/gemini-2.5-pro", "google", None),
    ("vertex_ai/claude-sonnet-4-5@20250929", "anthropic", StructuredOutput.FORCED_TOOL),
    ("openrouter/anthropic/claude-sonnet-4.5", "anthropic", StructuredOutput.RESPONSE_SCHEMA),  # OpenAI-shaped host
    ("groq/openai/gpt-oss-120b", "open-source", StructuredOutput.RESPONSE_SCHEMA),  # open weights, by name
    ("mistral/mistral-large-latest", "open-source", StructuredOutput.RESPONSE_SCHEMA),
])
def test_a_hosted_model_gets_its_vendors_adapter_and_its_hosts_mechanism(model, adapter, mechanism):
    resolved = load_catalog().resolve(model)
    assert (resolved.adapter, resolved.structured_output) == (adapter, mechanism)


def test_families_of_hosted_models_drop_the_hosts_vendor_prefix():
    assert load_catalog().resolve("bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0").family == "claude"
    assert load_catalog().resolve("together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo").family == "llama"
    assert load_catalog().resolve("vertex_ai/gemini-2.5-pro").family == "gemini"


def test_unknown_ollama_model_falls_back_to_the_open_source_adapter():
    model = load_catalog().resolve("ollama/qwen2.5", unlisted=["ollama_chat/*"])  # the gate sees the routed id
    assert model.id == "ollama_chat/qwen2.5" and model.adapter == "open-source" and model.model_class == "open"


def test_capabilities_agree_with_litellm_where_it_knows(monkeypatch):
    """Capability honesty: we may know more than litellm, never contradict what it knows."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    checked = 0
    for model in load_catalog().models:
        try:
            info = litellm.get_model_info(model.id)
        except Exception:
            continue  # ollama_chat/* and local/* are not in litellm's map
        checked += 1
        if info.get("max_input_tokens"):
            assert info["max_input_tokens"] >= model.context_window * 0.95, model.id
        if info.get("supports_function_calling"):
            assert model.capabilities.calls_tools, model.id  # natively, or by grammar (local/)
        if info.get("supports_response_schema"):
            assert model.capabilities.structured_output, model.id
    assert checked >= 8


def test_custom_openai_name_uses_the_openai_adapter_with_conservative_limits():
    model = load_catalog().resolve("openai/my-company-finetune", unlisted=True)
    assert model.adapter == "openai" and not model.known and model.context_window == 8192


def test_user_adapter_claims_a_provider_for_unknown_models(tmp_path):
    import json

    data = json.loads(load_adapters()["openai"].model_dump_json())
    data.update(name="deepseek-house", providers=["deepseek"], delimiter="xml")
    (tmp_path / "deepseek.yaml").write_text(json.dumps(data))
    adapters = load_adapters([tmp_path])
    assert load_catalog().resolve("deepseek/deepseek-chat", adapters, unlisted=True).adapter == "deepseek-house"
