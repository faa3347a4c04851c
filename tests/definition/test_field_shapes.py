"""Issue 58: known fields in the shapes older agents and public collections write them. Shapes with
an obvious meaning are read and enforced like the ADR's shapes (mapping-form input rules, output
rules as mappings, inputs as lists of names); referenced files are looked up from the definition,
the project root and the repository root. Enforcement is checked against a real HTTP server on
127.0.0.1: a rule that fails stops the call before a request leaves."""

from __future__ import annotations

import json

import pytest
from fault_server import FaultServer

from rosetta.definition import load_definition
from rosetta.errors import DefinitionError
from rosetta.runtime.agent import load
from rosetta.runtime.guardrails import GuardrailError
from rosetta.runtime.result import RetryPolicy

FAST = RetryPolicy(attempts=1, base=0.05, multiplier=2.0, cap=1.0, timeout=2.0)

MAPPING_RULES = """\
---
name: adr-writer
description: Writes an architecture decision record for a project.
inputs:
  project_id: {type: string, description: The project the decision belongs to.}
  decision: {type: string}
  severity: {type: string}
guardrails:
  input_validation:
    project_id:
      format: "^PROJ-\\\\d{3}$"
      on_invalid: {action: reject, message: "project_id must look like PROJ-123"}
    decision:
      max_length: 200
      message: Keep the decision under 200 characters.
    severity:
      enum: [low, high]
  output_filtering:
    - no_secrets_in_output
    - {pattern: "INTERNAL-\\\\d+", action: redact}
    - {rule: cite_sources, description: Cite the document behind every claim.}
---
## Role
You write architecture decision records.
"""


@pytest.fixture
def adr_writer(project):
    (project / "signatures").mkdir()
    (project / "signatures" / "adr-writer.md").write_text(MAPPING_RULES, encoding="utf-8")
    return project


def _run(agent, server, **inputs):
    return agent.run(inputs, model="openai/gpt-4o", policy=FAST, api_base=server.url, api_key="sk-test-not-a-key")


def test_mapping_form_input_rules_are_read_and_validate_reports_nothing_about_them(adr_writer, cli, monkeypatch):
    monkeypatch.chdir(adr_writer)
    definition = load_definition(adr_writer / "signatures" / "adr-writer.md")
    rules = definition.spec.guardrails.input_validation
    assert [(r.field, r.unenforced(definition.spec.input_names)) for r in rules] == [
        ("project_id", None), ("decision", None), ("severity", None)]
    assert definition.source.unread == ()
    result = cli("validate", "signatures/adr-writer.md", "-f", "json")
    findings = json.loads(result.output)["files"][0]["findings"]
    assert [f for f in findings if f["severity"] != "info"] == [], findings


@pytest.mark.parametrize(("inputs", "says"), [
    ({"project_id": "project 7", "decision": "Use Postgres.", "severity": "low"}, "project_id must look like PROJ-123"),
    ({"project_id": "PROJ-123", "decision": "x" * 201, "severity": "low"}, "Keep the decision under 200 characters"),
    ({"project_id": "PROJ-123", "decision": "Use Postgres.", "severity": "urgent"},
     "severity must be one of: low, high"),
])
def test_a_mapping_form_rule_stops_the_call_with_its_message_before_any_request(adr_writer, inputs, says):
    agent = load("adr-writer", project=adr_writer)
    with FaultServer([("ok", "An ADR.")]) as server:
        with pytest.raises(GuardrailError, match=says):
            _run(agent, server, **inputs)
        assert server.requests == []


def test_output_rules_written_as_mappings_are_enforced_and_rendered(adr_writer):
    agent = load("adr-writer", project=adr_writer)
    with FaultServer([("ok", "Decided in INTERNAL-4411 and INTERNAL-9.")]) as server:
        result = _run(agent, server, project_id="PROJ-123", decision="Use Postgres.", severity="low")
    assert result.raw == "Decided in [REDACTED] and [REDACTED]."
    assert result.post_checks == ["Cite the document behind every claim."]
    system = agent.prompt_for("openai/gpt-4o").system
    assert "Cite the document behind every claim." in system and "never write text matching" in system


def test_a_blocking_output_pattern_discards_the_answer_and_streams_nothing_unchecked(project):
    (project / "signatures").mkdir()
    (project / "signatures" / "a.md").write_text(
        "---\nname: a\nguardrails:\n  output_filtering:\n    - {pattern: '(?i)password', action: reject, "
        "message: No passwords.}\n---\nYou answer.\n", encoding="utf-8")
    agent = load("a", project=project)
    with FaultServer([("ok", "The password is hunter2.")]) as server:
        stream = agent.stream({"request": "?"}, model="openai/gpt-4o", policy=FAST, api_base=server.url,
                              api_key="sk-test-not-a-key")
        with pytest.raises(GuardrailError, match="No passwords"):
            list(stream)


def test_inputs_written_as_lists_of_names(write):
    agent = load_definition(write("a.md", "---\nname: a\ninputs:\n  required: [repo_url, branch]\n"
                                          "  optional: [since]\n---\nYou summarize {repo_url}.\n"))
    assert {n: i.required for n, i in agent.spec.inputs.items()} == {"repo_url": True, "branch": True, "since": False}
    listed = load_definition(write("b.md", "---\nname: b\ninputs:\n  - {name: diff, type: string, description: A diff}"
                                           "\n  - ticket\n---\nYou review.\n"))
    assert list(listed.spec.inputs) == ["diff", "ticket"] and listed.spec.inputs["diff"].description == "A diff"


def test_a_template_is_looked_up_from_the_definition_the_project_and_the_repository(tmp_path):
    repository = tmp_path / "repo"
    project = repository / "agents"
    (repository / ".git").mkdir(parents=True)
    (project / "team").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (repository / "templates").mkdir()
    (repository / "templates" / "adr.md").write_text("# ADR\n")
    (project / "runbook.md").write_text("# Runbook\n")
    head = "---\nname: {name}\noutput:\n  template: {template}\n---\nYou write.\n"
    for name, template, found in (("a", "templates/adr.md", repository / "templates" / "adr.md"),
                                  ("b", "runbook.md", project / "runbook.md")):
        path = project / "team" / f"{name}.md"
        path.write_text(head.format(name=name, template=template))
        definition = load_definition(path)
        assert definition.source.references == {"output.template": str(found.resolve())}
        assert str(found.resolve()) in definition.source.files  # editing it changes the agent's hash
    from rosetta.render import render
    from rosetta.signature import lower

    system = render(lower(load_definition(project / "team" / "a.md")), "openai/gpt-4o").system
    assert "Follow this template:\n# ADR" in system  # the template found is rendered into the Format section
    path = project / "team" / "c.md"
    path.write_text(head.format(name="c", template=".context/templates/missing.md"))
    definition = load_definition(path)
    (missing,) = definition.source.missing_references
    assert "Follow this template" not in render(lower(definition), "openai/gpt-4o").system  # rendered without it
    assert missing.tried == tuple(str((d / ".context/templates/missing.md").resolve())
                                  for d in (project / "team", project, repository))


def test_a_shape_rosetta_cannot_read_is_kept_reported_once_and_carried_into_the_artifact(write):
    from rosetta.lint import lint_definition
    from rosetta.signature import lower

    agent = load_definition(write("a.md", "---\nname: a\ncapabilities: [search, summarize]\n"
                                          "persona: Blunt and brief.\n---\nYou answer.\n"))
    assert [(u.path, u.found) for u in agent.source.unread] == [(("capabilities",), "a list"),
                                                              (("persona",), "'Blunt and brief.'")]
    findings = [f for f in lint_definition(agent) if f.id == "RS-009"]
    assert [(f.line, f.field) for f in findings] == [(3, "capabilities"), (4, "persona")]
    assert "a mapping of 'key: value' lines" in findings[0].message
    assert lower(agent).extensions == {"capabilities": ["search", "summarize"], "persona": "Blunt and brief."}


def test_a_reference_never_climbs_out_of_the_project_nor_reads_a_home_kept_in_git(tmp_path, monkeypatch):
    """The repository-root lookup is for collections: a name that climbs out of the project from the
    definition is refused as before, and a repository at or above the home directory (dotfiles in
    git) is not looked in at all."""
    home = tmp_path / "home"
    (home / ".git").mkdir(parents=True)
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    project = home / "work" / "agents"
    project.mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    monkeypatch.setenv("HOME", str(home))
    head = "---\nname: a\noutput:\n  template: {template}\n---\nYou write.\n"
    (project / "a.md").write_text(head.format(template=".ssh/id_rsa"))
    assert load_definition(project / "a.md").source.missing_references[0].tried == (
        str((project / ".ssh" / "id_rsa").resolve()),)  # the home is no collection root: not looked in
    (project / "a.md").write_text(head.format(template="../../.ssh/id_rsa"))
    with pytest.raises(DefinitionError, match="outside the project root"):
        load_definition(project / "a.md")


def test_only_a_text_document_is_rendered_as_an_output_template(write):
    """A template's text goes into every prompt: a definition naming ``.env`` gets nothing rendered
    (and a warning), so a shared definition cannot mail a project's secrets to a hosted model."""
    from rosetta.lint import lint_definition
    from rosetta.render import render
    from rosetta.signature import lower

    write(".env", "OPENAI_API_KEY=sk-live-not-a-real-key\n")
    agent = load_definition(write("a.md", "---\nname: a\noutput:\n  template: .env\n---\nYou write.\n"))
    (missing,) = agent.source.missing_references
    assert "not a text document" in missing.why and "output.template" not in agent.source.references
    assert "sk-live" not in render(lower(agent), "openai/gpt-4o").system
    (finding,) = [f for f in lint_definition(agent) if f.id == "RS-010"]
    assert "not a text document" in finding.message and finding.line == 4
