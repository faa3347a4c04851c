"""Issue 59: manual (copy/paste) mode writes ``<agent>-prompt.md`` from the CLI as from Python, says
where, and writes nothing (nor says it did) for inputs an input rule rejects."""

from __future__ import annotations

import json

import pytest

from rosetta.runtime.agent import load
from rosetta.runtime.guardrails import GuardrailError

REPORT = "Unauthenticated remote code execution through the file upload handler."
SHORT = "too short"  # vuln-triage's input rule wants 40 characters
ANSWER = {"severity": "critical", "rationale": "Pre-auth RCE in the upload handler."}


def test_the_cli_writes_the_prompt_where_the_python_api_does_and_says_so(cli, tree, monkeypatch):
    monkeypatch.chdir(tree)
    (tree / "answer.txt").write_text(json.dumps(ANSWER))
    result = cli("run", "vuln-triage", "--manual", "--answer-file", "answer.txt", "-i", f"report={REPORT}")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == ANSWER
    assert "prompt written to vuln-triage-prompt.md" in " ".join(result.output.split())
    assert "file upload handler" in (tree / "vuln-triage-prompt.md").read_text()
    assert not (tree / "rosetta-prompt.txt").exists()
    load("vuln-triage", project=tree).run({"report": REPORT}, model="manual", answer=json.dumps(ANSWER))
    assert sorted(p.name for p in tree.glob("*prompt*")) == ["vuln-triage-prompt.md"]  # the same file, both ways


@pytest.mark.parametrize("how", ["--manual", "--model manual"])
def test_the_cli_writes_nothing_for_inputs_a_rule_rejects(cli, tree, monkeypatch, how):
    monkeypatch.chdir(tree)
    (tree / "answer.txt").write_text(json.dumps(ANSWER))
    result = cli("run", "vuln-triage", *how.split(), "--answer-file", "answer.txt", "-i", f"report={SHORT}")
    assert result.exit_code == 2 and "at least 40 characters" in result.output and "Traceback" not in result.output
    assert "prompt written" not in result.output
    assert not list(tree.glob("*prompt*")), "a rejected input left a prompt file behind"


def test_the_cli_says_nothing_was_written_when_the_prompt_cannot_render(cli, tree, monkeypatch):
    monkeypatch.chdir(tree)
    result = cli("run", "vuln-triage", "--manual", "--answer-file", "answer.txt", "-i", f"nonsense={REPORT}")
    assert result.exit_code == 2 and "prompt written" not in result.output
    assert not list(tree.glob("*prompt*"))


@pytest.mark.parametrize("how", ["run_manual", "run"])
def test_the_python_api_writes_nothing_for_inputs_a_rule_rejects(tree, monkeypatch, how):
    monkeypatch.chdir(tree)
    agent = load("vuln-triage", project=tree)
    with pytest.raises(GuardrailError, match="at least 40 characters"):
        if how == "run":
            agent.run({"report": SHORT}, model="manual", answer=json.dumps(ANSWER))
        else:
            agent.run_manual({"report": SHORT}, answer=json.dumps(ANSWER))
    assert not list(tree.glob("*prompt*"))
    result = agent.run_manual({"report": REPORT}, answer=json.dumps(ANSWER))
    assert result.valid and (tree / "vuln-triage-prompt.md").is_file()
