"""The agents in signatures/ load, pass validate, and cover the kinds later issues build on."""

from __future__ import annotations

from dataclasses import replace

from conftest import REPO
from rosetta.definition import AgentFormat, BodyFormat, load_many
from rosetta.definition.models import ReasoningStrategy
from rosetta.lint import Severity, build_report


def _agents():
    results = load_many([REPO / "signatures"])
    assert all(r.definition for r in results), [str(r.error) for r in results if r.error]
    return {r.definition.name: r.definition for r in results}


def test_bundled_agents_pass_validate():
    report = build_report(load_many([REPO / "signatures"]))
    assert report.exit_code() == 0
    assert report.count(Severity.ERROR) == 0 and len(report.files) >= 8


def test_the_benchs_agents_pass_validate_strictly_and_their_data_loads():
    # bench/agents/: the optimizer bench's agents on public sets (datasets/build_public_sets.py)
    from rosetta.optimize.context import load_context
    from rosetta.settings import load_settings

    report = build_report(load_many([REPO / "bench" / "agents"]))
    assert report.exit_code(strict=True) == 0 and len(report.files) == 4
    for path in sorted((REPO / "bench" / "agents").glob("*.md")):
        data = load_context(path, "local/gemma-3-270m", settings=load_settings(REPO)).data
        assert (len(data.train), len(data.dev), len(data.test)) == (200, 50, 300), path.name


def test_bundled_agents_cover_the_required_kinds():
    agents = _agents()
    enum = lambda a: any("enum" in p for p in (a.spec.output.schema_ or {}).get("properties", {}).values())  # noqa: E731
    nested = lambda a: any(p.get("type") == "array" and p.get("items", {}).get("type") == "object"  # noqa: E731
                           for p in (a.spec.output.schema_ or {}).get("properties", {}).values())
    assert any(enum(a) for a in agents.values()), "an enum classifier"
    assert any(nested(a) for a in agents.values()), "a nested-JSON extractor"
    assert any(len(a.spec.tools) >= 2 for a in agents.values()), "a tool-using agent with two tools"
    assert any(a.spec.output.levels for a in agents.values()), "an agent with L0/L1/L2 output levels"
    assert any(a.source.format is AgentFormat.LEGACY_XML and not a.portable and a.body_format is BodyFormat.XML
               for a in agents.values()), "a legacy XML agent"
    assert any(a.source.format is AgentFormat.CLAUDE_CODE and len(a.source.files) == 2
               for a in agents.values()), "a Claude Code subagent with a governance sidecar"
    assert any(a.spec.portability.reasoning_strategy is ReasoningStrategy.EXPLICIT_COT
               for a in agents.values()), "an explicit_cot agent for open models"
    reviewer = agents["rubric-reviewer"].spec.output.schema_
    assert "indeterminate" in str(reviewer), "a rubric reviewer with pass/fail/indeterminate"


def test_committed_artifacts_are_up_to_date():
    """compiled/ in this repository is what `./dev main` produces from signatures/ (the CI gate users run)."""
    from rosetta.compile.compiler import CompileOptions, Status, compile_paths
    from rosetta.settings import load_settings
    from rosetta.providers.adapter import load_adapters

    settings = load_settings(REPO)
    options = CompileOptions(out=settings.compiled_dir, root=settings.root, adapters=load_adapters(),
                             default_models=tuple(settings.default_models), check=True,
                             datasets_dir=settings.datasets_dir, cache_dir=settings.cache_dir)
    report = compile_paths([REPO / "signatures"], options, jobs=1)
    local = replace(options, models=("local/gemma-3-270m",))  # ./dev main's offline calls, and the optimized ones
    offline = [REPO / "signatures" / f"{agent.name}.md" for agent in sorted((REPO / "compiled").iterdir())
               if (agent / "local" / "gemma-3-270m.yaml").is_file()]
    assert len(offline) >= 6
    results = report.results + compile_paths(offline, local, jobs=1).results
    stale = [f"{r.agent} → {r.model}: {r.status.value}" for r in results if r.status is not Status.UP_TO_DATE]
    assert not stale, "run ./dev main and commit compiled/: " + "; ".join(stale)
