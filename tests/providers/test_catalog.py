"""The model catalog: every documented alias resolves, unknown names fail helpfully, and our
capability table agrees with litellm's model map wherever litellm knows the model."""

from __future__ import annotations

import logging

import pytest

from rosetta.errors import UsageError
from rosetta.providers.adapter import load_adapters
from rosetta.providers.catalog import load_catalog, resolve_model

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
    assert resolve_model(alias).id == REQUIRED_ALIASES[alias]
    assert resolve_model(alias.upper()).id == REQUIRED_ALIASES[alias]


def test_every_catalog_model_names_an_existing_adapter():
    adapters = load_adapters()
    for model in load_catalog().models:
        assert model.adapter in adapters, model.id
        assert model.max_output <= model.context_window


def test_ollama_models_route_through_ollama_chat():
    assert all(not m.id.startswith("ollama/") for m in load_catalog().models)


def test_unknown_name_lists_the_nearest_known_names():
    with pytest.raises(UsageError) as caught:
        resolve_model("sonet")
    assert "sonnet" in caught.value.problems[0].hint


def test_model_outside_the_catalog_uses_litellms_map_with_a_warning_once_accepted(caplog):
    with caplog.at_level(logging.WARNING):
        model = resolve_model("deepseek/deepseek-chat", unlisted=["deepseek/*"])
    assert not model.known and model.adapter == "open-source" and model.context_window >= 64000
    assert "not in rosetta's catalog" in caplog.text


def test_a_model_outside_the_catalog_is_an_error_unless_accepted():
    """Issue 36, case 8: a typo used to run with a warning and lose native structured output."""
    with pytest.raises(UsageError) as typo:
        resolve_model("openai/gpt-4oo")
    assert "unknown model 'openai/gpt-4oo'" in str(typo.value) and "openai/gpt-4o" in typo.value.problems[0].hint
    assert "unlisted_models" in typo.value.problems[0].hint and "--unlisted" in typo.value.problems[0].hint
    with pytest.raises(UsageError, match="litellm's model map lists it"):
        resolve_model("deepseek/deepseek-chat")
    assert resolve_model("deepseek/deepseek-chat", unlisted=True).id == "deepseek/deepseek-chat"
    assert resolve_model("deepseek/deepseek-chat", unlisted=["openai/*", "DeepSeek/*"]).id == "deepseek/deepseek-chat"
    with pytest.raises(UsageError):
        resolve_model("deepseek/deepseek-chat", unlisted=["openai/*"])


def test_unknown_ollama_model_falls_back_to_the_open_source_adapter():
    model = resolve_model("ollama/qwen2.5", unlisted=["ollama_chat/*"])
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
            assert model.capabilities.tool_use, model.id
        if info.get("supports_response_schema"):
            assert model.capabilities.structured_output, model.id
    assert checked >= 8


def test_custom_openai_name_uses_the_openai_adapter_with_conservative_limits():
    model = resolve_model("openai/my-company-finetune", unlisted=True)
    assert model.adapter == "openai" and not model.known and model.context_window == 8192


def test_user_adapter_claims_a_provider_for_unknown_models(tmp_path):
    import json

    data = json.loads(load_adapters()["openai"].model_dump_json())
    data.update(name="deepseek-house", providers=["deepseek"], delimiter="xml")
    (tmp_path / "deepseek.yaml").write_text(json.dumps(data))
    adapters = load_adapters([tmp_path])
    assert load_catalog().resolve("deepseek/deepseek-chat", adapters, unlisted=True).adapter == "deepseek-house"
