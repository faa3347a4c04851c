"""Tolerant reading, strict reporting: definitions that extend the ADR's schema load, keep what
rosetta does not know, and get located findings instead of load failures."""

from __future__ import annotations

import pytest

from rosetta.store.artifact import parse_artifact
from rosetta.definition import load_definition
from rosetta.definition.models import FallbackBehavior, ReasoningStrategy
from rosetta.errors import DefinitionError
from rosetta.lint import Severity, lint_definition
from rosetta.render import render
from rosetta.signature import lower

RED_TEAM = """\
---
name: red-exfil
description: Plans data exfiltration tests inside an authorized engagement.
identity:
  role: "Data Exfiltration Specialist"
  cognitive_mode: "mixed"
  belbin_role: "Specialist"
  nasa_processes: [NPR-7123]
inputs:
  engagement_id: {type: string}
  objective: {type: string}
guardrails:
  input_validation:
    - engagement_id_format: "^RED-\\\\d{4}$"
    - roe_exfiltration_authorized: true
    - objective: "signed off by the client"
    - {field: objective, reject: "(?i)production database", message: Production data is out of scope.}
  fallback_behavior: warn_and_request_context
output:
  required: true
  location: "output/{engagement-id}/report.md"
  levels: [L0, L1, L2]
portability:
  reasoning_strategy: react
  section_roles: {"Playbook": procedure}
---
## Role
Create step-by-step runbooks for each scenario.

## Playbook
Stage, compress, exfiltrate over an allowed channel.
"""


@pytest.fixture
def red_team(write):
    return write("red-exfil.md", RED_TEAM)


def by_id(findings):
    found: dict[str, list] = {}
    for finding in findings:
        found.setdefault(finding.id, []).append(finding)
    return found


def test_the_wild_shapes_load_and_keep_every_unknown_field(red_team):
    spec = load_definition(red_team).spec
    assert spec.identity.cognitive_mode == "mixed" and spec.identity.model_extra["belbin_role"] == "Specialist"
    assert spec.unknown_fields() == {("identity", "belbin_role"): "Specialist",
                                     ("identity", "nasa_processes"): ["NPR-7123"]}
    assert spec.guardrails.fallback_behavior is FallbackBehavior.WARN_AND_RETRY  # the default stands in
    assert spec.portability.reasoning_strategy is ReasoningStrategy.ADAPTIVE
    rules = spec.guardrails.input_validation
    assert (rules[0].rule, rules[0].pattern, rules[0].target(spec.input_names)) == (
        "engagement_id_format", "^RED-\\d{4}$", "engagement_id")
    assert rules[1].precondition is True and rules[2].precondition == "signed off by the client"
    assert [r.unenforced(spec.input_names) is None for r in rules] == [True, False, False, True]


def test_findings_say_what_is_kept_enforced_and_substituted_at_the_right_line(red_team):
    findings = by_id(lint_definition(load_definition(red_team)))
    assert [(f.line, f.severity) for f in findings["RS-001"]] == [(7, Severity.INFO), (8, Severity.INFO)]
    assert [(f.line, f.column) for f in findings["RS-002"]] == [(15, 7), (16, 7)]
    assert all("not enforced" in f.message and f.severity is Severity.WARNING for f in findings["RS-002"])
    off_list = {f.line: f for f in findings["RS-003"]}
    assert off_list[6].severity is Severity.INFO and "keeps it as written" in off_list[6].message
    assert "uses 'warn_and_retry'" in off_list[18].message and off_list[18].severity is Severity.WARNING
    assert "uses 'adaptive'" in off_list[24].message
    assert "not a known section_roles value: rosetta ignores it" in off_list[25].message
    assert off_list[25].field == "portability.section_roles.Playbook" and off_list[25].column == 19
    assert "PV-003" not in findings and "PV-005" not in findings  # persisted output; domain prose


def test_persisted_output_renders_levels_and_location(red_team):
    prompt = render(lower(load_definition(red_team)), "openai/gpt-4o")
    assert "levels, each under its own heading: L0, L1, L2." in prompt.system
    assert "`output/{engagement-id}/report.md`" in prompt.system and "Your approach is mixed." in prompt.system


def test_unknown_fields_round_trip_through_compile(red_team, project):
    from rosetta.compile.compiler import CompileOptions, compile_paths
    from rosetta.providers.adapter import load_adapters

    options = CompileOptions(out=project / "compiled", root=project, adapters=load_adapters(),
                             models=("openai/gpt-4o",))
    (result,) = compile_paths([red_team], options, jobs=1).results
    artifact = parse_artifact(open(result.artifact).read(), path=result.artifact)
    assert artifact.extensions == {"identity.belbin_role": "Specialist", "identity.nasa_processes": ["NPR-7123"]}


@pytest.mark.parametrize(("frontmatter", "meant"), [
    ("examples:\n  - {input: a, output: b}\n", "portability.few_shot.examples_ref"),
    ("few_shot: {enabled: true}\n", "portability.few_shot"),
    ("portability:\n  examples_ref: demos.jsonl\n", "portability.few_shot.examples_ref"),
    ("model_preferences: [openai/gpt-4o]\n", "portability.model_preferences"),
    ("identity:\n  roel: Analyst\n", "identity.role"),
])
def test_near_misses_and_misplaced_fields_name_the_right_place(write, frontmatter, meant):
    path = write("x.md", f"---\nname: x\n{frontmatter}---\nbody\n")
    (finding,) = by_id(lint_definition(load_definition(path)))["RS-001"]
    assert meant in finding.message and finding.severity is Severity.WARNING and finding.line in (3, 4)


def test_few_shot_without_anything_to_read_is_a_warning(write):
    path = write("x.md", "---\nname: x\nportability:\n  few_shot:\n    enabled: true\n---\nbody\n")
    (finding,) = by_id(lint_definition(load_definition(path)))["RS-004"]
    assert finding.severity is Severity.WARNING and finding.line == 5
    write("datasets/x/train.jsonl", "")
    assert "RS-004" not in by_id(lint_definition(load_definition(path)))  # the optimizer has rows to pick from


def test_labeled_data_is_looked_for_where_the_project_keeps_it(write, project):
    """Issue 55: lint read datasets/ whatever the project's datasets_dir said."""
    (project / "pyproject.toml").write_text("[tool.rosetta]\ndatasets_dir = 'labeled'\n")
    path = write("x.md", "---\nname: x\nportability:\n  few_shot:\n    enabled: true\n---\nbody\n")
    write("datasets/x/train.jsonl", "")
    assert "RS-004" in by_id(lint_definition(load_definition(path)))
    write("labeled/x/train.jsonl", "")
    assert "RS-004" not in by_id(lint_definition(load_definition(path)))


def test_claude_code_subagents_keep_claude_code_values(write):
    path = write("reviewer.md", "---\nname: reviewer\ndescription: Reviews diffs.\n"
                                "tools: Read, Grep, mcp__github__get_pr\nmodel: opus\npermissionMode: plan\n"
                                "hooks: {Stop: []}\n---\nYou review diffs.\n")
    definition = load_definition(path)
    findings = lint_definition(definition)
    assert [f.severity for f in findings if f.id in ("PV-006", "RS-001")] == [Severity.INFO]  # PV-006, as info
    (pv006,) = [f for f in findings if f.id == "PV-006"]
    assert "reviewer.governance.yaml" in pv006.remediation and "model_preferences" in pv006.remediation
    prompt = render(lower(definition), "openai/gpt-4o")
    assert any("Read, Grep, mcp__github__get_pr" in w and "host" in w for w in prompt.warnings)


def test_compile_says_which_host_tools_a_target_will_not_have(write, project, cli, monkeypatch):
    monkeypatch.chdir(project)
    write("signatures/reviewer.md", "---\nname: reviewer\ndescription: Reviews diffs.\ntools: Read, Bash\n"
                                    "---\nYou review diffs.\n")
    result = cli("compile", "signatures/reviewer.md", "--model", "openai/gpt-4o")
    assert result.exit_code == 0 and "warning:" in result.output and "host tools Read, Bash" in result.output


@pytest.mark.parametrize(("text", "line", "column"), [
    ("---\nname: a\ntools:\n  - Read\n  model: sonnet\n---\nbody\n", 5, 3),
    ("---\nname: a\ndescription: Use when: the user asks\n---\nbody\n", 3, 22),
    ("---\nname: a\nguardrails:\n  input_validation:\n    - {field: x, pattern: '(unclosed'}\n---\nbody\n", 5, 7),
    ("---\nname: a\n---\n\n", 3, 1),
])
def test_what_cannot_be_lowered_is_still_refused_with_a_location(write, text, line, column):
    path = write("a.md", text)
    with pytest.raises(DefinitionError) as caught:
        load_definition(path)
    location = caught.value.problems[0].location
    assert (location.file, location.line, location.column) == (str(path), line, column)
