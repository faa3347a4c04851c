"""`rosetta compile --check` checks every artifact under compiled/, not only the models an agent
targets: one built with --model goes stale like the others, and an orphan — its definition gone or
renamed, or its model no longer resolvable — fails the check, naming the file and the fix."""

from __future__ import annotations

from pathlib import Path

from rosetta.compile.compiler import CompileOptions, Status, compile_paths
from rosetta.providers.adapter import load_adapters

EXTRA = "openai/gpt-4.1"  # a catalog model none of the bundled agents prefers
MINE = {"openai/mine": {"api_base": "http://127.0.0.1:8000/v1", "context_window": 128000}}


def run(tree: Path, paths=None, *, models=(), declared=None, check=False):
    options = CompileOptions(out=tree / "compiled", root=tree, adapters=load_adapters(), models=tuple(models),
                             check=check, unlisted=(), declared_models=declared or {})
    return compile_paths(paths or [tree / "signatures"], options, jobs=1)


def by_model(report, agent: str) -> dict[str, object]:
    return {r.model: r for r in report.results if r.agent == agent}


def test_an_artifact_compiled_with_model_is_checked_and_goes_stale(tree):
    assert run(tree).exit_code() == 0
    assert run(tree, [tree / "signatures" / "vuln-triage.md"], models=[EXTRA]).count(Status.WRITTEN) == 1
    clean = run(tree, check=True)
    assert clean.exit_code() == 0 and by_model(clean, "vuln-triage")[EXTRA].status is Status.UP_TO_DATE
    source = tree / "signatures" / "vuln-triage.md"
    source.write_text(source.read_text() + "\nOne more line.\n")
    stale = by_model(run(tree, check=True), "vuln-triage")[EXTRA]
    assert stale.status is Status.STALE and stale.artifact.endswith("vuln-triage/openai/gpt-4.1.yaml")
    assert f"rosetta compile --model {EXTRA} signatures/vuln-triage.md" in stale.message
    assert "or delete it" in stale.message
    assert run(tree, check=True).exit_code() == 1
    assert run(tree, check=True, models=["sonnet"]).count(Status.STALE) == 1  # --model scopes the check


def test_a_tampered_artifact_of_another_model_is_invalid(tree):
    run(tree)
    run(tree, [tree / "signatures" / "vuln-triage.md"], models=[EXTRA])
    artifact = tree / "compiled" / "vuln-triage" / "openai" / "gpt-4.1.yaml"
    artifact.write_text(artifact.read_text().replace("Role", "R0le", 1))
    report = run(tree, check=True)
    assert by_model(report, "vuln-triage")[EXTRA].status is Status.INVALID and report.exit_code() == 1


def test_the_artifacts_of_a_deleted_definition_are_orphans(tree):
    run(tree)
    (tree / "signatures" / "advisory-extractor.md").unlink()
    report = run(tree, check=True)
    orphans = [r for r in report.results if r.status is Status.ORPHAN]
    assert report.exit_code() == 1 and len(orphans) == 4 and {r.agent for r in orphans} == {"advisory-extractor"}
    for orphan in orphans:
        assert Path(orphan.artifact).is_file() and orphan.source == "signatures/advisory-extractor.md"
        assert "signatures/advisory-extractor.md is gone" in orphan.message
        assert f"delete {tree / 'compiled' / 'advisory-extractor'}" in orphan.message and "restore" in orphan.message
    assert not [r for r in report.results if r.agent != "advisory-extractor" and r.status is not Status.UP_TO_DATE]


def test_a_renamed_agent_leaves_orphans_under_its_old_name(tree):
    run(tree)
    source = tree / "signatures" / "vuln-triage.md"
    source.write_text(source.read_text().replace("name: vuln-triage", "name: triage", 1))
    report = run(tree, check=True)
    orphans = [r for r in report.results if r.status is Status.ORPHAN]
    assert {r.agent for r in orphans} == {"vuln-triage"} and len(orphans) == 4
    assert "signatures/vuln-triage.md now defines agent 'triage'" in orphans[0].message
    assert by_model(report, "triage")  # the new name is checked (its artifacts are missing)


def test_an_artifact_whose_model_no_longer_resolves_is_an_orphan(tree):
    run(tree)
    agent = tree / "signatures" / "vuln-triage.md"
    assert run(tree, [agent], models=["openai/mine"], declared=MINE).count(Status.WRITTEN) == 1
    assert run(tree, check=True, declared=MINE).exit_code() == 0
    report = run(tree, check=True)  # the declaration is gone, and the project accepts no id outside the catalog
    (orphan,) = [r for r in report.results if r.status is Status.ORPHAN]
    assert orphan.model == "openai/mine" and orphan.artifact.endswith("vuln-triage/openai/mine.yaml")
    assert "refuses now" in orphan.message and f"delete {orphan.artifact}" in orphan.message
    assert "resolvable again" in orphan.message and report.exit_code() == 1


def test_checking_part_of_the_tree_judges_no_other_agent(tree):
    run(tree)
    report = run(tree, [tree / "signatures" / "vuln-triage.md"], check=True)
    assert report.exit_code() == 0 and {r.agent for r in report.results} == {"vuln-triage"}


def test_a_definition_that_fails_to_load_is_reported_once_not_as_orphans(tree):
    run(tree)
    (tree / "signatures" / "code-reviewer.md").write_text("---\nname: [unclosed\n---\n")
    report = run(tree, check=True)
    assert not [r for r in report.results if r.status is Status.ORPHAN]
    assert [r.status for r in report.results if r.source.endswith("code-reviewer.md")] == [Status.FAILED]


def test_the_cli_check_names_the_orphan_and_exits_1(cli, tree, monkeypatch):
    monkeypatch.chdir(tree)
    assert cli("compile").exit_code == 0
    assert cli("compile", "-m", EXTRA, "signatures/code-reviewer.md").exit_code == 0
    assert cli("compile", "--check").exit_code == 0
    (tree / "signatures" / "code-reviewer.md").unlink()
    (tree / "signatures" / "code-reviewer.governance.yaml").unlink()
    result = cli("compile", "--check")
    assert result.exit_code == 1 and "orphan" in result.stdout and "4 orphan" in result.stdout
    assert "compiled/code-reviewer/openai/gpt-4.1.yaml" in result.stdout


def test_a_definition_turned_into_plain_notes_leaves_orphans(tree):
    run(tree)
    (tree / "signatures" / "advisory-extractor.md").write_text("just notes\n")
    orphans = [r for r in run(tree, check=True).results if r.status is Status.ORPHAN]
    assert len(orphans) == 4 and "is no longer an agent definition" in orphans[0].message


def test_an_agent_folder_moved_by_hand_is_invalid_even_in_a_partial_check(tree):
    run(tree)
    (tree / "compiled" / "vuln-triage").rename(tree / "compiled" / "triage")
    report = run(tree, [tree / "signatures" / "code-reviewer.md"], check=True)
    moved = [r for r in report.results if r.agent == "triage"]
    assert len(moved) == 4 and all(r.status is Status.INVALID for r in moved) and report.exit_code() == 1
    assert "not of triage" in moved[0].message and moved[0].message.endswith("delete it")
