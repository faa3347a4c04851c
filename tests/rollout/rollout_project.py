"""Helpers for the rollout tests: a project with two versions of vuln-triage on openai/gpt-4o
(compiled, edited, recompiled). A module of its own, not a conftest.py: tests elsewhere import
names from the top-level conftest, which a second conftest module would shadow. Test modules
import the ``versions`` fixture from here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from rosetta.store.artifact import read_header
from rosetta.compile.compiler import CompileOptions, compile_paths
from rosetta.providers.adapter import load_adapters
from rosetta.rollout.outcomes import append_line, signed_line

MODEL = "openai/gpt-4o"
REPORT = {"report": "SQL injection in the login form lets an unauthenticated attacker bypass authentication."}
GOOD = json.dumps({"severity": "high", "rationale": "Unauthenticated SQL injection in the login form."})


def compile_agent(tree: Path, *models: str) -> None:
    options = CompileOptions(out=tree / "compiled", root=tree, adapters=load_adapters(), models=models or (MODEL,))
    assert compile_paths([tree / "signatures" / "vuln-triage.md"], options, jobs=1).exit_code() == 0


def artifact_of(tree: Path) -> Path:
    return tree / "compiled" / "vuln-triage" / "openai" / "gpt-4o.yaml"


def version_of(path: Path) -> str:
    return read_header(path.read_text(encoding="utf-8")).content_sha256


def edit_definition(tree: Path, old: str = "precise and neutral", new: str = "calm") -> None:
    source = tree / "signatures" / "vuln-triage.md"
    text = source.read_text(encoding="utf-8")
    assert old in text
    source.write_text(text.replace(old, new), encoding="utf-8")


@dataclass(frozen=True)
class Versions:
    """The project and its two versions: ``old`` (kept) and ``new`` (the compiled artifact)."""

    tree: Path
    artifact: Path
    old: str
    new: str

    def rollout(self, text: str) -> Path:
        """Write the rollout file beside the artifact."""
        path = self.artifact.with_name("gpt-4o.rollout.yaml")
        path.write_text(text, encoding="utf-8")
        return path


@pytest.fixture
def versions(tree: Path) -> Versions:
    compile_agent(tree)
    old = version_of(artifact_of(tree))
    edit_definition(tree)
    compile_agent(tree)
    new = version_of(artifact_of(tree))
    assert old != new
    return Versions(tree, artifact_of(tree), old, new)


def variant(tree: Path, **knobs: object) -> str:
    """Keep a variant of the current definition (rendered with ``knobs``, recorded as a search records
    them) as a version of the artifact; its id. Unlike a version of an earlier definition, it is what
    the sources render now, so the strict runtime serves it."""
    from dataclasses import replace

    from rosetta.definition.loader import load_definition
    from rosetta.providers.catalog import catalog_for
    from rosetta.render.prompt import Knobs
    from rosetta.render.renderer import render
    from rosetta.signature import lower
    from rosetta.store import verify
    from rosetta.store.artifact import dump_artifact
    from rosetta.store.publish import publish_version

    definition = load_definition(tree / "signatures" / "vuln-triage.md", root=tree)
    model = catalog_for(tree, {}).resolve(MODEL)
    adapter = load_adapters()[model.adapter]
    chosen = Knobs(**knobs)
    provenance = replace(verify.expected_provenance(definition, model, adapter, tree, {}), knobs=chosen.to_dict())
    prompt = render(lower(definition), model, chosen)
    text = dump_artifact(verify.artifact_of(lower(definition), adapter, provenance, prompt))
    publish_version(artifact_of(tree), text, tree / "compiled")
    return read_header(text).content_sha256


def log_arm(path: Path, arm: str | None, version: str, *, successes: int, failures: int,
            experiment: str | None = "exp-1", latency: float = 1.0, model: str = MODEL) -> None:
    """Append outcome lines for one arm: ``successes`` with success true, ``failures`` false (signed
    with the project's key, as ``record_outcome`` signs them, when ``path`` is a project's own log)."""
    own = path.parent.name == "outcomes" and path.parent.parent.name == ".rosetta"
    for number in range(successes + failures):
        line = json.dumps({
            "ts": "2025-01-01T00:00:00+00:00", "agent": "vuln-triage", "model": model, "experiment": experiment,
            "arm": arm, "version": version, "valid": True, "retries": 0, "latency_s": latency + 0.01 * (number % 7),
            "cost_usd": None, "success": number < successes, "score": None})
        append_line(path, signed_line(line, path.parents[2]) if own else line)
