"""JSON Schema → pydantic types: mapping, constraints, refs, aliases and the bundled agents."""

from __future__ import annotations

import pytest
from conftest import REPO
from pydantic import BaseModel, TypeAdapter, ValidationError

from rosetta.definition import load_many
from rosetta.errors import RosettaError
from rosetta.schema_types import SchemaTypeError, model_from_schema, type_from_schema

ADVISORY = {
    "type": "object",
    "properties": {
        "advisory_id": {"type": "string", "pattern": r"^(CVE-\d{4}-\d{4,}|GHSA(-[23456789cfghjmpqrvwx]{4}){3})$"},
        "title": {"type": "string", "minLength": 1, "maxLength": 200, "description": "Headline."},
        "affected": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "package": {"type": "string", "minLength": 1},
                    "ecosystem": {"type": "string", "enum": ["pypi", "npm", "go", "other"]},
                    "fixed_version": {"type": ["string", "null"]},
                },
                "required": ["package", "ecosystem", "fixed_version"],
                "additionalProperties": False,
            },
        },
        "cvss": {
            "type": "object",
            "properties": {"score": {"type": "number", "minimum": 0, "maximum": 10}, "vector": {"type": "string"}},
            "required": ["score", "vector"],
            "additionalProperties": False,
        },
        "cwe_ids": {"type": "array", "items": {"type": "string", "pattern": r"^CWE-\d+$"}},
    },
    "required": ["advisory_id", "title", "affected"],
    "additionalProperties": False,
}

GOOD_ADVISORY = {
    "advisory_id": "CVE-2024-12345",
    "title": "Path traversal in foo",
    "affected": [{"package": "foo", "ecosystem": "pypi", "fixed_version": None}],
    "cvss": {"score": 7.5, "vector": "CVSS:3.1/AV:N"},
    "cwe_ids": ["CWE-22"],
}


def _rejects(model: type[BaseModel], data: dict) -> None:
    with pytest.raises(ValidationError):
        model.model_validate(data)


def test_advisory_extractor_nested_schema():
    model = model_from_schema(ADVISORY)
    record = model.model_validate(GOOD_ADVISORY)
    assert record.affected[0].ecosystem == "pypi" and record.affected[0].fixed_version is None
    assert record.cvss.score == 7.5 and record.cwe_ids == ["CWE-22"]
    assert type(record.affected[0]).__name__ == "Output_Affected_Item"
    assert type(record.cvss).__name__ == "Output_Cvss"
    assert model.model_fields["title"].description == "Headline."
    assert record.model_dump(exclude_unset=True) == GOOD_ADVISORY
    _rejects(model, {**GOOD_ADVISORY, "affected": []})  # minItems
    _rejects(model, {**GOOD_ADVISORY, "cvss": {"score": 11, "vector": "x"}})  # maximum
    _rejects(model, {**GOOD_ADVISORY, "cwe_ids": ["22"]})  # item pattern
    _rejects(model, {**GOOD_ADVISORY, "advisory_id": "XSA-1"})  # pattern
    _rejects(model, {**GOOD_ADVISORY, "affected": [{"package": "foo", "ecosystem": "pypi"}]})  # nullable but required


def test_enum_becomes_literal():
    model = model_from_schema({"type": "object", "properties": {
        "level": {"enum": ["low", "high", 3, None]}, "kind": {"const": "fixed"}}, "required": ["level"]})
    assert model.model_validate({"level": "low"}).level == "low"
    assert model.model_validate({"level": 3, "kind": "fixed"}).level == 3
    assert model.model_validate({"level": None}).level is None
    _rejects(model, {"level": "medium"})
    _rejects(model, {"level": "low", "kind": "other"})


def test_optional_fields_default_to_none_or_their_default():
    model = model_from_schema({"type": "object", "properties": {
        "a": {"type": "string"}, "b": {"type": "integer", "default": 5}, "c": {"type": "boolean"}}, "required": ["c"]})
    item = model.model_validate({"c": True})
    assert item.a is None and item.b == 5 and item.c is True
    assert model.model_validate({"a": None, "c": False}).a is None
    _rejects(model, {"a": "x"})  # c is required


def test_additional_properties_false_rejects_extras_and_default_allows_them():
    closed = model_from_schema({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False})
    _rejects(closed, {"a": "x", "b": 1})
    opened = model_from_schema({"type": "object", "properties": {"a": {"type": "string"}}})
    assert opened.model_validate({"a": "x", "b": 1}).model_dump() == {"a": "x", "b": 1}


def test_object_without_properties_is_a_dict():
    schema = {"type": "object", "properties": {
        "labels": {"type": "object", "additionalProperties": {"type": "integer"}}, "meta": {"type": "object"}}}
    model = model_from_schema(schema)
    assert model.model_validate({"labels": {"x": 1}, "meta": {"k": [1]}}).labels == {"x": 1}
    _rejects(model, {"labels": {"x": "many"}})
    assert issubclass(model_from_schema({"type": "object"}), BaseModel)


def test_recursive_defs_tree():
    schema = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "required": ["root"],
        "$defs": {"Node": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            "required": ["name", "children"],
        }},
    }
    model = model_from_schema(schema, name="Tree")
    data = {"root": {"name": "a", "children": [{"name": "b", "children": [{"name": "c", "children": []}]}]}}
    tree = model.model_validate(data)
    assert tree.root.children[0].children[0].name == "c"
    assert type(tree.root).__name__ == "Tree_Node" and type(tree.root.children[0]) is type(tree.root)
    assert tree.model_dump() == data
    _rejects(model, {"root": {"name": "a", "children": [{"name": 1}]}})


def test_recursion_through_definitions_and_root_and_unions():
    mutual = {"$ref": "#/definitions/A", "definitions": {
        "A": {"type": "object", "properties": {"b": {"$ref": "#/definitions/B"}}},
        "B": {"type": "object", "properties": {"a": {"$ref": "#/definitions/A"}}}}}
    assert model_from_schema(mutual).model_validate({"b": {"a": {"b": None}}}).b.a.b is None
    tree = model_from_schema({"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}})
    assert tree.model_validate({"kids": [{"kids": []}]}).kids[0].kids == []
    nested = {"$defs": {"V": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#/$defs/V"}}]}},
              "$ref": "#/$defs/V"}
    adapter = TypeAdapter(type_from_schema(nested, name="Value"))
    assert adapter.validate_python(["a", ["b", []]]) == ["a", ["b", []]]
    with pytest.raises(ValidationError):
        adapter.validate_python(["a", [1]])


def test_any_of_and_type_lists_are_unions():
    schema = {"type": "object", "properties": {
        "value": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 3}]},
        "choice": {"oneOf": [{"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
                             {"type": "null"}]},
        "either": {"type": ["number", "boolean"]}}}
    model = model_from_schema(schema)
    assert model.model_validate({"value": 4}).value == 4
    assert model.model_validate({"value": "abc"}).value == "abc"
    assert model.model_validate({"choice": {"x": 1}}).choice.x == 1
    assert model.model_validate({"choice": None, "either": True}).either is True
    _rejects(model, {"value": "abcd"})
    _rejects(model, {"value": [1]})
    _rejects(model, {"choice": {"y": 1}})


def test_all_of_merges_objects_and_rejects_conflicts():
    schema = {"$defs": {"Base": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
              "allOf": [{"$ref": "#/$defs/Base"},
                        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}]}
    model = model_from_schema(schema)
    assert set(model.model_fields) == {"id", "name"}
    assert model.model_validate({"id": 1, "name": "x"}).id == 1
    _rejects(model, {"id": 1})
    single = type_from_schema({"allOf": [{"type": "string", "minLength": 2}]}, name="S")
    with pytest.raises(ValidationError):
        TypeAdapter(single).validate_python("a")
    with pytest.raises(SchemaTypeError) as info:
        model_from_schema({"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}},
                                     {"type": "object", "properties": {"a": {"type": "integer"}}}]})
    assert info.value.problems[0].field == "#/allOf/1/properties/a/type"


def test_awkward_property_names_round_trip_by_alias():
    names = ["schema", "json", "model_config", "class", "from", "dash-name", "with space", "_private", "9lives",
             "class_", "copy", "model_dump"]
    schema = {"type": "object", "properties": {n: {"type": "string"} for n in names}, "required": names,
              "additionalProperties": False}
    model = model_from_schema(schema)
    data = {n: n.upper() for n in names}
    item = model.model_validate(data)
    assert item.model_dump(by_alias=True) == data
    assert all(f.isidentifier() and not hasattr(BaseModel, f) for f in model.model_fields)
    assert item.from_ == "FROM" and item.dash_name == "DASH-NAME" and item.schema_ == "SCHEMA"
    assert item.class_ == "CLASS_" and item.class__ == "CLASS"  # a real "class_" property keeps its name
    assert model.model_validate(item.model_dump()).model_dump(by_alias=True) == data  # by field name too
    assert model.model_validate_json(item.model_dump_json(by_alias=True)) == item


def test_constraints_are_enforced():
    model = model_from_schema({"type": "object", "properties": {
        "text": {"type": "string", "maxLength": 5, "minLength": 1},
        "count": {"type": "integer", "minimum": 1, "exclusiveMaximum": 10},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "code": {"type": "string", "pattern": "^(?!x)[a-z]+$"}}})
    assert model.model_validate({"text": "abc", "count": 9, "ratio": 1, "tags": ["a"], "code": "ab"}).count == 9
    for bad in ({"text": "toolong"}, {"text": ""}, {"count": 0}, {"count": 10}, {"ratio": 0}, {"ratio": 1.5},
                {"tags": ["a", "b", "c"]}, {"code": "xa"}):
        _rejects(model, bad)


def test_non_object_roots_via_type_adapter():
    tags = TypeAdapter(type_from_schema({"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}, name="Tags"))
    assert tags.validate_python(["a", "b"]) == ["a", "b"]
    with pytest.raises(ValidationError):
        tags.validate_python(["c"])
    level = TypeAdapter(type_from_schema({"type": "string", "enum": ["low", "high"]}, name="Level"))
    assert level.validate_python("high") == "high"
    with pytest.raises(ValidationError):
        level.validate_python("mid")
    assert type_from_schema(True, name="Anything") is type_from_schema({}, name="Anything")
    items = TypeAdapter(type_from_schema({"type": "array", "items": {"$ref": "#/$defs/P"}}, name="L",
                                         defs={"P": {"type": "object", "properties": {"x": {"type": "integer"}}}}))
    assert items.validate_python([{"x": 1}])[0].x == 1
    with pytest.raises(SchemaTypeError):
        model_from_schema({"type": "array"})


def test_unexpressible_schemas_raise_schema_type_error():
    with pytest.raises(SchemaTypeError) as info:
        model_from_schema({"type": "object", "properties": {"p": {"$ref": "https://example.com/p.json"}}})
    assert isinstance(info.value, RosettaError)
    assert info.value.problems[0].field == "#/properties/p/$ref" and "only local" in str(info.value)
    with pytest.raises(SchemaTypeError) as info:
        model_from_schema({"type": "object", "properties": {"never": False}})
    assert info.value.problems[0].field == "#/properties/never"
    with pytest.raises(SchemaTypeError):
        type_from_schema(False, name="Nothing")
    with pytest.raises(SchemaTypeError):
        model_from_schema({"type": "object", "properties": {"p": {"$ref": "#/$defs/Missing"}}})


def test_unsupported_keywords_are_ignored_for_typing():
    model = model_from_schema({"type": "object", "properties": {"a": {"type": "string", "format": "uri"}},
                               "if": {"required": ["a"]}, "then": {"required": ["b"]}, "not": {"required": ["c"]},
                               "patternProperties": {"^x": {"type": "integer"}}, "dependentSchemas": {}})
    assert model.model_validate({"a": "x"}).a == "x"


def test_each_call_builds_fresh_classes():
    assert model_from_schema(ADVISORY) is not model_from_schema(ADVISORY)
    names = model_from_schema({"type": "object", "properties": {
        "a": {"type": "object", "properties": {"x": {"type": "integer"}}},
        "b": {"anyOf": [{"type": "object", "properties": {"y": {"type": "integer"}}},
                        {"type": "object", "properties": {"z": {"type": "integer"}}}]}}})
    fields = names.model_fields
    assert fields["a"].annotation.__args__[0].__name__ == "Output_A"
    assert [m.__name__ for m in fields["b"].annotation.__args__[:2]] == ["Output_B", "Output_B_2"]


def test_bundled_agent_output_schemas_build_models():
    results = load_many([REPO / "signatures"])
    built = {}
    for result in results:
        assert result.definition, result.error
        schema = result.definition.spec.output.schema_
        if schema is not None:
            built[result.definition.name] = model_from_schema(schema, name=result.definition.name)
    assert {"vuln-triage", "advisory-extractor", "rubric-reviewer"} <= set(built)
    triage = built["vuln-triage"]
    assert triage.model_validate({"severity": "high", "rationale": "x"}).severity == "high"
    _rejects(triage, {"severity": "severe", "rationale": "x"})
    _rejects(triage, {"severity": "high", "rationale": "x" * 401})
    _rejects(triage, {"severity": "high", "rationale": "x", "extra": 1})
    advisory = built["advisory-extractor"].model_validate({**GOOD_ADVISORY, "affected": [
        {"package": "foo", "ecosystem": "pypi", "vulnerable_range": "< 1.2", "fixed_version": "1.2"}]})
    assert advisory.affected[0].fixed_version == "1.2"
