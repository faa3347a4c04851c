"""rosetta compile: deterministic sealed artifacts, incremental rebuilds, --check, concurrency."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rosetta.store.artifact import parse_artifact, read_header
from rosetta.compile.compiler import CompileOptions, Status, compile_paths
from rosetta.providers.adapter import load_adapters

from conftest import make_project

MODELS = ("sonnet", "openai/gpt-4o", "gemini/2.5-pro", "ollama/llama3.1")


def compile_tree(tree: Path, *, models=MODELS, adapter_dirs=(), **flags):
    options = CompileOptions(out=tree / "compiled", root=tree, adapters=load_adapters(list(adapter_dirs)),
                             models=tuple(models), **flags)
    return compile_paths([tree / "signatures"], options, jobs=1)


def artifacts(tree: Path) -> dict[str, bytes]:
    return {p.relative_to(tree / "compiled").as_posix(): p.read_bytes()
            for p in sorted((tree / "compiled").rglob("*.yaml"))}


def test_compile_writes_one_sealed_artifact_per_agent_and_model(tree):
    report = compile_tree(tree)
    assert report.count(Status.WRITTEN) == 12 and report.exit_code() == 0
    files = artifacts(tree)
    assert "vuln-triage/anthropic/claude-sonnet-5-5.yaml" in files
    assert "code-reviewer/ollama_chat/llama3.1.yaml" in files
    text = files["vuln-triage/openai/gpt-4o.yaml"].decode()
    assert read_header(text).intact
    artifact = parse_artifact(text, path="x")
    assert artifact.prompt.system.startswith("## Role") and artifact.provenance.source_files == (
        "signatures/vuln-triage.md",)
    claude = parse_artifact(files["code-reviewer/anthropic/claude-sonnet-5-5.yaml"].decode(), path="x")
    assert claude.provenance.source_files == ("signatures/code-reviewer.md", "signatures/code-reviewer.governance.yaml")
    assert "\n  system: |" in text  # long texts as block scalars
    assert str(tree) not in text  # no absolute paths


def test_deterministic_across_runs_and_machines(tree, tmp_path):
    compile_tree(tree)
    first = artifacts(tree)
    compile_tree(tree, force=True)
    assert artifacts(tree) == first
    elsewhere = make_project(tmp_path / "another" / "checkout")
    compile_tree(elsewhere)
    assert artifacts(elsewhere) == first


def test_unchanged_inputs_are_not_rewritten(tree):
    compile_tree(tree)
    stamps = {p: p.stat().st_mtime_ns for p in (tree / "compiled").rglob("*.yaml")}
    report = compile_tree(tree)
    assert report.count(Status.UP_TO_DATE) == 12 and report.count(Status.WRITTEN) == 0
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps


def test_editing_a_source_rebuilds_only_that_agent(tree):
    compile_tree(tree)
    sidecar = tree / "signatures" / "code-reviewer.governance.yaml"
    sidecar.write_text(sidecar.read_text().replace("tone:", "tone: calm and", 1))
    report = compile_tree(tree)
    written = {r.agent for r in report.results if r.status is Status.WRITTEN}
    assert written == {"code-reviewer"} and report.count(Status.WRITTEN) == 4


def test_editing_an_adapter_rebuilds_its_models(tree, tmp_path):
    compile_tree(tree)
    overrides = tmp_path / "adapters"
    overrides.mkdir()
    text = (Path(load_adapters()["openai"].path)).read_text()
    (overrides / "openai.yaml").write_text(text.replace("few_shot: {frontier: 2", "few_shot: {frontier: 1"))
    report = compile_tree(tree, adapter_dirs=[overrides])
    assert {r.model for r in report.results if r.status is Status.WRITTEN} == {"openai/gpt-4o"}


def test_check_reports_missing_stale_and_invalid_without_writing(tree):
    report = compile_tree(tree, check=True)
    assert report.count(Status.MISSING) == 12 and report.exit_code() == 1
    assert not (tree / "compiled").exists()
    compile_tree(tree)
    assert compile_tree(tree, check=True).exit_code() == 0
    source = tree / "signatures" / "vuln-triage.md"
    source.write_text(source.read_text() + "\nOne more line.\n")
    artifact = tree / "compiled" / "advisory-extractor" / "openai" / "gpt-4o.yaml"
    artifact.write_text(artifact.read_text().replace("Role", "R0le", 1))
    before = artifacts(tree)
    report = compile_tree(tree, check=True)
    assert report.count(Status.STALE) == 4 and report.count(Status.INVALID) == 1 and report.exit_code() == 1
    assert artifacts(tree) == before


def test_tampered_artifact_is_rebuilt(tree):
    compile_tree(tree)
    artifact = tree / "compiled" / "vuln-triage" / "gemini" / "gemini-2.5-pro.yaml"
    good = artifact.read_bytes()
    artifact.write_bytes(good.replace(b"critical", b"Critical", 1))
    report = compile_tree(tree)
    assert report.count(Status.WRITTEN) == 1 and artifact.read_bytes() == good


def test_unrenderable_target_fails_with_the_reason(tree):
    report = compile_tree(tree, models=("ollama/gemma2",))
    failed = [r for r in report.results if r.status is Status.FAILED]
    assert failed and "context window" in failed[0].message and report.exit_code() == 1


def test_four_concurrent_compiles_leave_only_complete_valid_files(tree):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "rosetta.cli", "-C", str(tree), "compile", "--force", "-j", "1",
               *(arg for model in MODELS for arg in ("-m", model))]
    processes = [subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                 for _ in range(4)]
    outputs = [p.communicate(timeout=120)[0].decode() for p in processes]
    assert all(p.returncode == 0 for p in processes), outputs
    files = list((tree / "compiled").rglob("*"))
    assert not [f for f in files if f.name.endswith(".tmp")]
    yamls = [f for f in files if f.suffix == ".yaml"]
    assert len(yamls) == 12 and all(read_header(f.read_text()).intact for f in yamls)


def test_noop_recompile_settles_from_the_index_without_parsing(tree, monkeypatch):
    compile_tree(tree)
    import rosetta.definition.loader as loader

    def refuse(*args, **kwargs):
        raise AssertionError("a definition was parsed during a no-op recompile")

    monkeypatch.setattr(loader, "load_definition", refuse)
    report = compile_tree(tree)
    assert report.count(Status.UP_TO_DATE) == 12


def test_a_new_sidecar_invalidates_the_index(tree):
    compile_tree(tree, models=("sonnet",))
    (tree / "signatures" / "vuln-triage.governance.yaml").write_text("review: {owner: secops}\n")
    report = compile_tree(tree, models=("sonnet",))
    assert {r.agent for r in report.results if r.status is Status.WRITTEN} == {"vuln-triage"}
    text = (tree / "compiled" / "vuln-triage" / "anthropic" / "claude-sonnet-5-5.yaml").read_text()
    assert "signatures/vuln-triage.governance.yaml" in text


def test_a_corrupt_index_only_costs_time(tree):
    compile_tree(tree)
    (tree / "compiled" / ".rosetta-index.json").write_text("{not json")
    assert compile_tree(tree).count(Status.UP_TO_DATE) == 12


def test_two_definitions_with_one_name_are_refused_and_nothing_is_written(tree):
    """Issue 36, case 7: they used to overwrite each other's artifacts with exit 0."""
    text = (tree / "signatures/advisory-extractor.md").read_text(encoding="utf-8")
    (tree / "signatures/copy.md").write_text(text, encoding="utf-8")
    report = compile_tree(tree, models=("openai/gpt-4o",))
    refused = [r for r in report.results if r.agent == "advisory-extractor"]
    assert report.exit_code() == 1 and len(refused) == 2 and {r.status for r in refused} == {Status.FAILED}
    assert all("also used by" in r.message and "copy.md" in r.message + r.source for r in refused)
    assert not list((tree / "compiled").glob("advisory-extractor/*/*.yaml"))
    assert (tree / "compiled/vuln-triage/openai/gpt-4o.yaml").is_file()  # the others still compile
    assert not list((tree / "compiled").rglob("*.tmp"))


def test_a_name_clash_with_an_up_to_date_definition_keeps_its_artifacts(tree):
    compile_tree(tree, models=("openai/gpt-4o",))
    before = artifacts(tree)
    text = (tree / "signatures/vuln-triage.md").read_text(encoding="utf-8").replace("CVSS", "CVSS v4")
    (tree / "signatures/impostor.md").write_text(text, encoding="utf-8")
    report = compile_tree(tree, models=("openai/gpt-4o",))
    assert report.exit_code() == 1 and artifacts(tree) == before


def test_compile_never_writes_through_a_symlink(tree, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tree / "compiled").mkdir()
    (tree / "compiled/vuln-triage").symlink_to(outside, target_is_directory=True)
    report = compile_tree(tree, models=("openai/gpt-4o",))
    failed = [r for r in report.results if r.agent == "vuln-triage"]
    assert report.exit_code() == 1 and failed[0].status is Status.FAILED and "symlink" in failed[0].message
    assert not list(outside.rglob("*"))


def test_compile_cleans_temp_files_that_killed_compiles_left(tree):
    compile_tree(tree, models=("openai/gpt-4o",))
    folder = tree / "compiled/vuln-triage/openai"
    stale, fresh = folder / ".gpt-4o.yaml.abc12345.tmp", folder / ".gpt-4o.yaml.def456.tmp"
    stale.write_text("half")
    fresh.write_text("being written")
    os.utime(stale, (1, 1))
    compile_tree(tree, models=("openai/gpt-4o",))
    assert not stale.exists() and fresh.exists()  # a recent one may belong to a compile still running


def test_editing_the_examples_file_makes_the_artifact_stale(tree):
    """Issue 36, case 2: the examples file is a source of the artifact, not just the .md."""
    definition = tree / "signatures/vuln-triage.md"
    text = definition.read_text(encoding="utf-8")
    (tree / "signatures/vuln-triage.examples.jsonl").write_text(
        '{"id": "a", "inputs": {"report": "SQL injection in the login form, table dumped."}, '
        '"output": {"severity": "critical", "rationale": "Data was dumped."}}\n', encoding="utf-8")
    definition.write_text(text.replace("    count_range: {min: 1, max: 4}\n", "    count_range: {min: 1, max: 4}\n"
                                       "    examples_ref: vuln-triage.examples.jsonl\n", 1), encoding="utf-8")
    assert compile_tree(tree, models=("openai/gpt-4o",)).exit_code() == 0
    artifact = parse_artifact((tree / "compiled/vuln-triage/openai/gpt-4o.yaml").read_text(), path="x")
    assert artifact.provenance.source_files == ("signatures/vuln-triage.md", "signatures/vuln-triage.examples.jsonl")
    examples = tree / "signatures/vuln-triage.examples.jsonl"
    examples.write_text(examples.read_text().replace("Data was dumped", "Data was exfiltrated"), encoding="utf-8")
    report = compile_tree(tree, models=("openai/gpt-4o",), check=True)
    stale = next(r for r in report.results if r.agent == "vuln-triage")
    assert stale.status is Status.STALE and report.exit_code() == 1

    from rosetta.runtime.agent import load

    agent = load("vuln-triage", project=tree)
    selection = agent.explain("openai/gpt-4o")
    assert selection.kind == "uncompiled" and "changed since it was compiled" in selection.reason
    assert "exfiltrated" in str(agent.prompt_for("openai/gpt-4o").demos)
