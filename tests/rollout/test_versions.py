"""Retained versions: recompiling a changed definition keeps the previous artifact, byte for byte."""

from __future__ import annotations

import os

import pytest

from rollout_project import MODEL, artifact_of, compile_agent, edit_definition, version_of, versions  # noqa: F401
from rosetta.store.artifact import parse_artifact, read_header
from rosetta.errors import RolloutError
from rosetta.store.versions import list_versions, load_version, resolve_id, versions_dir
from rosetta.runtime.agent import load


def test_recompiling_a_changed_definition_keeps_the_previous_artifact(tree):
    compile_agent(tree)
    artifact = artifact_of(tree)
    before = artifact.read_bytes()
    old = version_of(artifact)
    os.utime(artifact, (1_700_000_000, 1_700_000_000))  # a known compile time, which the copy must keep
    edit_definition(tree)
    compile_agent(tree)
    kept = versions_dir(artifact) / f"{old}.yaml"
    assert kept.read_bytes() == before
    assert read_header(kept.read_text(encoding="utf-8")).intact
    assert kept.stat().st_mtime == 1_700_000_000
    assert version_of(artifact) != old
    assert [v.id for v in list_versions(artifact)] == [version_of(artifact), old]


def test_an_unchanged_or_forced_recompile_keeps_nothing(tree):
    compile_agent(tree)
    compile_agent(tree)
    from rosetta.compile.compiler import CompileOptions, compile_paths
    from rosetta.providers.adapter import load_adapters

    options = CompileOptions(out=tree / "compiled", root=tree, adapters=load_adapters(), models=(MODEL,), force=True)
    compile_paths([tree / "signatures" / "vuln-triage.md"], options, jobs=1)
    assert not versions_dir(artifact_of(tree)).exists()


def test_a_tampered_artifact_is_not_kept_as_a_version(tree):
    compile_agent(tree)
    artifact = artifact_of(tree)
    artifact.write_text(artifact.read_text().replace("critical", "harmless", 1))
    edit_definition(tree)
    compile_agent(tree)
    assert not versions_dir(artifact).exists()


def test_the_runtime_still_picks_the_current_artifact_and_indexes_no_versions(versions):
    versions.rollout("# no settings yet\n")  # a rollout file is not an artifact either
    agent = load("vuln-triage", project=versions.tree)
    assert agent.artifacts == {MODEL: versions.artifact}
    selection = load("vuln-triage", project=versions.tree).explain(MODEL)
    assert selection.kind == "artifact" and selection.version == versions.new
    assert "calm" in selection.prompt.system


def test_ids_resolve_from_any_unique_prefix(versions):
    assert resolve_id(versions.artifact, versions.old[:12]) == (versions.old, versions_dir(versions.artifact)
                                                                / f"{versions.old}.yaml")
    assert resolve_id(versions.artifact, versions.new.upper()) == (versions.new, versions.artifact)
    with pytest.raises(RolloutError, match="no version 0000000"):
        resolve_id(versions.artifact, "0000000")
    with pytest.raises(RolloutError, match="not a version id"):
        resolve_id(versions.artifact, "v2")


def test_an_ambiguous_prefix_is_refused(versions):
    shared = os.path.commonprefix([versions.old, versions.new])
    if len(shared) < 7:  # make two kept names share a 7-digit prefix
        fake = versions.old[:7] + ("0" if versions.old[7] != "0" else "1") * 57
        (versions_dir(versions.artifact) / f"{fake}.yaml").write_text("x")
        shared = versions.old[:7]
    with pytest.raises(RolloutError, match="ambiguous"):
        resolve_id(versions.artifact, shared)


def test_loading_a_version_checks_its_seal_and_identity(versions):
    loaded, path = load_version(versions.artifact, versions.old, agent="vuln-triage", model=MODEL)
    assert loaded.content_sha256 == versions.old and "precise and neutral" in loaded.prompt.system
    with pytest.raises(RolloutError, match="not of code-reviewer"):
        load_version(versions.artifact, versions.old, agent="code-reviewer", model=MODEL)
    path.write_text(path.read_text().replace("critical", "harmless", 1))
    with pytest.raises(RolloutError, match="does not match its content_sha256"):
        load_version(versions.artifact, versions.old, agent="vuln-triage", model=MODEL)


def test_an_optimized_artifact_published_as_the_optimizer_does_keeps_the_plain_one(versions):
    from dataclasses import replace

    from rosetta.store.artifact import dump_artifact
    from rosetta.store.publish import publish

    plain = parse_artifact(versions.artifact.read_text(), path=str(versions.artifact))
    optimized = replace(plain, provenance=replace(plain.provenance, optimizer={"name": "rosetta"},
                                                  scores={"metric": "fields", "dev": 0.8, "test": 0.75}))
    publish(versions.artifact, dump_artifact(optimized), versions.tree / "compiled")
    listed = list_versions(versions.artifact)
    assert sorted(v.id for v in listed) == sorted([version_of(versions.artifact), versions.new, versions.old])
    current = next(v for v in listed if v.current)
    assert current.scores == {"metric": "fields", "dev": 0.8, "test": 0.75} and current.optimizer == "rosetta"
    assert current.agent_version == plain.version
    kept = next(v for v in listed if v.id == versions.new)
    assert not kept.current and kept.scores == {} and kept.optimizer is None and kept.problem is None


def test_versions_are_dated_by_the_commits_that_wrote_them_not_a_clone_s_file_times(tree):
    """Issue 59: a clone gives every file its checkout time; git's history keeps when each version
    of the artifact was written."""
    import subprocess

    def git(*args: str, date: str | None = None) -> None:
        env = {**os.environ, "GIT_AUTHOR_DATE": date or "", "GIT_COMMITTER_DATE": date or "",
               "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
        subprocess.run(["git", *args], cwd=tree, check=True, capture_output=True, env=env)

    git("init", "-q")
    compile_agent(tree)
    artifact = artifact_of(tree)
    old = version_of(artifact)
    git("add", "-A")
    git("commit", "-qm", "first", date="2026-01-02T03:04:05+00:00")
    edit_definition(tree)
    compile_agent(tree)
    git("add", "-A")
    git("commit", "-qm", "second", date="2026-02-03T04:05:06+00:00")
    for path in [artifact, *versions_dir(artifact).iterdir()]:
        os.utime(path, (1_800_000_000, 1_800_000_000))  # as a fresh clone would leave them
    written = {v.id: v.written.isoformat() for v in list_versions(artifact)}
    assert written == {version_of(artifact): "2026-02-03T04:05:06+00:00", old: "2026-01-02T03:04:05+00:00"}
    artifact.write_text(artifact.read_text(encoding="utf-8") + "\n", encoding="utf-8")  # edited, not committed
    current = next(v for v in list_versions(artifact) if v.current)
    assert current.written.timestamp() == pytest.approx(artifact.stat().st_mtime, abs=1e-3)  # its own time
