"""JSON Schema → llama.cpp grammar: patterns, lengths, JSON-safe strings (no model needed except
where llama.cpp itself must accept the grammar)."""

from __future__ import annotations

import json
import re

import pytest
from conftest import REPO

from rosetta.definition.loader import load_directory
from rosetta.local.gbnf import UNBOUNDED_CAP, Unsupported, pattern_to_gbnf, schema_to_gbnf

ANY = r'[^"\\\x7F\x00-\x1F]'


@pytest.mark.parametrize("pattern, grammar", [
    (r"^CWE-\d+$", f'"CWE-" ([0-9]){{1,{UNBOUNDED_CAP}}}'),
    (r"^CVSS:[34]\.[01]/", f'"CVSS:" [34] "." [01] "/" {ANY}{{0,{UNBOUNDED_CAP - 9}}}'),  # free text after
    (r"\.$", f'{ANY}{{0,{UNBOUNDED_CAP - 1}}} "."'),  # free text before
    (r"a|^b$", f'({ANY}{{0,{UNBOUNDED_CAP - 1}}} "a" | "b")'),  # each branch anchored on its own
    (r'^"\\$', r'"\x5C\x22\x5C\x5C"'),  # a quote and a backslash, written as JSON escapes
    (r"^a.b$", f'"a" {ANY} "b"'),  # '.' never yields a quote, a backslash or a control character
    (r"^[^,]$", r'[^\x2C\x00-\x1F\x22\x5C\x7F]'),
    (r"^\s$", r"[\x20]"),  # tabs and newlines would need JSON escapes: left out
])
def test_patterns_become_json_safe_grammar(pattern, grammar):
    assert pattern_to_gbnf(pattern) == grammar


def test_max_length_bounds_the_repeats_and_the_free_text():
    assert pattern_to_gbnf(r"^CVE-\d{4}-\d{4,}$", max_length=16) == '"CVE-" ([0-9]){4,4} "-" ([0-9]){4,7}'
    assert pattern_to_gbnf(r"[.]", min_length=5, max_length=80) == f'{ANY}{{4,79}} "."'
    assert pattern_to_gbnf(r"^ab", max_length=2) == '"ab"'
    with pytest.raises(Unsupported, match="minLength/maxLength"):
        pattern_to_gbnf(r"abc", min_length=10, max_length=5)


@pytest.mark.parametrize("pattern", [r"^(?=a)b$", r"^(a)\1$", r"(?i)^abc$", r"^a\bb$", r"^[\x00-\x1f]$", "^(a"])
def test_what_the_grammar_cannot_express_is_unsupported(pattern):
    with pytest.raises(Unsupported):
        pattern_to_gbnf(pattern)


def test_an_unsupported_pattern_is_left_out_of_the_grammar_not_the_whole_schema():
    grammar = schema_to_gbnf({"type": "object", "properties": {
        "word": {"type": "string", "pattern": "^(?i)yes$", "maxLength": 3}}, "required": ["word"]})
    assert 'word ::= "\\"" char{0,3} "\\"" space' in grammar.splitlines()


def test_strings_exclude_raw_control_characters_and_long_lengths_use_repetition():
    grammar = schema_to_gbnf({"type": "object", "properties": {
        "text": {"type": "string", "minLength": 2, "maxLength": 400},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 50}},
        "required": ["text", "tags"]})
    rules = dict(line.split(" ::= ", 1) for line in grammar.splitlines())
    assert rules["char"].startswith(r'[^"\\\x7F\x00-\x1F]')
    assert rules["text"] == r'"\"" char{2,400} "\"" space'
    assert rules["tags"] == r'"[" space string ("," space string){0,49} "]" space'


def test_no_schema_means_any_json():
    from llama_cpp.llama_grammar import JSON_GBNF

    assert schema_to_gbnf(None) == JSON_GBNF


def _bundled_schemas() -> list[tuple[str, dict]]:
    agents = load_directory(REPO / "signatures")
    return [(a.spec.name, a.spec.output.schema_) for a in agents if a.spec.output and a.spec.output.schema_]


BUNDLED = _bundled_schemas()


@pytest.mark.parametrize("name, schema", BUNDLED, ids=[n for n, _ in BUNDLED])
def test_llama_cpp_accepts_the_grammar_of_every_bundled_output_schema(name, schema, local_model):
    import llama_cpp

    from rosetta.local.models import load_model
    from rosetta.local.weights import resolve

    vocab = load_model(resolve(local_model)).vocab
    grammar = schema_to_gbnf(json.loads(json.dumps(schema)))
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    assert sampler, f"llama.cpp rejected the grammar for {name}:\n{grammar}"
    llama_cpp.llama_sampler_free(sampler)
    assert re.search(r"^root ::= ", grammar, re.M)
