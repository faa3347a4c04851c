"""One gate: `rosetta validate` reports everything `rosetta compile` would refuse — target models the
catalog refuses (unknown, outside the project's unlisted_models, retired, without an adapter),
agent names two files share, and settings that do not load ([tool.rosetta.models], $ROSETTA_MODELS)
— as located problems in its text, JSON and SARIF reports, exiting non-zero.

The unknown model is ``nonesuch/model-x`` under ``unlisted_models = []``: refused whether the catalog
gates ids outside it or only those litellm cannot route."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from rosetta.compile.compiler import CompileOptions, Status, compile_paths
from rosetta.settings import load_settings
from rosetta.providers.adapter import load_adapters

STRICT = "[project]\nname = 'demo'\n\n[tool.rosetta]\nunlisted_models = []\n"
UNKNOWN, RETIRED = "nonesuch/model-x", "anthropic/claude-opus-4-20250514"
PREFERENCES = "model_preferences: [anthropic/claude-sonnet-5-5, openai/gpt-4o]"
SARIF_SCHEMA = json.loads((Path(__file__).parents[1] / "fixtures" / "sarif-2.1.0-rtm.5.json").read_text())


@pytest.fixture
def strict(project: Path) -> Path:
    (project / "pyproject.toml").write_text(STRICT)
    return project


def findings(result, rule: str) -> list[dict]:
    return [f for entry in json.loads(result.stdout)["files"] for f in entry["findings"] if f["id"] == rule]


def test_an_unknown_preferred_model_fails_validation_where_it_is_written(cli, strict, portable):
    path = portable("triage", {PREFERENCES: f"model_preferences: [anthropic/claude-sonnet-5-5, {UNKNOWN}]"})
    result = cli("-C", strict, "validate", path, "--format", "json")
    assert result.exit_code == 1, result.output
    (finding,) = findings(result, "RS-007")
    assert finding["severity"] == "error" and finding["file"] == str(path)
    assert (finding["line"], finding["field"]) == (20, "portability.model_preferences[1]")
    assert UNKNOWN in finding["message"] and "unknown model" in finding["message"]
    text = cli("-C", strict, "validate", path)
    assert text.exit_code == 1 and "20:52" in text.stdout and "RS-007" in text.stdout


def test_the_projects_unlisted_models_open_the_gate_as_they_do_for_compile(cli, strict, portable):
    path = portable("triage", {PREFERENCES: "model_preferences: [openai/gpt-3.5-turbo]"})
    assert cli("-C", strict, "validate", path).exit_code == 1
    (strict / "pyproject.toml").write_text(STRICT.replace("[]", "['openai/*']"))
    assert cli("-C", strict, "validate", path).exit_code == 0


def test_a_retired_preference_is_one_error_naming_its_replacement(cli, strict, portable):
    path = portable("triage", {PREFERENCES: f"model_preferences: [{RETIRED}]"})
    result = cli("-C", strict, "validate", path, "--format", "json")
    assert result.exit_code == 1
    errors = [f for f in json.loads(result.stdout)["files"][0]["findings"] if f["severity"] == "error"]
    assert len(errors) == 1 and errors[0]["field"] == "portability.model_preferences[0]"  # RS-005, not twice
    assert "anthropic/claude-opus-5-5" in errors[0]["message"]


@pytest.mark.parametrize("default", [RETIRED, UNKNOWN])
def test_a_default_model_compile_refuses_fails_the_agents_that_use_it(cli, strict, write, default):
    (strict / "pyproject.toml").write_text(STRICT + f"default_models = ['{default}']\n")
    path = write("helper.md", "---\nname: helper\ndescription: Helps.\n---\nYou help.\n")
    result = cli("-C", strict, "validate", path, "--format", "json")
    assert result.exit_code == 1, result.output
    (finding,) = findings(result, "RS-007")
    assert default in finding["message"] and "default model" in finding["message"]
    assert finding["file"] == str(path) and finding["field"] == "portability.model_preferences"


def test_a_declared_model_without_its_adapter_is_refused(cli, strict, portable):
    (strict / "pyproject.toml").write_text(STRICT + "\n[tool.rosetta.models.\"openai/mine\"]\n"
                                           "api_base = \"http://127.0.0.1:8000/v1\"\nadapter = \"nope\"\n")
    path = portable("triage", {PREFERENCES: "model_preferences: [openai/mine]"})
    result = cli("-C", strict, "validate", path, "--format", "json")
    (finding,) = findings(result, "RS-007")
    assert result.exit_code == 1 and "no adapter named 'nope'" in finding["message"]


def test_two_definitions_with_one_name_fail_both_at_their_name(cli, strict, portable, write):
    first = portable("triage")
    second = write("copy.md", first.read_text())
    result = cli("-C", strict, "validate", strict, "--format", "json")
    assert result.exit_code == 1, result.output
    clashes = findings(result, "RS-008")
    assert {f["file"] for f in clashes} == {str(first), str(second)}
    for finding in clashes:
        assert (finding["line"], finding["field"]) == (2, "name") and "'triage'" in finding["message"]
    assert str(second) in next(f["message"] for f in clashes if f["file"] == str(first))


def test_a_malformed_declared_model_is_reported_at_its_line(cli, strict, portable):
    (strict / "pyproject.toml").write_text(STRICT + "\n[tool.rosetta.models.\"openai/mine\"]\n"
                                           "api_base = \"http://127.0.0.1:8000/v1\"\ncontxt_window = 1000\n")
    path = portable("triage")
    result = cli("-C", strict, "validate", path, "--format", "json")
    assert result.exit_code == 2, result.output
    entry = json.loads(result.stdout)["files"][0]
    assert entry["loaded"] is False and entry["format"] == "settings"
    (problem,) = entry["problems"]
    assert problem["file"] == str(strict / "pyproject.toml") and problem["line"] == 9
    assert problem["field"] == 'tool.rosetta.models."openai/mine".contxt_window' and "context_window" in problem["hint"]
    assert json.loads(result.stdout)["files"][1]["path"] == str(path)  # the definitions are still linted
    text = cli("-C", strict, "validate", path)
    assert text.exit_code == 2 and "pyproject.toml:9" in text.stdout and "did you mean 'context_window'" in text.stdout


def test_a_declared_model_that_is_no_provider_model_id_is_refused(cli, strict, portable):
    (strict / "pyproject.toml").write_text(STRICT + "\n[tool.rosetta.models.mine]\napi_base = \"http://h:1/v1\"\n")
    result = cli("-C", strict, "validate", portable("triage"), "--format", "json")
    (problem,) = json.loads(result.stdout)["files"][0]["problems"]
    assert result.exit_code == 2 and "not a provider/model id" in problem["message"] and problem["line"] == 7


def test_rosetta_models_set_in_the_environment_is_checked_too(cli, strict, portable, monkeypatch):
    path = portable("triage")
    monkeypatch.setenv("ROSETTA_MODELS", '{"openai/mine": {"class": "huge"}}')
    result = cli("-C", strict, "validate", path, "--format", "json")
    assert result.exit_code == 2, result.output
    (problem,) = json.loads(result.stdout)["files"][0]["problems"]
    assert problem["file"] == "$ROSETTA_MODELS" and problem["field"] == 'tool.rosetta.models."openai/mine".class'
    monkeypatch.setenv("ROSETTA_MODELS", "{not json")
    result = cli("-C", strict, "validate", path, "--format", "json")
    assert result.exit_code == 2
    entry, linted = json.loads(result.stdout)["files"]
    assert entry["path"] == "$ROSETTA_MODELS" and entry["problems"][0]["line"] == 1 and linted["loaded"]


def test_sarif_carries_the_compile_refusals_and_stays_valid(cli, strict, portable, write, monkeypatch):
    monkeypatch.chdir(strict)
    (strict / "pyproject.toml").write_text(STRICT + "\n[tool.rosetta.models.\"openai/mine\"]\nclass = \"huge\"\n")
    portable("triage", {PREFERENCES: f"model_preferences: [{UNKNOWN}]"})
    write("copy.md", (strict / "triage.md").read_text())
    document = json.loads(cli("validate", strict, "-f", "sarif").stdout)
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(document)
    (run,) = document["runs"]
    assert {r["ruleId"] for r in run["results"]} >= {"RS-000", "RS-008"}
    (strict / "pyproject.toml").write_text(STRICT)
    document = json.loads(cli("validate", strict, "-f", "sarif").stdout)
    (run,) = document["runs"]
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    refused = [r for r in run["results"] if r["ruleId"] == "RS-007"]
    assert len(refused) == 2 and all(ids[r["ruleIndex"]] == "RS-007" and r["level"] == "error" for r in refused)
    assert refused[0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 20


def test_validate_refuses_exactly_the_targets_compile_refuses(cli, strict, portable):
    """The same project through both: every target compile fails on its model is an error at that
    preference in validate, and no other preference is."""
    portable("triage", {PREFERENCES: f"model_preferences: [anthropic/claude-sonnet-5-5, {UNKNOWN}, {RETIRED}, "
                                     "openai/gpt-3.5-turbo, openai/gpt-4o]"})
    settings = load_settings(strict)
    options = CompileOptions(out=strict / "compiled", root=strict, adapters=load_adapters(),
                             unlisted=tuple(settings.unlisted_models))
    report = compile_paths([strict / "triage.md"], options, jobs=1)
    refused = {r.model for r in report.results if r.status is Status.FAILED}
    assert refused == {UNKNOWN, RETIRED, "openai/gpt-3.5-turbo"}  # the retired one no longer aborts the compile
    assert report.count(Status.WRITTEN) == 2
    result = cli("-C", strict, "validate", strict / "triage.md", "--format", "json")
    errors = {f["field"] for f in json.loads(result.stdout)["files"][0]["findings"] if f["severity"] == "error"}
    assert errors == {f"portability.model_preferences[{i}]" for i in (1, 2, 3)}


def test_parallel_validation_applies_the_gate_like_serial(cli, strict, portable, monkeypatch):
    from rosetta.lint import validation as report_module

    for n in range(4):
        portable(f"agent{n}", {PREFERENCES: f"model_preferences: [{UNKNOWN}]"} if n % 2 else {})
    portable("agent0").rename(strict / "again.md")  # two files named agent0
    portable("agent0")
    serial = cli("-C", strict, "validate", strict, "-j", "1", "--format", "json")
    monkeypatch.setattr(report_module, "PARALLEL_THRESHOLD", 2)
    parallel = cli("-C", strict, "validate", strict, "-j", "2", "--format", "json")
    assert parallel.stdout == serial.stdout and parallel.exit_code == serial.exit_code == 1
    assert {f["id"] for e in json.loads(parallel.stdout)["files"] for f in e["findings"]} == {"RS-007", "RS-008"}
