"""Issue 56: the fallback chain reads the cross-model matrix. A model with no artifact of its own is
not lent another model's optimized artifact when the matrix scored that very artifact below the
model's own uncompiled render on it; a matrix of another artifact, or one that does not parse, changes
nothing (it can keep a borrowed prompt from serving, never choose one)."""

from __future__ import annotations

import logging
import os

import pytest
from test_agent import compile_for, optimized

from rosetta.runtime.agent import load
from rosetta.store.cross import UNCOMPILED, CrossRecord, cross_path, read_cross
from rosetta.store.publish import write_cross

SONNET, OPUS = "anthropic/claude-sonnet-5-5", "anthropic/claude-opus-5-5"


@pytest.fixture
def lending(tree):
    """vuln-triage with an optimized sonnet artifact, which opus (same family, no artifact) borrows."""
    compile_for(tree, "sonnet")
    optimized(tree, SONNET, delimiter="markdown", demo_count=0)
    assert load("vuln-triage", project=tree).explain("opus").kind == "family"
    return tree


def record(tree, *, lent: float, own: float, sha: str | None = None, split: str = "dev") -> CrossRecord:
    artifact = load("vuln-triage", project=tree).explain(SONNET)
    matrix = CrossRecord("vuln-triage", split, "fields", 40, "d" * 64, "2026-11-27T18:00:00+00:00",
                         {SONNET: sha or artifact.version, OPUS: None},
                         {SONNET: {SONNET: 0.7, OPUS: lent}, OPUS: {SONNET: 0.5, OPUS: 0.6},
                          UNCOMPILED: {SONNET: 0.4, OPUS: own}})
    write_cross(tree / "compiled", matrix)
    return matrix


def test_an_artifact_the_matrix_scored_below_the_models_own_render_is_not_lent(lending):
    record(lending, lent=0.31, own=0.55)
    selection = load("vuln-triage", project=lending).explain("opus")
    assert selection.kind == "uncompiled"
    assert "cross-model matrix" in selection.reason and "0.310" in selection.reason and "0.550" in selection.reason


def test_a_matrix_measured_on_test_chooses_nothing(lending):
    record(lending, lent=0.1, own=0.9, split="test")  # kept for the report only
    assert load("vuln-triage", project=lending).explain("opus").kind == "family"


def test_an_artifact_that_scored_as_well_is_lent(lending):
    record(lending, lent=0.55, own=0.55)
    assert load("vuln-triage", project=lending).explain("opus").kind == "family"


def test_a_matrix_of_another_artifact_says_nothing_about_this_one(lending):
    record(lending, lent=0.1, own=0.9, sha="e" * 64)
    assert load("vuln-triage", project=lending).explain("opus").kind == "family"


def test_the_record_round_trips_and_names_its_agent(lending):
    written = record(lending, lent=0.3, own=0.5)
    assert read_cross(lending / "compiled", "vuln-triage") == written
    assert read_cross(lending / "compiled", "leak-detector") is None
    path = cross_path(lending / "compiled", "vuln-triage")
    other = lending / "compiled" / "leak-detector"
    other.mkdir(parents=True, exist_ok=True)
    (other / "cross.yaml").write_text(path.read_text())
    assert "not 'leak-detector'" in read_cross(lending / "compiled", "leak-detector")


@pytest.mark.parametrize("text, why", [
    ("agent: vuln-triage\nsplit: [\n", "not valid YAML"),
    ("- a list\n", "expected a mapping"),
    ("agent: vuln-triage\nsplit: test\nmetric: fields\nexamples: 40\ndataset_sha256: d\nmeasured_at: now\n"
     "prompts: {}\nscores: {uncompiled: {x: 7}}\n", "a score in [0, 1]"),
])
def test_a_malformed_record_is_ignored_and_logged(lending, caplog, text, why):
    cross_path(lending / "compiled", "vuln-triage").write_text(text)
    assert why in read_cross(lending / "compiled", "vuln-triage")
    with caplog.at_level(logging.WARNING, logger="rosetta.runtime"):
        assert load("vuln-triage", project=lending).explain("opus").kind == "family"
    assert "cross.yaml" in caplog.text and why in caplog.text


def test_a_symlinked_or_fifo_record_is_refused_not_followed(lending, tmp_path):
    elsewhere = tmp_path / "elsewhere.yaml"
    elsewhere.write_text("agent: vuln-triage\n")
    path = cross_path(lending / "compiled", "vuln-triage")
    path.symlink_to(elsewhere)
    assert "unreadable" in read_cross(lending / "compiled", "vuln-triage")
    path.unlink()
    os.mkfifo(path)
    assert "unreadable" in read_cross(lending / "compiled", "vuln-triage")  # never waited on
