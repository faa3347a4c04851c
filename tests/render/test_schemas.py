"""Per-provider output-schema sanitizing: rewrites, warnings, and render-time errors."""

from __future__ import annotations

import pytest

from rosetta.errors import RenderError
from rosetta.render.schemas import constraints_to_descriptions, gemini_subset, inline_refs, openai_strict

NESTED = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^CVE-"},
        "score": {"type": "number", "minimum": 0, "maximum": 10},
        "fixed": {"type": "string"},
        "affected": {"type": "array", "items": {"$ref": "#/$defs/pkg"}},
    },
    "required": ["id", "affected"],
    "$defs": {"pkg": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
}


def test_openai_strict_closes_objects_and_makes_optional_nullable():
    schema, warnings = openai_strict(NESTED, "openai/gpt-4o")
    assert schema["required"] == ["id", "score", "fixed", "affected"]
    assert schema["properties"]["fixed"]["type"] == ["string", "null"]
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["pkg"]["additionalProperties"] is False and warnings == []
    assert "additionalProperties" not in NESTED  # the agent's schema is untouched


@pytest.mark.parametrize("keyword, schema", [
    ("allOf", {"type": "object", "allOf": [{"properties": {"a": {"type": "string"}}}]}),
    ("not", {"type": "object", "properties": {"a": {"not": {"type": "string"}}}}),
    ("type", {"type": "array", "items": {"type": "string"}}),
])
def test_openai_strict_refuses_what_it_cannot_express(keyword, schema):
    with pytest.raises(RenderError) as caught:
        openai_strict(schema, "openai/gpt-4o")
    message = caught.value.problems[0].message
    assert repr(keyword) in message and "openai/gpt-4o" in message


def test_anthropic_inlines_refs_and_moves_constraints_into_descriptions():
    schema, _ = inline_refs(NESTED, "anthropic/claude-sonnet-5-5")
    assert "$defs" not in schema and schema["properties"]["affected"]["items"]["properties"]["name"]
    schema, _ = constraints_to_descriptions(schema, "anthropic/claude-sonnet-5-5")
    score = schema["properties"]["score"]
    assert "minimum" not in score and "minimum 0" in score["description"] and "maximum 10" in score["description"]


def test_recursive_refs_cannot_be_inlined():
    tree = {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            "$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}}
    with pytest.raises(RenderError) as caught:
        inline_refs(tree, "anthropic/x")
    assert "recursive" in caught.value.problems[0].message


def test_gemini_drops_with_warnings_and_rewrites_unions():
    schema, warnings = gemini_subset({**NESTED, "additionalProperties": False,
                                      "properties": {**NESTED["properties"],
                                                     "note": {"type": ["string", "null"], "const": "x"}}},
                                     "gemini/gemini-2.5-pro")
    assert schema["properties"]["note"] == {"type": "string", "nullable": True, "enum": ["x"]}
    assert "pattern" not in schema["properties"]["id"] and "^CVE-" in schema["properties"]["id"]["description"]
    assert any("'additionalProperties'" in w for w in warnings) and any("'pattern'" in w for w in warnings)
    assert schema["propertyOrdering"][0] == "id"


def test_gemini_refuses_allof():
    with pytest.raises(RenderError):
        gemini_subset({"type": "object", "allOf": [{}]}, "gemini/gemini-2.5-pro")
