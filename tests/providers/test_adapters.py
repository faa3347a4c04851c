"""Adapter files: the bundled four validate and differ where the ADR says; users can override."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rosetta.errors import ConfigError
from rosetta.providers.adapter import BUNDLED, Delimiter, load_adapters


@pytest.mark.parametrize("name", BUNDLED)
def test_each_bundled_adapter_is_its_file(name):
    """The loaded adapter holds exactly what its YAML file says (defaults only where it is silent)."""
    adapter = load_adapters()[name]
    written = yaml.safe_load(Path(adapter.path).read_text(encoding="utf-8"))
    loaded = adapter.model_dump(mode="json", exclude_unset=True)  # the defaults it was silent about left out
    assert {key: loaded[key] for key in written} == written
    assert len(adapter.sha256) == 64


def test_the_four_adapters_differ_where_providers_differ():
    adapters = load_adapters().values()
    for aspect in ("delimiter", "structured_output", "section_order"):
        values = {json.dumps(getattr(a, aspect), default=str) for a in adapters}
        assert len(values) > 1, f"every bundled adapter has the same {aspect}"


def test_user_directory_overrides_and_adds(tmp_path):
    bundled = load_adapters()["openai"]
    data = json.loads(bundled.model_dump_json())
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


def test_an_older_adapter_file_with_retired_fields_still_loads_with_a_warning(tmp_path, caplog):
    """`roles` and `strict_alternation` were never read (litellm maps roles): gone from the model,
    but a user's adapter file written when they existed keeps loading."""
    data = json.loads(load_adapters()["openai"].model_dump_json())
    data.update(name="old-gateway", roles={"user": "user", "assistant": "assistant"}, strict_alternation=True)
    (tmp_path / "old.yaml").write_text(json.dumps(data))
    with caplog.at_level("WARNING"):
        adapter = load_adapters([tmp_path])["old-gateway"]
    assert not hasattr(adapter, "roles") and adapter.delimiter is Delimiter.MARKDOWN
    assert "adapter 'old-gateway': `roles` and `strict_alternation` are no longer used; delete them" in caplog.text
