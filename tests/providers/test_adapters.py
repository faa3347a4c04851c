"""Adapter files: the bundled four validate and differ where the ADR says; users can override."""

from __future__ import annotations

import pytest

from rosetta.errors import ConfigError
from rosetta.providers.adapter import Delimiter, StructuredOutput, SystemPlacement, load_adapters


def test_bundled_adapters_encode_the_provider_differences():
    adapters = load_adapters()
    assert set(adapters) == {"anthropic", "openai", "google", "open-source"}
    assert adapters["anthropic"].delimiter is Delimiter.XML
    assert adapters["anthropic"].system_prompt is SystemPlacement.SEPARATE
    assert adapters["anthropic"].structured_output is StructuredOutput.FORCED_TOOL
    assert adapters["openai"].structured_output is StructuredOutput.JSON_SCHEMA_STRICT
    assert adapters["google"].structured_output is StructuredOutput.RESPONSE_SCHEMA
    assert adapters["open-source"].delimiter is Delimiter.LABEL
    assert adapters["open-source"].section_order[:3] == ["role", "constraints", "context"]
    assert adapters["open-source"].reasoning["open"] == "inject"
    assert all(len(a.sha256) == 64 for a in adapters.values())


def test_user_directory_overrides_and_adds(tmp_path):
    bundled = load_adapters()["openai"]
    text = bundled.model_dump_json()
    import json

    data = json.loads(text)
    data["delimiter"] = "xml"
    (tmp_path / "openai.yaml").write_text(json.dumps(data))
    data["name"] = "my-gateway"
    (tmp_path / "gateway.yaml").write_text(json.dumps(data))
    adapters = load_adapters([tmp_path])
    assert adapters["openai"].delimiter is Delimiter.XML and adapters["openai"].path.endswith("openai.yaml")
    assert "my-gateway" in adapters


def test_bad_adapter_file_names_file_line_and_field(tmp_path):
    (tmp_path / "broken.yaml").write_text(
        "name: broken\nsystem_prompt: sideways\ndelimiter: xml\nsection_order: [role]\n")
    with pytest.raises(ConfigError) as caught:
        load_adapters([tmp_path])
    problems = {p.field: p for p in caught.value.problems}
    assert problems["system_prompt"].location.line == 2
    assert "reasoning" in problems  # missing fields are listed too


def test_missing_adapter_directory(tmp_path):
    with pytest.raises(ConfigError):
        load_adapters([tmp_path / "nope"])
