"""The four on-disk formats, sidecar merging, and directory discovery."""

from __future__ import annotations

import pytest

from rosetta.definition import AgentFormat, BodyFormat, RCCFRole, discover_definitions, load_definition
from rosetta.definition.models import FallbackBehavior, ReasoningStrategy
from rosetta.errors import DefinitionError


def test_portable_single_file(portable):
    agent = load_definition(portable("triage"))
    assert agent.source.format is AgentFormat.PORTABLE
    assert agent.portable and agent.body_format is BodyFormat.MARKDOWN
    assert agent.spec.output.schema_["required"] == ["label"]
    assert [s.role for s in agent.sections] == [RCCFRole.ROLE, RCCFRole.CONSTRAINTS, RCCFRole.FORMAT]


def test_legacy_defaults_without_portability(write):
    agent = load_definition(write("old.md", """\
        ---
        name: old
        model: anthropic/claude-sonnet-4
        ---
        You are an old agent.
        """))
    assert agent.source.format is AgentFormat.PORTABLE  # markdown body: not the legacy XML format
    assert agent.spec.portability.enabled is False
    assert agent.spec.portability.reasoning_strategy is ReasoningStrategy.ADAPTIVE
    assert agent.spec.guardrails.fallback_behavior is FallbackBehavior.WARN_AND_RETRY
    assert agent.spec.portability.body_format is None and agent.body_format is BodyFormat.MARKDOWN


def test_unknown_top_level_sections_are_preserved(write):
    agent = load_definition(write("x.md", """\
        ---
        name: x
        validation: {coverage: 0.9}
        constitution: [P-003, P-020]
        ---
        body
        """))
    assert agent.spec.extensions == {"validation": {"coverage": 0.9}, "constitution": ["P-003", "P-020"]}
    assert agent.spec.model_dump()["validation"] == {"coverage": 0.9}


def test_legacy_xml_body(write):
    agent = load_definition(write("legacy.md", """\
        ---
        name: legacy
        ---
        <agent>
        <identity>
        You are a threat modeler.
        </identity>
        <guardrails>
        - Never run exploits.
        </guardrails>
        <output>
        A STRIDE table.
        </output>
        </agent>
        """))
    assert agent.source.format is AgentFormat.LEGACY_XML
    assert agent.body_format is BodyFormat.XML and not agent.portable
    assert [(s.title, s.role) for s in agent.sections] == [
        ("identity", RCCFRole.ROLE), ("guardrails", RCCFRole.CONSTRAINTS), ("output", RCCFRole.FORMAT)]
    assert agent.sections[1].content == "- Never run exploits." and agent.sections[1].line == 8


def test_claude_code_subagent_with_sidecar(write):
    write("reviewer.governance.yaml", """\
        identity:
          role: Code Reviewer
        capabilities:
          allowed_tools: [Grep, WebFetch]
          required_features: [tool_use]
        guardrails:
          fallback_behavior: warn_and_halt
        portability:
          enabled: true
        """)
    agent = load_definition(write("reviewer.md", """\
        ---
        name: reviewer
        description: Use after code changes.
        tools: Read, Grep, Bash
        model: sonnet
        mcpServers: {github: {command: gh-mcp}}
        ---
        You are a senior code reviewer.
        """))
    assert agent.source.format is AgentFormat.CLAUDE_CODE
    assert agent.spec.capabilities.allowed_tools == ["Read", "Grep", "Bash", "WebFetch"]
    assert agent.spec.identity.role == "Code Reviewer" and agent.portable
    assert agent.spec.guardrails.fallback_behavior is FallbackBehavior.WARN_AND_HALT
    assert agent.spec.model == "sonnet" and "mcpServers" in agent.spec.extensions
    assert [f.rsplit("/", 1)[-1] for f in agent.source.files] == ["reviewer.md", "reviewer.governance.yaml"]
    file, line, _ = agent.locate("identity", "role")
    assert file.endswith("reviewer.governance.yaml") and line == 2


def test_claude_code_without_sidecar(write):
    agent = load_definition(write("helper.md", "---\nname: helper\ntools: Read\nmodel: inherit\n---\nHelp.\n"))
    assert agent.source.format is AgentFormat.CLAUDE_CODE
    assert agent.spec.capabilities.allowed_tools == ["Read"]


def test_sidecar_conflict_names_both_files(write):
    write("r.governance.yaml", "description: Something else\n")
    with pytest.raises(DefinitionError) as caught:
        load_definition(write("r.md", "---\nname: r\ndescription: One thing\ntools: Read\n---\nbody\n"))
    problem = caught.value.problems[0]
    assert problem.location.file.endswith("r.governance.yaml") and problem.location.line == 1
    assert "r.md line 3" in problem.message


def test_canonical_pair(write):
    write("notes.prompt.md", "## Role\nYou write release notes.\n\n## Format\nMarkdown.\n")
    metadata = write("notes.agent.yaml", "name: notes\nportability:\n  enabled: true\n  body_format: markdown\n")
    for path in (metadata, metadata.with_name("notes.prompt.md")):
        agent = load_definition(path)
        assert agent.source.format is AgentFormat.PAIR and agent.name == "notes"
        assert agent.source.body_path.endswith("notes.prompt.md")
        assert [s.title for s in agent.sections] == ["Role", "Format"] and agent.sections[1].line == 4


def test_pair_without_prompt_file(write):
    with pytest.raises(DefinitionError) as caught:
        load_definition(write("solo.agent.yaml", "name: solo\n"))
    assert "solo.prompt.md" in caught.value.problems[0].hint


def test_loading_a_sidecar_directly_points_to_its_agent(write):
    with pytest.raises(DefinitionError) as caught:
        load_definition(write("r.governance.yaml", "identity: {role: x}\n"))
    assert "r.md" in caught.value.problems[0].hint


def test_directory_discovery_finds_every_agent_once(write, project):
    write("agents/a.md", "---\nname: a\n---\nbody\n")
    write("agents/README.md", "# Agents\nNot an agent.\n")
    write("agents/b.agent.yaml", "name: b\n")
    write("agents/b.prompt.md", "body\n")
    write("agents/c.md", "---\nname: c\ntools: Read\n---\nbody\n")
    write("agents/c.governance.yaml", "identity: {role: x}\n")
    write("agents/nested/d.md", "---\nname: d\n---\nbody\n")
    write("agents/.hidden/e.md", "---\nname: e\n---\nbody\n")
    found = [p.relative_to(project / "agents").as_posix() for p in discover_definitions(project / "agents")]
    assert found == ["a.md", "b.agent.yaml", "c.md", "nested/d.md"]


@pytest.mark.parametrize("name", ["demo/../../x", "a/b", "../escape", "x" * 300])
def test_unsafe_names_never_become_sidecar_paths(write, name):
    with pytest.raises(DefinitionError):  # the name itself is invalid; no sidecar lookup crashes first
        load_definition(write("demo.md", f"---\nname: '{name}'\n---\nbody\n"))
