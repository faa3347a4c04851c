"""Body → RCCF sections: every format, the role table, overrides, and no lost text."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from rosetta.definition.models import BodyFormat, RCCFRole
from rosetta.definition.sections import detect_body_format, role_for, split_sections

R = RCCFRole


def test_markdown_splits_at_the_repeated_heading_level():
    body = "# Triage agent\nYou triage.\n\n## Context\nCVE data.\n### Detail\nmore\n## Hard constraints\n- no\n"
    sections = split_sections(body, BodyFormat.MARKDOWN, first_line=10)
    assert [(s.title, s.role, s.line, s.level) for s in sections] == [
        ("Triage agent", R.ROLE, 10, 1), ("Context", R.CONTEXT, 13, 2), ("Hard constraints", R.CONSTRAINTS, 17, 2)]
    assert sections[1].content == "CVE data.\n### Detail\nmore"


def test_headings_inside_code_fences_do_not_split():
    body = "## Format\n```markdown\n## Not a heading\n```\n"
    (section,) = split_sections(body, BodyFormat.MARKDOWN)
    assert "## Not a heading" in section.content


def test_text_before_the_first_heading_is_the_role():
    sections = split_sections("You are a reviewer.\n\n## Rules\n- be kind\n", BodyFormat.MARKDOWN)
    assert [(s.key, s.role) for s in sections] == [("preamble", R.ROLE), ("rules", R.CONSTRAINTS)]


def test_rccf_labels():
    body = "ROLE:\nYou summarize logs.\nCONSTRAINTS: Never invent counts.\nCONTEXT:\nSyslog.\nFORMAT:\nJSON.\n"
    assert detect_body_format(body) is BodyFormat.RCCF
    sections = split_sections(body, BodyFormat.RCCF)
    assert [(s.title, s.role, s.content) for s in sections] == [
        ("ROLE", R.ROLE, "You summarize logs."), ("CONSTRAINTS", R.CONSTRAINTS, "Never invent counts."),
        ("CONTEXT", R.CONTEXT, "Syslog."), ("FORMAT", R.FORMAT, "JSON.")]


def test_xml_without_wrapper_and_with_attributes():
    body = '<role>\nAnalyst\n</role>\n<constraints priority="high">\n- no\n</constraints>\n'
    assert detect_body_format(body) is BodyFormat.XML
    assert [s.role for s in split_sections(body, BodyFormat.XML)] == [R.ROLE, R.CONSTRAINTS]


def test_detection_defaults_to_markdown():
    assert detect_body_format("You are helpful. Use <b>bold</b> rarely.") is BodyFormat.MARKDOWN
    assert detect_body_format("<agent>\nunclosed\n") is BodyFormat.MARKDOWN
    assert detect_body_format("NOTE: one label is not RCCF\n") is BodyFormat.MARKDOWN


def test_role_table_and_overrides():
    assert role_for("Output Format") is R.FORMAT
    assert role_for("Severity rubric") is R.CONTEXT
    assert role_for("House rules") is R.CONSTRAINTS
    assert role_for("Tone of voice") is R.OTHER
    assert role_for("Tone of voice", {"tone of voice": R.ROLE}) is R.ROLE


def test_definition_overrides_reach_the_sections(portable):
    from rosetta.definition import load_definition

    agent = load_definition(portable("demo", {"  body_format: markdown\n":
                                              "  body_format: markdown\n  section_roles: {Constraints: context}\n"}))
    assert [s.role for s in agent.sections] == [R.ROLE, R.CONTEXT, R.FORMAT]


_WORDS = re.compile(r"[A-Za-z0-9]+")
_line = st.one_of(
    st.sampled_from(["## Role", "## Constraints", "# Title", "### Deep", "```", "ROLE:", "FORMAT: json",
                     "<identity>", "</identity>", "<agent>", "</agent>", "", "- item", "text with <b>tags</b>"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30).map(
        lambda s: s.replace("\n", " ")),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_line, max_size=25))
def test_no_word_of_the_body_is_lost(lines):
    body = "\n".join(lines)
    fmt = detect_body_format(body)
    sections = split_sections(body, fmt)
    kept = " ".join(f"{s.title} {s.content}" for s in sections)
    tags = {"agent", "system", "prompt", "instructions"} if fmt is BodyFormat.XML else set()
    assert set(_WORDS.findall(body)) - tags <= set(_WORDS.findall(kept)) | tags
