"""Encodings, line endings and frontmatter fences."""

from __future__ import annotations

import codecs

import pytest

from rosetta.definition import load_definition
from rosetta.errors import DefinitionError

MINIMAL = "---\nname: demo\n---\n## Role\nYou help.\n"


def _load_error(path) -> DefinitionError:
    with pytest.raises(DefinitionError) as caught:
        load_definition(path)
    return caught.value


def test_utf8_bom_is_accepted(write):
    agent = load_definition(write("demo.md", codecs.BOM_UTF8 + MINIMAL.encode()))
    assert agent.name == "demo"


def test_utf16_with_bom_is_accepted(write):
    agent = load_definition(write("demo.md", MINIMAL.encode("utf-16")))
    assert agent.name == "demo"


def test_crlf_line_endings_are_normalized(write):
    agent = load_definition(write("demo.md", MINIMAL.replace("\n", "\r\n").encode()))
    assert agent.body == "## Role\nYou help.\n" and agent.sections[0].line == 4


def test_non_utf8_names_line_and_byte(write):
    problem = _load_error(write("demo.md", b"---\nname: demo\ndescription: caf\xe9\n---\nbody\n")).problems[0]
    assert problem.location.line == 3 and "UTF-8" in problem.message and "0xe9" in problem.message
    assert "UTF-8" in problem.hint


def test_nul_bytes_are_refused(write):
    assert "NUL" in _load_error(write("demo.md", b"---\nname: demo\n---\n\x00\n")).problems[0].message


def test_missing_frontmatter(write):
    problem = _load_error(write("demo.md", "# Just markdown\n")).problems[0]
    assert problem.location.line == 1 and "---" in problem.hint


def test_missing_closing_fence(write):
    problem = _load_error(write("demo.md", "---\nname: demo\n## Role\n")).problems[0]
    assert "never closed" in problem.message and problem.location.line == 1


def test_empty_frontmatter(write):
    problem = _load_error(write("demo.md", "---\n---\nbody\n")).problems[0]
    assert "empty" in problem.message and "name" in problem.hint


@pytest.mark.parametrize("frontmatter, kind", [("- a\n- b", "a list"), ("just text", "a single str value"),
                                               ("42", "a single int value")])
def test_frontmatter_must_be_a_mapping(write, frontmatter, kind):
    problem = _load_error(write("demo.md", f"---\n{frontmatter}\n---\nbody\n")).problems[0]
    assert kind in problem.message and problem.location.line == 2


def test_huge_file_is_refused_before_reading(write):
    path = write("demo.md", "---\nname: demo\n---\n" + "x" * 2_100_000)
    assert "limit" in _load_error(path).problems[0].message


def test_missing_file_and_directory(project):
    assert "not found" in _load_error(project / "nope.md").problems[0].message
    assert "directory" in _load_error(project).problems[0].message
