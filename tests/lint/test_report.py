"""Report formats: JSON shape, SARIF 2.1.0 validity and GitHub code-scanning essentials."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from rosetta.definition import load_many
from rosetta.lint import build_report, to_json, to_sarif

SARIF_SCHEMA = json.loads((Path(__file__).parents[1] / "fixtures" / "sarif-2.1.0-rtm.5.json").read_text())


@pytest.fixture
def mixed_report(portable, write, project):
    portable("good")
    portable("bad", {"openai/gpt-4o]": "gpt-4o]"})
    write("broken.md", "---\ndescription: an agent without a name\nidentity: Analyst\n---\nbody\n")
    write("legacy.md", "---\nname: legacy\nmodel: opus\n---\nbody\n")
    return build_report(load_many([project]))


def test_json_report_shape(mixed_report):
    document = to_json(mixed_report)
    assert set(document) == {"files", "summary"}
    assert document["summary"] == {"files": 4, "loaded": 3, "errors": 2, "warnings": 1, "info": 3}
    files = {Path(f["path"]).name: f for f in document["files"]}
    for entry in files.values():
        assert {"path", "agent", "loaded", "error", "findings"} <= set(entry)
        for finding in entry["findings"]:
            assert {"id", "severity", "message", "line"} <= set(finding)
    assert files["broken.md"]["loaded"] is False and "name" in files["broken.md"]["error"]
    assert files["broken.md"]["problems"][0]["line"] == 2
    assert [f["id"] for f in files["bad.md"]["findings"]] == ["PV-006"]
    assert files["good.md"]["findings"] == [] and files["good.md"]["agent"] == "good"
    json.dumps(document)  # serializable


def test_exit_codes(mixed_report, portable, project):
    assert mixed_report.exit_code() == 2  # a file failed to load
    clean = build_report(load_many([portable("only")]))
    assert clean.exit_code() == 0 and clean.exit_code(strict=True) == 0


def test_sarif_validates_against_the_2_1_0_schema(mixed_report, project, monkeypatch):
    monkeypatch.chdir(project)
    document = to_sarif(mixed_report)
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(document)


def test_sarif_has_what_github_code_scanning_requires(mixed_report, project, monkeypatch):
    monkeypatch.chdir(project)
    (run,) = to_sarif(mixed_report)["runs"]
    rules = run["tool"]["driver"]["rules"]
    ids = [r["id"] for r in rules]
    assert {f"PV-{n:03d}" for n in range(1, 11)} <= set(ids)
    for rule in rules:
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"] and rule["help"]["text"]
        assert rule["defaultConfiguration"]["level"] in {"error", "warning", "note"}
    assert run["results"], "expected results"
    for result in run["results"]:
        assert ids[result["ruleIndex"]] == result["ruleId"]
        assert result["message"]["text"]
        (location,) = result["locations"]
        artifact = location["physicalLocation"]["artifactLocation"]
        assert not artifact["uri"].startswith(("/", "file:")) and artifact["uriBaseId"] == "%SRCROOT%"
        assert location["physicalLocation"]["region"]["startLine"] >= 1
    levels = {r["ruleId"]: r["level"] for r in run["results"]}
    assert levels["PV-006"] in {"error", "warning"} and levels["RS-000"] == "error"
    assert run["invocations"][0]["executionSuccessful"] is False


def test_parallel_validation_matches_serial(portable, write, project, monkeypatch):
    import pickle

    from rosetta.lint import validation as report_module

    for n in range(6):
        portable(f"agent{n}", {"openai/gpt-4o]": "gpt-4o]"} if n % 2 else {})
    write("broken.md", "---\nname: broken\n")
    serial = report_module.validate_paths([project], jobs=1)
    monkeypatch.setattr(report_module, "PARALLEL_THRESHOLD", 2)
    parallel = report_module.validate_paths([project], jobs=2)
    assert to_json(parallel) == to_json(serial)
    assert [f.path for f in parallel.files] == sorted(f.path for f in parallel.files)
    broken = next(f for f in parallel.files if f.error)
    assert broken.error.problems[0].location.line == 1
    assert pickle.loads(pickle.dumps(broken.error)).problems == broken.error.problems
