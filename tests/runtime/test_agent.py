"""Runtime selection: exact artifact → family → provider → uncompiled, integrity, strict mode."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys

import pytest

from rosetta.store.artifact import ArtifactError
from rosetta.compile.compiler import CompileOptions, compile_paths
from rosetta.errors import ConfigError, DefinitionError, UsageError
from rosetta.providers.adapter import load_adapters
from rosetta.runtime.agent import load


def compile_for(tree, *models):
    options = CompileOptions(out=tree / "compiled", root=tree, adapters=load_adapters(), models=models)
    assert compile_paths([tree / "signatures"], options, jobs=1).exit_code() == 0


@pytest.fixture
def compiled(tree):
    compile_for(tree, "sonnet", "openai/gpt-4o")
    return tree


def test_exact_artifact_is_used(compiled):
    agent = load("vuln-triage", project=compiled)
    selection = agent.explain("anthropic/claude-sonnet-5-5")
    assert selection.kind == "artifact" and selection.artifact.endswith("claude-sonnet-5-5.yaml")
    assert agent.prompt_for("sonnet").system.startswith("<role>")


def optimized(tree, model_id, **knobs):
    """Write ``model_id``'s artifact as a search would: the definition rendered with ``knobs``, which
    its provenance records."""
    from dataclasses import replace

    from rosetta.definition.loader import load_definition
    from rosetta.providers.catalog import load_catalog
    from rosetta.render.prompt import Knobs
    from rosetta.render.renderer import render
    from rosetta.signature import lower
    from rosetta.store import verify
    from rosetta.store.artifact import artifact_path, dump_artifact

    definition = load_definition(tree / "signatures" / "vuln-triage.md", root=tree)
    model = load_catalog().resolve(model_id)
    adapter = load_adapters()[model.adapter]
    chosen = Knobs(**knobs)
    provenance = replace(verify.expected_provenance(definition, model, adapter, tree, {}), knobs=chosen.to_dict())
    prompt = render(lower(definition), model, chosen)
    path = artifact_path(tree / "compiled", "vuln-triage", model.id)
    path.write_text(dump_artifact(verify.artifact_of(lower(definition), adapter, provenance, prompt)))
    return prompt


def test_fallback_order_family_provider_uncompiled(compiled, caplog):
    """Issue 54: a sibling's optimized prompt lends its text and knobs; everything else is the
    running model's own (its max_tokens with the thinking reserve, its sampling rules)."""
    sonnet = optimized(compiled, "anthropic/claude-sonnet-5-5", delimiter="markdown", demo_count=0)
    optimized(compiled, "openai/gpt-4o", delimiter="xml", reasoning=True)
    agent = load("vuln-triage", project=compiled)
    with caplog.at_level(logging.WARNING, logger="rosetta.runtime"):
        family = agent.explain("opus")  # same family (claude) as the sonnet artifact
        own = agent.selector.render_uncompiled(agent.selector.target("opus"))
        assert family.kind == "family" and family.prompt.model == "anthropic/claude-opus-5-5"
        assert family.prompt.system == sonnet.system and family.prompt.system.startswith("## Role")
        assert family.prompt.generation == own.generation and family.prompt.request_params == own.request_params
        provider = agent.explain("o3")  # openai provider, o-series family
        assert provider.kind == "provider" and provider.prompt.model == "openai/o3"
        assert provider.prompt.system.startswith("<role>") and "temperature" not in provider.prompt.generation
        uncompiled = agent.explain("gemini/2.5-pro")
        assert uncompiled.kind == "uncompiled" and uncompiled.prompt.system.startswith("## Role")
    assert caplog.text.count("rendering the definition uncompiled") == 1


def test_a_plain_sibling_lends_nothing_what_runs_is_the_models_own_render(compiled):
    """Issue 54: gpt-4o was served gpt-5.6's max_tokens and lost its temperature; a plain render has
    no choices to lend, so the model's own render runs."""
    agent = load("vuln-triage", project=compiled)
    selection = agent.explain("opus")
    assert selection.kind == "uncompiled" and "a plain render" in selection.reason
    assert selection.prompt == agent.selector.render_uncompiled(agent.selector.target("opus"))


def test_each_fallback_is_logged_once_per_agent_and_model(compiled, caplog):
    optimized(compiled, "anthropic/claude-sonnet-5-5", delimiter="markdown")
    agent = load("vuln-triage", project=compiled)
    with caplog.at_level(logging.WARNING, logger="rosetta.runtime"):
        for _ in range(3):
            agent.prompt_for("opus")
    assert len(caplog.records) == 1 and "using the family artifact" in caplog.text


def test_strict_mode_raises_instead_of_falling_back(compiled):
    optimized(compiled, "anthropic/claude-sonnet-5-5", delimiter="markdown")
    agent = load("vuln-triage", project=compiled, strict=True)
    assert agent.explain("sonnet").kind == "artifact"
    for model in ("opus", "o3", "gemini/2.5-pro"):
        with pytest.raises(ArtifactError):
            agent.prompt_for(model)
    lenient = load("vuln-triage", project=compiled)
    assert lenient.explain("opus", strict=False).kind == "family"
    assert lenient.prompt_for("opus", strict=False).model == "anthropic/claude-opus-5-5"


def test_tampered_artifact_is_never_used(compiled, caplog):
    path = compiled / "compiled" / "vuln-triage" / "anthropic" / "claude-sonnet-5-5.yaml"
    path.write_text(path.read_text().replace("critical", "harmless", 1))
    agent = load("vuln-triage", project=compiled)
    selection = agent.explain("sonnet")
    assert selection.kind == "uncompiled" and "does not match its content_sha256" in selection.reason
    with pytest.raises(ArtifactError):
        agent.prompt_for("sonnet", strict=True)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_truncated_or_invalid_artifacts_fall_back(compiled, damage):
    path = compiled / "compiled" / "vuln-triage" / "openai" / "gpt-4o.yaml"
    text = path.read_text()
    path.write_text({"truncate": text[: len(text) // 2], "garbage": text[:300] + "\n: : [\n", "empty": ""}[damage])
    selection = load("vuln-triage", project=compiled).explain("openai/gpt-4o")
    assert selection.kind in ("uncompiled", "provider") and selection.artifact != str(path)


def test_resealed_but_invalid_yaml_is_refused(compiled):
    import hashlib

    path = compiled / "compiled" / "vuln-triage" / "openai" / "gpt-4o.yaml"
    lines = path.read_text().split("\n")
    body = "format: 1\nmodel: openai/gpt-4o\nprompt: [unclosed\n"
    lines = lines[:2] + [f"content_sha256: {hashlib.sha256(body.encode()).hexdigest()}", body]
    path.write_text("\n".join(lines[:3]) + "\n" + body)
    selection = load("vuln-triage", project=compiled).explain("openai/gpt-4o")
    assert selection.kind == "uncompiled" and "invalid YAML" in selection.reason


def test_stale_artifact_after_the_source_changed(compiled):
    source = compiled / "signatures" / "vuln-triage.md"
    source.write_text(source.read_text().replace("precise and neutral", "calm"))
    selection = load("vuln-triage", project=compiled).explain("sonnet")
    assert selection.kind == "uncompiled" and "stale" in selection.reason
    assert "calm" in selection.prompt.system


def test_selection_is_cached_without_file_io(compiled):
    agent = load("vuln-triage", project=compiled)
    first = agent.prompt_for("sonnet")
    shutil.rmtree(compiled / "compiled")
    assert agent.prompt_for("sonnet") is first


def test_load_by_path_and_unknown_names(compiled):
    agent = load(compiled / "signatures" / "code-reviewer.md", project=compiled)
    assert agent.name == "code-reviewer" and agent.explain("sonnet").kind == "artifact"
    with pytest.raises(UsageError):
        load("no-such-agent", project=compiled)


def test_choosing_a_compiled_prompt_imports_nothing_heavy(compiled):
    code = ("import sys, rosetta; p = rosetta.load('vuln-triage').prompt_for('sonnet'); "
            "print(' '.join(m for m in ('pydantic', 'litellm', 'dspy', 'optuna', 'datasets', 'jsonschema') "
            "if m in sys.modules))")
    output = subprocess.run([sys.executable, "-c", code], cwd=compiled, capture_output=True, text=True, check=True)
    assert output.stdout.strip() == ""


def test_the_runtime_reads_the_projects_one_settings_loader(tree, monkeypatch):
    """``rosetta.load`` reads the settings the CLI reads (rosetta.settings): arguments over
    ``ROSETTA_*`` over ``[tool.rosetta]``, directories from the project root."""
    from rosetta.settings import load_settings

    (tree / "pyproject.toml").write_text("[tool.rosetta]\nsignatures_dir = 'agents'\nstrict = true\n"
                                         "adapter_dirs = ['adapters']\nlocal_threads = 1\n"
                                         "[tool.rosetta.section_roles]\n'House rules' = 'constraints'\n"
                                         "[tool.rosetta.local_models]\ntiny = 'models/tiny.gguf'\n")
    monkeypatch.setenv("ROSETTA_COMPILED_DIR", "build/out")
    shutil.copytree(tree / "signatures", tree / "agents")
    agent = load("vuln-triage", project=tree)
    assert agent.dirs == load_settings(tree) and agent.strict is True
    assert agent.dirs.compiled_dir == tree.resolve() / "build" / "out"
    assert agent.dirs.signatures_dir == tree.resolve() / "agents" and agent.dirs.adapter_dirs == (tree.resolve() / "adapters",)
    assert agent.dirs.local_models == {"tiny": tree.resolve() / "models" / "tiny.gguf"} and agent.dirs.local_threads == 1
    assert load("vuln-triage", project=tree, strict=False).strict is False  # an argument wins
    monkeypatch.setenv("ROSETTA_LOCAL_THREADS", "3")
    assert load_settings(tree).local_threads == 3
    monkeypatch.setenv("ROSETTA_LOCAL_THREADS", "none")
    with pytest.raises(ConfigError, match="local_threads must be a positive integer"):
        load("vuln-triage", project=tree)


def test_load_takes_agent_names_or_definition_files_only(compiled):
    """Issue 36, case 7: ``load("..")`` indexed files outside the tree."""
    for name in ("..", ".", "../compiled", "vuln triage", ""):
        with pytest.raises(UsageError, match="neither an agent name nor a definition file|not found"):
            load(name, project=compiled)
    assert load("vuln-triage", project=compiled).name == "vuln-triage"
    assert load(compiled / "signatures/vuln-triage.md", project=compiled).name == "vuln-triage"


def test_load_finds_agents_as_validate_and_compile_do(tree):
    """Issue 84: one resolver. A definition in a hidden folder is not an agent (discovery skips it);
    a file is found by the name it declares, not by its file name; two files declaring one name are
    an error naming both (compile refuses them too)."""
    from rosetta.definition.discovery import discover_definitions

    signatures = tree / "signatures"
    (signatures / "vuln-triage.md").rename(signatures / "stem.md")  # declares name: vuln-triage
    compile_for(tree, "sonnet")
    hidden = signatures / ".old"
    hidden.mkdir()
    old = (signatures / "stem.md").read_text().replace("name: vuln-triage", "name: triage")
    (hidden / "triage.md").write_text(old)
    assert all(".old" not in path.parts for path in discover_definitions(signatures))
    with pytest.raises(UsageError, match="no agent named 'triage'"):
        load("triage", project=tree)

    agent = load("vuln-triage", project=tree)
    assert agent.definition_path == signatures / "stem.md"
    assert agent.explain("sonnet").kind == "artifact"  # compiled/vuln-triage/…, as compile wrote it
    with pytest.raises(UsageError, match=r"stem.md declares the name 'vuln-triage'") as raised:
        load("stem", project=tree)
    assert "rosetta.load('vuln-triage')" in str(raised.value)

    shutil.copy(signatures / "stem.md", signatures / "copy.md")
    with pytest.raises(DefinitionError, match="declared by 2 files") as clash:
        load("vuln-triage", project=tree)
    assert {p.location.file for p in clash.value.problems} == {str(signatures / "copy.md"), str(signatures / "stem.md")}
