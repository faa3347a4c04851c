"""Per-model request rules from the vendors' contracts (issue 37): a model never gets a parameter
it rejects, structured output uses the mechanism the model has, thinking has room in max_tokens,
and a retired model is refused by name with its replacement."""

from __future__ import annotations

import datetime

import pytest
from conftest import REPO

from rosetta.definition import load_definition
from rosetta.errors import RenderError, UsageError
from rosetta.providers.catalog import load_catalog
from rosetta.providers.kinds import StructuredOutput
from rosetta.render import render
from rosetta.render.prompt import RenderedPrompt
from rosetta.render.schemas import anthropic_output
from rosetta.runtime.invoke import plan
from rosetta.signature import lower


@pytest.fixture(scope="module")
def triage():
    return lower(load_definition(REPO / "signatures" / "vuln-triage.md"))


def test_claude_5_gets_no_sampling_parameter_and_native_structured_output(triage):
    assert triage.generation_params["default"].temperature == 0  # the definition asks for greedy decoding
    prompt = render(triage, "sonnet")
    kwargs = prompt.to_litellm({"report": "x" * 40})
    assert "temperature" not in kwargs and "top_p" not in kwargs and not prompt.sampling_params
    assert any("takes no temperature" in w for w in prompt.warnings)
    assert prompt.structured_output is StructuredOutput.OUTPUT_CONFIG and "tools" not in kwargs
    schema = kwargs["output_config"]["format"]["schema"]
    assert kwargs["output_config"]["format"]["type"] == "json_schema" and schema["additionalProperties"] is False
    assert "maxLength" not in schema["properties"]["rationale"]  # moved into its description
    assert RenderedPrompt.from_dict(prompt.to_dict()) == prompt  # recorded in the artifact


def test_a_model_that_takes_sampling_parameters_still_gets_them(triage):
    for name in ("openai/gpt-4.1", "gemini/2.5-pro", "gpt-mini"):
        prompt = render(triage, name)
        assert prompt.generation["temperature"] == 0 and prompt.sampling_params, name
        assert "sampling_params" not in prompt.to_dict()  # artifacts of such models keep their bytes


@pytest.mark.parametrize("name", ["gpt", "gpt-5.5", "o3", "gemini-flash", "opus", "haiku", "claude-sonnet-4-6"])
def test_models_that_reject_sampling_parameters_never_get_them(triage, name):
    prompt = render(triage, name)
    assert "temperature" not in prompt.to_litellm({"report": "x" * 40}), name


def test_thinking_by_default_gets_room_in_max_tokens(triage):
    asked = triage.generation_params["default"].max_output_tokens
    for name in ("sonnet", "gpt", "gemini/2.5-pro"):
        model = load_catalog().resolve(name)
        assert render(triage, name).generation["max_tokens"] == asked + model.thinking_reserve, name
    assert render(triage, "openai/gpt-4.1").generation["max_tokens"] == asked  # no thinking by default


def test_a_retired_model_is_refused_on_the_date_the_caller_passes_with_its_replacement(triage):
    """Rendering reads no clock: the day before its retirement the model renders, from that day on
    it is refused, and without a date (the caller checked already) the render is the same prompt."""
    before = render(triage, "anthropic/claude-sonnet-4", today=datetime.date(2026, 6, 14))
    with pytest.raises(UsageError) as caught:
        render(triage, "anthropic/claude-sonnet-4", today=datetime.date(2026, 6, 15))
    assert "retired on 2026-06-15" in str(caught.value) and "anthropic/claude-sonnet-5-5" in str(caught.value)
    assert render(triage, "anthropic/claude-sonnet-4") == before


def test_an_unlisted_claude_model_takes_its_rules_from_litellms_map(triage):
    new = render(triage, "anthropic/claude-opus-5", unlisted=True)  # native structured output, no sampling
    assert new.structured_output is StructuredOutput.OUTPUT_CONFIG and "temperature" not in new.generation
    older = load_catalog().resolve("anthropic/claude-opus-4-1-20250805", unlisted=True)  # not in the map: no claims
    assert older.structured_output is StructuredOutput.FORCED_TOOL and older.capabilities.sampling_params


def test_anthropic_output_closes_objects_and_spells_one_of_as_any_of():
    schema = {"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}, {"type": "object",
                                                                                     "properties": {}}]}}}
    out, _ = anthropic_output(schema, "anthropic/claude-sonnet-5-5")
    assert out["additionalProperties"] is False and out["properties"]["x"]["anyOf"][1]["additionalProperties"] is False
    assert "oneOf" in schema["properties"]["x"]  # the agent's own schema is untouched
    with pytest.raises(RenderError, match="'not'"):
        anthropic_output({"type": "object", "not": {"required": ["a"]}}, "anthropic/claude-sonnet-5-5")
    with pytest.raises(RenderError, match="closed objects"):
        anthropic_output({"type": "object", "additionalProperties": {"type": "string"}}, "anthropic/claude-sonnet-5-5")


def test_a_correction_retry_adds_no_temperature_for_a_model_that_rejects_it(triage):
    def sent(name: str) -> dict:
        steps = plan(render(triage, name), {"report": "x" * 40}, artifact="t", validation_retries=1,
                     params={"api_key": "test-key"})  # a key: the credentials check lets the call go
        next(steps)  # the first call
        invalid = type("R", (), {"choices": [type("C", (), {"message": type("M", (), {
            "content": "not json", "tool_calls": None})()})()], "usage": None})()
        return steps.send(invalid).kwargs  # the correction
    assert "temperature" not in sent("sonnet")
    assert sent("openai/gpt-4.1")["temperature"] == 0


def test_every_current_hosted_model_renders_every_bundled_agent():
    from rosetta.definition import load_many

    catalog = load_catalog()
    agents = [lower(r.definition) for r in load_many([REPO / "signatures"])]
    rendered: dict[str, int] = {}
    for model in catalog.models:
        if catalog.status(model).state != "current" or model.adapter not in ("anthropic", "openai", "google"):
            continue
        for agent in agents:
            prompt = render(agent, model)  # raises on anything the model cannot express
            assert prompt.model == model.id and prompt.adapter == model.adapter
            rendered[model.adapter] = rendered.get(model.adapter, 0) + 1
    # not vacuous: every vendor's adapter rendered every bundled agent for at least one current model
    assert len(agents) >= 10 and all(rendered.get(a, 0) >= len(agents) for a in ("anthropic", "openai", "google"))
