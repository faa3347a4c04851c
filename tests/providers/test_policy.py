"""Runtime policy is data: the runtime reads providers/runtime_policy.yaml, and nothing repeats it."""

from __future__ import annotations

from pathlib import Path

import yaml

from conftest import REPO
from rosetta.definition import load_definition
from rosetta.render import render
from rosetta.runtime.runner import default_validation_retries
from rosetta.signature import lower

POLICY = yaml.safe_load((Path(REPO) / "src/rosetta/providers/runtime_policy.yaml").read_text(encoding="utf-8"))


def test_validation_retries_per_model_class_come_from_the_policy_file():
    signature = lower(load_definition(REPO / "signatures" / "vuln-triage.md"))
    for model in ("sonnet", "haiku", "ollama/llama3.1"):
        prompt = render(signature, model)
        assert default_validation_retries(prompt) == POLICY["validation_retries"][prompt.model_class]
