"""render(): adapter rules, every knob honoured, budgets, bad input, and litellm accepting the result."""

from __future__ import annotations

import json

import pytest

from conftest import REPO
from rosetta.definition import load_definition
from rosetta.errors import RenderError, UsageError
from rosetta.render import Knobs, render
from rosetta.definition.document import Section
from rosetta.signature import Demo, lower

ADAPTER_MODELS = {"anthropic": "sonnet", "openai": "openai/gpt-4o", "google": "gemini/2.5-pro",
                  "open-source": "ollama/llama3.1"}


def bundled(name: str):
    path = next(p for p in (REPO / "signatures").iterdir() if p.name.startswith(name + "."))
    return lower(load_definition(path))


@pytest.fixture(scope="module")
def triage():
    return bundled("vuln-triage")


def test_delimiters_and_section_order_follow_the_adapter(triage):
    claude = render(triage, "sonnet").system
    gpt = render(triage, "openai/gpt-4o").system
    llama = render(triage, "ollama/llama3.1").system
    assert claude.startswith("<role>") and "<constraints>" in claude and "## " not in claude.split("<context>")[0]
    assert gpt.startswith("## Role") and "\n## Constraints" in gpt
    assert llama.startswith("ROLE:") and llama.index("CONSTRAINTS:") < llama.index("CONTEXT:")
    assert gpt.index("## Context") < gpt.index("## Constraints")


def test_reasoning_is_injected_for_open_models_only_under_adaptive(triage):
    instruction = "step by step"
    prose = triage.model_copy(update={"output_schema": None})  # a free-text answer
    assert instruction not in render(prose, "sonnet").system
    assert instruction in render(prose, "ollama/llama3.1").system
    assert instruction in render(prose, "gpt-mini").system  # mid class, no reasoning of its own
    assert instruction not in render(prose, "ollama/llama3.1", Knobs(reasoning=False)).system
    assert instruction in render(prose, "sonnet", Knobs(reasoning=True)).system


def test_adaptive_reasoning_never_contradicts_a_json_only_answer(triage):
    """Issue 59: an agent whose answer is the JSON object alone ("No prose outside the object") is
    not told to think step by step on its own; only an explicit choice asks for it."""
    system = render(triage, "ollama/llama3.1").system
    assert "No prose outside the object" in system and "step by step" not in system
    assert render(triage, "ollama/llama3.1").knobs.reasoning is False
    assert "step by step" in render(triage, "ollama/llama3.1", Knobs(reasoning=True)).system


def test_models_that_reason_on_their_own_get_no_reasoning_instruction(triage):
    from dataclasses import replace

    from rosetta.providers.catalog import load_catalog

    prose = triage.model_copy(update={"output_schema": None})
    llama = load_catalog().resolve("ollama_chat/llama3.1")
    thinker = replace(llama, capabilities=replace(llama.capabilities, builtin_reasoning=True))
    assert render(prose, llama).knobs.reasoning is True  # the open-source adapter injects for open models
    assert render(prose, thinker).knobs.reasoning is False


def test_explicit_cot_and_none_strategies():
    assert "step by step" in render(bundled("log-summarizer-open"), "openai/gpt-4o").system
    assert "step by step" not in render(bundled("advisory-extractor"), "ollama/llama3.1").system.split("FORMAT:")[1]


def test_structured_output_mechanism_per_adapter(triage):
    claude = render(triage, "sonnet").to_litellm({"report": "r"})
    assert claude["output_config"]["format"]["schema"]["properties"]["severity"]["enum"] and "tools" not in claude
    forced = render(triage, "sonnet", Knobs(structured_output="forced_tool")).to_litellm({"report": "r"})
    assert forced["tool_choice"] == {"type": "function", "function": {"name": "respond"}}
    assert forced["tools"][0]["function"]["parameters"]["properties"]["severity"]["enum"]
    gpt = render(triage, "openai/gpt-4o").to_litellm({"report": "r"})
    assert gpt["response_format"]["json_schema"]["strict"] is True
    gemini = render(triage, "gemini/2.5-pro")
    assert gemini.to_litellm({"report": "r"})["response_format"]["type"] == "json_schema"
    assert any("maxLength" in w for w in gemini.warnings)
    llama = render(triage, "ollama/llama3.1")
    assert llama.to_litellm({"report": "r"})["response_format"] == {"type": "json_object"}
    assert '"severity"' in llama.system and "JSON Schema" in llama.system


def test_tools_use_the_provider_envelope():
    agent = bundled("incident-responder")
    assert render(agent, "sonnet").tools[0]["input_schema"]["required"] == ["query", "time_range"]
    assert "function_declarations" in render(agent, "gemini/2.5-pro").tools[0]
    assert render(agent, "openai/gpt-4o").tools[0]["type"] == "function"


def test_every_knob_is_honoured(triage):
    demos = (Demo(id="d1", inputs={"report": "one"}, output={"severity": "low", "rationale": "a"}),
             Demo(id="d2", inputs={"report": "two"}, output={"severity": "high", "rationale": "b"}))
    signature = triage.model_copy(update={"demos": demos})
    prompt = render(signature, "openai/gpt-4o", Knobs(
        delimiter="xml", section_order=["format", "constraints", "context", "role"], reasoning=True,
        demo_ids=["d2", "d1"], demo_count=1, instructions="Classify the report.", structured_output="prompt_schema"))
    assert prompt.system.startswith("<format>") and prompt.system.index("<constraints>") < prompt.system.index("<role>")
    assert "step by step" in prompt.system and "Classify the report." in prompt.system
    assert "Reports vary widely" in prompt.system  # an instruction rewords the framing; the context stays
    # it takes the identity sentence's place; the body's Role section stays (issue 81: a variant drops nothing)
    assert "<role>\nClassify the report.\n\nYou triage incoming vulnerability reports" in prompt.system
    assert "You are a Vulnerability Triage Analyst" not in prompt.system
    assert prompt.demo_ids == ("d2",) and '"high"' in prompt.demos[1].content
    assert prompt.structured_output == "prompt_schema"
    assert prompt.request_params == {"response_format": {"type": "json_object"}}  # JSON mode, schema in prompt
    assert prompt.knobs.demo_count == 1 and prompt.knobs.delimiter == "xml"


def test_demo_count_follows_the_adapter_within_the_agents_range(triage):
    demos = tuple(Demo(id=f"d{i}", inputs={"report": f"r{i}"}, output={"severity": "low", "rationale": "x"})
                  for i in range(6))
    signature = triage.model_copy(update={"demos": demos})
    assert len(render(signature, "sonnet").demo_ids) == 1  # anthropic frontier: 1
    assert len(render(signature, "ollama/llama3.1").demo_ids) == 3  # open: 3, within 1..4
    assert len(render(signature, "sonnet", Knobs(demo_count=9)).demo_ids) == 4  # clamped to max


def test_generation_params_are_clamped_to_the_model(write):
    signature = lower(load_definition(write("g.md", """\
        ---
        name: g
        generation_params:
          default: {temperature: 0.3, max_output_tokens: 50000, stop: ["END"]}
          review: {temperature: 0.0, max_output_tokens: 100}
        ---
        body
        """)))
    prompt = render(signature, "openai/gpt-4o")
    assert prompt.generation == {"max_tokens": 16384, "temperature": 0.3, "stop": ["END"]}
    assert any("clamped" in w for w in prompt.warnings)
    assert render(signature, "openai/gpt-4o", Knobs(phase="review")).generation["max_tokens"] == 100
    assert "temperature" not in render(signature, "o3").generation


def test_models_without_a_system_role_get_it_in_the_first_user_turn(triage):
    prompt = render(triage, "ollama/mistral")
    messages = prompt.messages({"report": "r"})
    assert messages[0]["role"] == "user" and messages[0]["content"].startswith("ROLE:")


def test_budget_drops_demos_then_context_and_records_it(triage):
    demos = tuple(Demo(id=f"d{i}", inputs={"report": "x" * 8000}, output={"severity": "low", "rationale": "x"})
                  for i in range(3))
    background = Section(key="background", title="Background", role="context", content="background " * 3000, line=0)
    signature = triage.model_copy(update={"demos": demos, "minimum_context_window": None,
                                          "instructions": (*triage.instructions, background)})
    prompt = render(signature, "ollama/gemma2")  # 8K window
    assert prompt.demo_ids == () and any(d.startswith("demo") for d in prompt.dropped)
    assert any(d.startswith("section") for d in prompt.dropped)
    assert prompt.tokens["total"] <= 8192


def test_oversize_prompt_is_an_error(triage):
    huge = triage.model_copy(update={"forbidden_actions": ("never " * 20000,), "minimum_context_window": None})
    with pytest.raises(RenderError) as caught:
        render(huge, "ollama/gemma2")
    assert "prompt tokens" in caught.value.problems[0].message


def test_minimum_context_window_larger_than_the_model(triage):
    with pytest.raises(RenderError) as caught:
        render(triage.model_copy(update={"minimum_context_window": 16000}), "ollama/gemma2")
    assert "16,000-token context window" in caught.value.problems[0].message
    render(triage, "ollama/gemma2")  # it needs 8,192, which the model has


def test_tool_agent_on_a_model_without_tools():
    with pytest.raises(RenderError) as caught:
        render(bundled("incident-responder").model_copy(update={"minimum_context_window": None}), "ollama/gemma2")
    assert "cannot call tools" in caught.value.problems[0].message


def test_unknown_model_is_an_error(triage):
    with pytest.raises(UsageError) as caught:
        render(triage, "gpt-99")
    assert "nearest catalog names" in caught.value.problems[0].hint


def test_missing_and_unknown_inputs(triage):
    prompt = render(triage, "sonnet")
    with pytest.raises(UsageError) as caught:
        prompt.to_litellm({})
    assert "report" in caught.value.problems[0].message
    with pytest.raises(UsageError):
        prompt.to_litellm({"report": "r", "extra": 1})


def test_input_values_are_inserted_verbatim(triage):
    text = "payload {report} and {other} with </report> inside"
    content = render(triage, "sonnet").to_litellm({"report": text})["messages"][-1]["content"]
    assert text in content


def test_manual_mode_is_one_readable_block(triage):
    text = render(triage, "openai/gpt-4o").render_for_display({"report": "SQLi in login"})
    for heading in ("=== SYSTEM CONTEXT ===", "=== REQUEST ===", "=== OUTPUT INSTRUCTIONS ==="):
        assert heading in text
    assert "SQLi in login" in text


@pytest.mark.parametrize("adapter", sorted(ADAPTER_MODELS))
@pytest.mark.parametrize("agent", ["vuln-triage", "advisory-extractor", "incident-responder", "security-advisor"])
def test_litellm_accepts_the_kwargs(adapter, agent, monkeypatch):
    """The kwargs pass litellm's own parameter mapping for the provider, and a mocked completion."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm
    from litellm.utils import get_optional_params

    signature = bundled(agent)
    kwargs = render(signature, ADAPTER_MODELS[adapter]).to_litellm({f.name: "sample" for f in signature.inputs})
    model, provider, _, _ = litellm.get_llm_provider(kwargs["model"])
    params = {k: v for k, v in kwargs.items() if k not in ("model", "messages")}
    mapped = get_optional_params(model=model, custom_llm_provider=provider, **params)  # raises if unsupported
    if signature.output_schema and adapter == "google":
        assert "response_json_schema" in mapped or "response_schema" in mapped
    if signature.tools:
        assert "tools" in mapped
    answer = json.dumps({"severity": "low", "rationale": "mock"})
    response = litellm.completion(**kwargs, mock_response=answer)
    assert response.choices[0].message.content == answer


def test_base_models_get_one_completion_prompt_that_ends_where_the_answer_begins(triage):
    demos = (Demo(id="d1", inputs={"report": "Stored XSS in the profile page."},
                  output={"severity": "medium", "rationale": "Needs a victim to view the page."}),)
    prompt = render(triage.model_copy(update={"demos": demos}), "local/gemma-3-270m")
    assert prompt.system_placement == "completion" and prompt.knobs.reasoning is False
    messages = prompt.messages({"report": "Heap overflow in the parser."})
    assert len(messages) == 1 and messages[0]["role"] == "user"
    text = messages[0]["content"]
    assert text.startswith(prompt.system) and text.endswith("Heap overflow in the parser.\nAnswer:")
    assert 'Stored XSS in the profile page.\nAnswer: {"severity": "medium"' in text
    assert not any(token in text for token in ("<start_of_turn>", "<end_of_turn>", "<|im_start|>", "[INST]", "<bos>"))
    assert "step by step" not in text
    schema = prompt.request_params["response_format"]["json_schema"]["schema"]  # llama.cpp grammar
    assert schema["properties"]["severity"]["enum"][0] == "critical"
    assert prompt.render_for_display({"report": "Heap overflow in the parser."}) == text + "\n"


def test_every_structured_output_mechanism_has_its_rules_in_one_table(triage):
    from rosetta.providers.kinds import StructuredOutput
    from rosetta.render.mechanisms import MECHANISMS

    assert set(MECHANISMS) == set(StructuredOutput)
    for mechanism, rules in MECHANISMS.items():
        prompt = render(triage, "sonnet", Knobs(structured_output=mechanism))
        assert rules.instruction(prompt.provider_schema) in prompt.system
        assert bool(prompt.request_params.get("tools")) is rules.answer_in_tool
