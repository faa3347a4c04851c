"""Runtime policy per model class, read from ``runtime_policy.yaml`` (data, not code): what the
runtime does around a call, as opposed to the adapters' rules for what the prompt is."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

from rosetta.definition.yaml_source import parse_yaml


@functools.cache
def _policy() -> dict[str, Any]:
    path = resources.files("rosetta.providers") / "runtime_policy.yaml"
    data, _ = parse_yaml(path.read_text(encoding="utf-8"), file=str(path))
    return data


def validation_retries(model_class: str) -> int:
    """Corrections after an answer that does not validate, when the caller sets none."""
    table = _policy()["validation_retries"]
    return int(table.get(model_class, table["mid"]))
