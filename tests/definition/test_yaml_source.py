"""Safe YAML: positions, and every hostile or broken input becomes a DefinitionError."""

from __future__ import annotations

import pytest

from rosetta.definition.yaml_source import MAX_DEPTH, parse_yaml
from rosetta.errors import DefinitionError


def test_values_and_positions_are_recorded():
    value, source_map = parse_yaml("name: x\ntools:\n  - name: t\n    parameters: {type: object}\n",
                                   file="a.md", first_line=2)
    assert value == {"name": "x", "tools": [{"name": "t", "parameters": {"type": "object"}}]}
    assert source_map.positions[("name",)] == (2, 1)
    assert source_map.positions[("tools", 0, "parameters")] == (5, 5)
    assert source_map.locate(("tools", 0, "parameters", "type")).line == 5


def test_merge_keys_and_aliases_work():
    value, _ = parse_yaml("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  y: 3\n", file="a")
    assert value["m"] == {"x": 1, "y": 3}


def test_keys_keep_their_source_text():
    value, _ = parse_yaml("on: 1\n200: ok\nnull: z\n", file="a")
    assert set(value) == {"on", "200", "null"}


def _error(text: str) -> DefinitionError:
    with pytest.raises(DefinitionError) as caught:
        parse_yaml(text, file="agent.md", first_line=2)
    return caught.value


def test_duplicate_key_names_both_lines():
    problem = _error("name: a\ndescription: d\nname: b\n").problems[0]
    assert problem.location.line == 4 and "first defined on line 2" in problem.message
    assert problem.field == "name"


def test_tab_indentation_gets_a_hint():
    problem = _error("identity:\n\trole: x\n").problems[0]
    assert problem.location.line == 3 and "tabs" in problem.hint


def test_billion_laughs_is_refused_quickly():
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, cur in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    assert "alias bomb" in _error("\n".join(lines)).problems[0].hint


def test_recursive_alias_is_refused():
    assert "refers to itself" in _error("a: &a [1, *a]\n").problems[0].message


def test_deep_nesting_is_refused_without_crashing():
    problem = _error("[" * 100_000 + "]" * 100_000).problems[0]
    assert f"{MAX_DEPTH} levels" in problem.message


def test_python_object_tags_are_refused():
    problem = _error("x: !!python/object/apply:os.system [echo hi]\n").problems[0]
    assert "not allowed" in problem.message


def test_custom_tags_are_refused():
    assert "not allowed" in _error("x: !include other.yaml\n").problems[0].message


def test_huge_yaml_is_refused():
    assert "limit" in _error("x: " + "a" * 1_100_000).problems[0].message


def test_unquoted_colon_gets_a_hint():
    problem = _error("description: note: this breaks\n").problems[0]
    assert problem.location.line == 2 and "quoted" in problem.hint


def test_two_documents_are_refused():
    assert "more than one" in _error("a: 1\n---\nb: 2\n").problems[0].message


def test_complex_keys_are_refused():
    assert "plain value" in _error("? [a, b]\n: 1\n").problems[0].message


def test_invalid_typed_scalars_are_reported():
    assert "invalid timestamp" in _error("released: 2024-13-45\n").problems[0].message
    assert "invalid int" in _error("n: !!int abc\n").problems[0].message
