"""RS-006: regular expressions that backtrack catastrophically, found in the parsed expression, and
reported with their file, line and field in every report format."""

from __future__ import annotations

import json
import re
import time

import pytest

from rosetta.definition import load_definition
from rosetta.definition.patterns import PatternError
from rosetta.lint import RULES, Severity, lint_definition
from rosetta.lint.redos import MAX_POSITIONS, TooComplex, find_hazard

CATASTROPHIC = [
    r"^(a+)+$", r"(a*)*", r"(a|a)*", r"(.*a)*", r"(\w+\s?)+$", r"(x|y|xy)*z", r"(a?a?)*b", r"(\d+)*\d",
    r"^([a-z0-9.]{1,64}\.)+$", r"(a(|)b)*", r"(?=(a+)+)b", r"^(\w+\.?)+@", r"(a+){20}", r"(.*,)*x",
    r"^(a|aa)+$", r"(?i)(x|X|xy)+$", r"(?s)(.|\n)*$", r"((ab)*)*c",
]
"""Each can match one piece of text two ways inside a repeat."""
SAFE = [
    r"^RED-\d{4}$", r"(?i)production database", r"^T-\d+$", r"(ab+c)*", r"(\d+,)*", r"([a-z]+\.)*", r"(\d{3})+",
    r"^(\d{1,3}\.){3}\d{1,3}$", r"a*a*", r".*foo.*", r"(?>a+)+", r"(a*+)*", r"^[A-Z]{2,}-\d+$", r"(\w|\d)+",
    r"^[a-z0-9]+(-[a-z0-9]+)*$", r"\s*#.*$", r"^\S+@\S+\.\S+$", r"(a|b)*c", r"(?i)(A|a)+$",
    r"^https?://[^\s/$.?#].[^\s]*$",
    r"^(CVE-\d{4}-\d{4,}|GHSA(-[23456789cfghjmpqrvwx]{4}){3})$", r"^CWE-\d+$", r"(?<=\$)\d+(\.\d\d)?",
]
"""Each character is read one way only (the alternations `\\w|\\d` and `A|a` are one class to sre)."""


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_expressions_are_found(pattern):
    assert find_hazard(pattern) is not None


@pytest.mark.parametrize("pattern", SAFE)
def test_linear_expressions_are_left_alone(pattern):
    assert find_hazard(pattern) is None


def test_what_is_found_does_backtrack_in_re():
    # the analysis is about Python's matcher: one finding, timed (2**k steps for k characters)
    times = []
    for length in (14, 20):  # 64 times the steps: a ratio above 4 survives a loaded machine
        start = time.perf_counter()
        re.search(r"^(\w+\s?)+$", "a" * length + "!")
        times.append(time.perf_counter() - start)
    assert times[1] > 4 * times[0]


def test_unusable_and_oversized_expressions_are_said_not_raised():
    with pytest.raises(PatternError, match="nests groups 5000 deep"):
        find_hazard("(" * 5000 + ")" * 5000)
    with pytest.raises(PatternError, match="not a valid regular expression"):
        find_hazard("(?")
    with pytest.raises(TooComplex):
        find_hazard("[ab]" * (MAX_POSITIONS + 1))
    start = time.perf_counter()
    assert find_hazard(r"[a-z]\d?" * 180) is None
    assert find_hazard(r"(a|b|c|d|e|f|g|h)*" * 40) is None
    assert time.perf_counter() - start < 2.0


AGENT = """\
---
name: patterned
inputs:
  code: {type: string}
guardrails:
  input_validation:
    - code_format: "^(a+)+$"
    - {field: code, reject: '\\p{L}+'}
    - {field: code, pattern: "^[A-Z]{3}-\\\\d+$"}
output:
  schema:
    type: object
    properties:
      tag: {type: string, pattern: "(\\\\w+\\\\s?)+$"}
      bad: {type: string, pattern: "(?"}
      deep: {type: string, pattern: "{DEEP}"}
    patternProperties:
      "(x|y|xy)*z": {type: string}
tools:
  - name: lookup
    parameters:
      type: object
      properties:
        q: {type: string, pattern: "(.*a)*!"}
---
## Role
You check codes.
""".replace("{DEEP}", "(" * 66 + "x" + ")" * 66)


def _findings(path):
    return [f for f in lint_definition(load_definition(path)) if f.id == "RS-006"]


def test_every_expression_of_a_definition_is_checked_where_it_is_written(write):
    path = write("patterned.md", AGENT, dedent=False)
    found = {(f.line, f.field): f for f in _findings(path)}
    assert set(found) == {
        (7, "guardrails.input_validation[0].code_format"), (8, "guardrails.input_validation[1].reject"),
        (14, "output.schema.properties.tag.pattern"), (15, "output.schema.properties.bad.pattern"),
        (16, "output.schema.properties.deep.pattern"), (18, "output.schema.patternProperties.(x|y|xy)*z"),
        (24, "tools[0].parameters.properties.q.pattern"),
    }
    assert all(f.file == str(path) for f in found.values())
    catastrophic = [key for key, f in found.items() if "backtracks catastrophically" in f.message]
    assert sorted(catastrophic) == [(7, "guardrails.input_validation[0].code_format"),
                                    (14, "output.schema.properties.tag.pattern"),
                                    (18, "output.schema.patternProperties.(x|y|xy)*z"),
                                    (24, "tools[0].parameters.properties.q.pattern")]
    assert all(found[key].severity is Severity.ERROR for key in catastrophic)
    assert "a run of 'a'" in found[7, "guardrails.input_validation[0].code_format"].message
    not_checked = found[8, "guardrails.input_validation[1].reject"]  # `regex` syntax: enforced, not analysed
    assert not_checked.severity is Severity.INFO and "was not checked" in not_checked.message
    assert "cannot be used" in found[15, "output.schema.properties.bad.pattern"].message
    assert "nests groups 66 deep" in found[16, "output.schema.properties.deep.pattern"].message


def test_rs_006_is_in_every_report_format(write, project, cli):
    path = write("patterned.md", AGENT, dedent=False)
    assert RULES["RS-006"].title == "Regular expressions cannot backtrack catastrophically"
    text = cli("-C", project, "validate", path)
    assert text.exit_code == 1 and "RS-006" in text.output and "backtracks catastrophically" in text.output
    report = json.loads(cli("-C", project, "validate", path, "--format", "json").output)
    rs006 = [f for f in report["files"][0]["findings"] if f["id"] == "RS-006"]
    assert {(f["line"], f["field"]) for f in rs006} >= {(7, "guardrails.input_validation[0].code_format")}
    assert all(f["file"] == str(path) for f in rs006)
    sarif = json.loads(cli("-C", project, "validate", path, "--format", "sarif").output)
    run = sarif["runs"][0]
    assert "RS-006" in [r["id"] for r in run["tool"]["driver"]["rules"]]
    lines = {r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in run["results"]
             if r["ruleId"] == "RS-006"}
    assert lines == {7, 8, 14, 15, 16, 18, 24}


def test_the_bundled_agents_have_no_hazardous_expression():
    from conftest import REPO
    from rosetta.definition import discover_definitions

    for path in discover_definitions(REPO / "signatures"):
        assert not [f for f in _findings(path) if f.severity is not Severity.INFO], path.name
