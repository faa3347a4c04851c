"""The merged draft 2020-12 metaschema judges exactly like jsonschema's own."""

from __future__ import annotations

import pytest
from jsonschema import Draft7Validator, Draft202012Validator

from rosetta.lint.metaschema import metaschema_errors

SCHEMAS = [
    {},
    True,
    {"type": "object", "properties": {"a": {"type": "string", "enum": ["x", "y"]}}, "required": ["a"]},
    {"type": "strin"},
    {"type": ["string", "null"], "maxLength": 5},
    {"type": "string", "maxLength": -1},
    {"properties": {"a": {"type": 3}}},
    {"properties": []},
    {"required": "a"},
    {"items": {"type": "object", "properties": {"n": {"minimum": "zero"}}}},
    {"prefixItems": [{"type": "string"}, {"type": "bogus"}]},
    {"$defs": {"x": {"type": "integer"}}, "$ref": "#/$defs/x"},
    {"$defs": {"x": {"type": "nope"}}},
    {"anyOf": [{"type": "string"}, {"minItems": "2"}]},
    {"dependentRequired": {"a": ["b"]}, "dependencies": {"c": {"type": "wrong"}}},
    {"additionalProperties": {"enum": "not-a-list"}},
    {"unevaluatedProperties": False, "patternProperties": {"^x": {"type": "integer"}}},
    {"if": {"type": "string"}, "then": {"minLength": 1.5}, "else": {"not": {"const": 1}}},
    {"contentMediaType": 7},
    {"format": 3},
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=[str(i) for i in range(len(SCHEMAS))])
def test_merged_metaschema_agrees_with_jsonschema(schema):
    official = sorted((tuple(e.absolute_path), e.message) for e in
                      Draft202012Validator(Draft202012Validator.META_SCHEMA).iter_errors(schema))
    assert sorted(metaschema_errors(schema)) == official


def test_other_drafts_use_their_own_metaschema():
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}]}
    assert list(metaschema_errors(schema)) == []  # array-form items is valid in draft 7
    Draft7Validator.check_schema(schema)
    assert list(metaschema_errors({**schema, "items": [{"type": "wrong"}]}))


def test_non_schema_values_are_reported():
    assert "mapping or a boolean" in next(metaschema_errors([1, 2]))[1]
