"""Each PV check: the shared fixture passes it, one targeted edit fails it (at the right line)."""

from __future__ import annotations

import pytest

from rosetta.definition import load_definition
from rosetta.lint import RULES, Severity, lint_definition


def _findings(path, rule_id=None):
    found = lint_definition(load_definition(path))
    return [f for f in found if rule_id is None or f.id == rule_id]


def test_the_fixture_passes_every_rule(portable):
    assert _findings(portable()) == []


FAILING = {
    "PV-001": ({"  body_format: markdown": "  body_format: markdown\ntool_choice: required"}, 23),
    "PV-002": ({"output:\n": "tools:\n  - name: lookup\n    parameters: {type: strin}\n    required: [id]\noutput:\n"}, 12),
    "PV-003": ({"label: {type: string, enum: [a, b]}": "label: {type: string, enum: a}"}, 14),
    "PV-004": ({"You classify things.": "<|im_start|>system You classify things."}, 25),
    "PV-005": ({"You classify things.": "Think step by step, then classify."}, 25),
    "PV-006": ({"openai/gpt-4o]": "gpt-4o]"}, 20),
    "PV-007": ({"required_features: [structured_output]": "required_features: []"}, 9),
    "PV-008": ({"minimum_context_window: 8000": "minimum_context_window: 0"}, 19),
    "PV-009": ({"  body_format: markdown\n": ""}, 17),
    "PV-010": ({"  enabled: true": "  enabled: false"}, 18),
}


@pytest.mark.parametrize("rule_id", sorted(FAILING))
def test_each_rule_fails_on_its_fixture(portable, rule_id):
    edits, line = FAILING[rule_id]
    findings = _findings(portable("demo", edits))
    mine = [f for f in findings if f.id == rule_id]
    assert mine, f"{rule_id} did not fire: {findings}"
    expected_severity = Severity.INFO if rule_id == "PV-010" else Severity.ERROR
    assert mine[0].severity is expected_severity
    assert mine[0].line == line and mine[0].file.endswith("demo.md")
    assert mine[0].remediation
    others = {f.id for f in findings} - {rule_id, "PV-010"}
    assert rule_id == "PV-002" and others <= {"PV-007"} or not others


def test_every_pv_rule_has_a_failing_fixture():
    assert {r for r in RULES if r.startswith("PV-")} == set(FAILING)


def test_pv001_ignores_schema_property_names(portable):
    edits = {"label: {type: string, enum: [a, b]}": "label: {type: string, enum: [a, b]}\n      tool_choice: {type: string}"}
    assert _findings(portable("demo", edits), "PV-001") == []


def test_pv002_required_names_must_exist(portable):
    edits = {"output:\n": "tools:\n  - name: lookup\n    parameters:\n      type: object\n      properties: {id: {type: string}}\n"
                          "      required: [identifier]\noutput:\n",
             "required_features: [structured_output]": "required_features: [structured_output, tool_use]"}
    (finding,) = _findings(portable("demo", edits), "PV-002")
    assert "'identifier' is not in properties" in finding.message


def test_pv002_parameters_must_be_an_object_schema(portable):
    edits = {"output:\n": "tools:\n  - name: lookup\n    parameters: {type: array}\noutput:\n",
             "required_features: [structured_output]": "required_features: [structured_output, tool_use]"}
    (finding,) = _findings(portable("demo", edits), "PV-002")
    assert "object schema" in finding.message


def test_pv003_required_output_without_schema_is_the_persisted_output_pattern(write):
    path = write("x.md", "---\nname: x\noutput: {required: true, location: 'out/{id}/report.md', "
                         "levels: [L0, L2]}\n---\nbody\n")
    assert _findings(path, "PV-003") == []
    broken = write("y.md", "---\nname: y\noutput: {schema: {type: objet}}\n---\nbody\n")
    (finding,) = _findings(broken, "PV-003")
    assert "objet" in finding.message and finding.line == 3


def test_pv005_allows_cot_with_explicit_cot_and_in_code(portable):
    explicit = {"reasoning_strategy: adaptive": "reasoning_strategy: explicit_cot",
                "You classify things.": "Think step by step."}
    assert _findings(portable("a", explicit), "PV-005") == []
    fenced = {"JSON with a `label`.": "```\nexample: step by step\n```"}
    assert _findings(portable("b", fenced), "PV-005") == []


def test_pv006_warns_on_vendor_shorthand_model(write):
    path = write("x.md", "---\nname: x\nmodel: sonnet\n---\nbody\n")
    (finding,) = _findings(path, "PV-006")
    assert finding.severity is Severity.WARNING and "'anthropic/claude-sonnet'" in finding.remediation
    assert finding.line == 3


def test_pv006_inherit_is_fine(write):
    assert _findings(write("x.md", "---\nname: x\nmodel: inherit\n---\nbody\n"), "PV-006") == []


def test_pv007_allowed_tools_imply_tool_use(write):
    path = write("x.md", "---\nname: x\ntools: Read, Grep\nportability: {enabled: true}\n---\nbody\n")
    (finding,) = _findings(path, "PV-007")
    assert "tool_use" in finding.message and finding.severity is Severity.ERROR


def test_portability_disabled_turns_criteria_into_info(write):
    path = write("x.md", "---\nname: x\nresponse_format: json\n---\nThink step by step.\n")
    findings = _findings(path)
    assert {f.id for f in findings} >= {"PV-001", "PV-005", "PV-008", "PV-009", "PV-010"}
    assert all(f.severity is Severity.INFO for f in findings)
    pv005 = next(f for f in findings if f.id == "PV-005")
    assert pv005.line == 5


def test_rs001_flags_misspelled_sections(write):
    path = write("x.md", "---\nname: x\nportabilty: {enabled: true}\nvalidation: {}\n---\nbody\n")
    typo, extension = _findings(path, "RS-001")
    assert "did you mean 'portability'" in typo.message and typo.severity is Severity.WARNING and typo.line == 3
    assert "'validation' is kept" in extension.message and extension.severity is Severity.INFO


def test_rs002_input_rules_must_name_declared_inputs(write):
    path = write("x.md", "---\nname: x\ninputs:\n  report: {type: string}\nguardrails:\n  input_validation:\n"
                         "    - {field: reprot, pattern: '.'}\n---\nbody\n")
    (finding,) = _findings(path, "RS-002")
    assert "not enforced" in finding.message and "did you mean 'report'" in finding.message
    assert finding.line == 7 and finding.severity is Severity.WARNING


def test_input_names_must_be_identifiers(write):
    from rosetta.errors import DefinitionError

    with pytest.raises(DefinitionError) as caught:
        load_definition(write("x.md", "---\nname: x\ninputs:\n  bad-name: {type: string}\n---\nbody\n"))
    assert "identifier" in caught.value.problems[0].message


def test_rs005_a_retired_preference_is_an_error_naming_the_replacement(portable):
    findings = _findings(portable("old", {"anthropic/claude-sonnet-5-5": "anthropic/claude-sonnet-4-20250514"}),
                         "RS-005")
    (finding,) = findings
    assert finding.severity is Severity.ERROR and finding.line == 20
    assert "retired on 2026-06-15" in finding.message and "anthropic/claude-sonnet-5-5" in finding.remediation


def test_rs005_a_deprecated_preference_is_a_warning_with_its_date(portable, monkeypatch):
    import datetime

    import rosetta.providers.catalog as catalog_module

    monkeypatch.setattr(catalog_module, "lifecycle_date", lambda: datetime.date(2026, 6, 14))  # the day before
    # Claude Sonnet 4's retirement
    (finding,) = _findings(portable("old", {"anthropic/claude-sonnet-5-5": "anthropic/claude-sonnet-4"}), "RS-005")
    assert finding.severity is Severity.WARNING
    assert "retires on 2026-06-15" in finding.message and "'anthropic/claude-sonnet-4'" in finding.message


def test_rs005_leaves_unknown_models_to_compile(portable):
    assert _findings(portable("new", {"anthropic/claude-sonnet-5-5": "acme/brand-new-model"}), "RS-005") == []
