"""Issue 54: ``rosetta verify`` on a model this environment has no key for reports it "not run: no
credentials", naming the variable, with every criterion n/a: not a PV-011 failure, no quality of
0.00, no request to the provider (a real server on 127.0.0.1 counts them) and no retry waits. The
models that have credentials are verified as before; the summary, JSON and HTML reports count the
model apart, and the exit code says the verification is incomplete."""

from __future__ import annotations

from rosetta import RunOptions

import json
import os
import re
from pathlib import Path

import pytest
import scripted_model
from fault_server import FaultServer
from test_verify import ALPHA_NOTES, make_project, run_verify

from rosetta.runtime.result import RetryPolicy
from rosetta.verify.html import render_html

SLOW = RetryPolicy(attempts=4, base=0.01, cap=0.01, timeout=5.0)
KEYLESS = "openai/gpt-4o"


@pytest.fixture(autouse=True)
def scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted_model.register()
    for name in list(os.environ):  # this machine's own keys never count
        if re.search(r"(^|_)(KEY|TOKEN|SECRET)(_|$)", name) or name.endswith("_API_BASE"):
            monkeypatch.delenv(name)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch):
    with FaultServer([("ok", json.dumps({"label": "alpha"}))]) as server:
        monkeypatch.setenv("OPENAI_API_BASE", server.url)
        yield server


def test_a_model_without_credentials_is_not_run_and_not_failed(tmp_path: Path, server: FaultServer,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[int] = []
    monkeypatch.setattr(RetryPolicy, "delay", lambda self, retry, after: waits.append(retry) or 0.0)
    root = make_project(tmp_path, rows=ALPHA_NOTES[:2])
    report = run_verify(root, KEYLESS, "scripted/toy", run_options=RunOptions(policy=SLOW))
    assert not server.requests and not waits  # nothing sent, no retry planned
    keyless, toy = report.agents[0].models
    assert keyless.not_run == ("no credentials for openai: $OPENAI_API_KEY is not set (export it, or see "
                               "`rosetta doctor`)")
    assert {c.status for c in keyless.criteria} == {"n/a"} and len(keyless.criteria) == 9
    assert all(c.detail == f"not run: {keyless.not_run}" for c in keyless.criteria)
    assert keyless.quality is None and keyless.compliance is None and not keyless.runs
    assert not report.failed  # not a PV-011 failure, no PV-015 score of 0
    assert report.not_run == [f"toy-sorter × {KEYLESS}: {keyless.not_run}"]
    assert toy.not_run is None and toy.criterion("PV-011").status == "pass" and toy.quality == 1.0
    assert toy.criterion("PV-015").status == "pass"  # judged on its own: the primary model was not run
    dumped = json.loads(report.model_dump_json())
    assert dumped["agents"][0]["models"][0]["not_run"] == keyless.not_run
    page = render_html(report)
    assert "INCOMPLETE" in page and "not run: no credentials for openai: $OPENAI_API_KEY" in page
    assert "FAILED" not in page


def test_the_summary_counts_it_apart_and_the_gate_says_incomplete(tmp_path: Path, server: FaultServer, cli) -> None:
    root = make_project(tmp_path, rows=ALPHA_NOTES[:2])
    result = cli("-C", root, "verify", root / "signatures/toy-sorter.md", "--model", KEYLESS, "--model",
                 "scripted/toy", "--judge", "scripted/judge", "--fast")
    assert result.exit_code == 1, result.output  # verified less than was asked
    text = " ".join(result.stdout.split())
    assert f"not run toy-sorter × {KEYLESS}: no credentials for openai: $OPENAI_API_KEY is not set" in text
    assert "all criteria hold on the models that ran; 1 agent × model pair(s) not run: no credentials" in text
    assert "failure(s)" not in text and "PV-011 Valid structured output" not in text and not server.requests
    alone = cli("-C", root, "verify", root / "signatures/toy-sorter.md", "--model", KEYLESS, "--judge",
                "scripted/judge", "--fast")
    assert alone.exit_code == 1 and "nothing was run" in alone.stdout and "Traceback" not in alone.output


def test_with_its_key_set_the_same_model_is_verified(tmp_path: Path, server: FaultServer,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    root = make_project(tmp_path, rows=ALPHA_NOTES[:1])
    report = run_verify(root, KEYLESS, limit=1, run_options=RunOptions(policy=SLOW))
    model = report.agents[0].models[0]
    assert model.not_run is None and server.requests and not report.not_run
    assert model.criterion("PV-011").status == "pass"
