"""Rendering an artifact again from its sources: the one way to tell a sealed prompt is what its
sources compile to (a seal can be recomputed after an edit). ``rosetta compile --check`` does it
for every artifact; the runtime does it in strict mode before it first serves one."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rosetta.store.artifact import Artifact, Provenance, dump_artifact


def artifact_of(signature: Any, adapter: Any, provenance: Provenance, prompt: Any) -> Artifact:
    """The artifact of ``signature`` rendered as ``prompt`` (one recipe for the compiler and the check)."""
    return Artifact(agent=signature.name, version=signature.version, model=prompt.model, adapter=adapter.name,
                    provenance=provenance, prompt=prompt, extensions=signature.extensions)


def render_again(artifact: Artifact, expected: Provenance, signature: Any, model: Any, adapter: Any,
                 demos: tuple[Any, ...]) -> str:
    """The artifact text a compile would write now, with the search's records (knobs, scores,
    budget) taken from the artifact: they describe a search, which is not repeated. ``demos`` are
    those the render may choose from (an optimized artifact's come from its labeled data)."""
    from rosetta.render.render import render

    recorded = artifact.provenance
    knobs = artifact.prompt.knobs if recorded.optimizer or recorded.knobs else None
    prompt = render(signature.model_copy(update={"demos": demos}), model, knobs, adapters={adapter.name: adapter})
    provenance = replace(expected, knobs=recorded.knobs, dataset_sha256=recorded.dataset_sha256,
                         scores=recorded.scores, budget=recorded.budget, optimizer=recorded.optimizer)
    return dump_artifact(artifact_of(signature, adapter, provenance, prompt))


def first_difference(wanted: str, found: str) -> str:
    """The dotted path of the first field whose value differs between two artifact texts."""
    from rosetta.definition.yaml_source import parse_yaml

    try:
        ours, theirs = parse_yaml(wanted, file="<fresh>")[0], parse_yaml(found, file="<artifact>")[0]
    except Exception:  # noqa: BLE001 (unparseable: fall back to the first differing line)
        ours, theirs = None, None
    if isinstance(ours, dict) and isinstance(theirs, dict):  # the seal differs whenever anything does
        ours, theirs = ({k: v for k, v in d.items() if k != "content_sha256"} for d in (ours, theirs))
    path = _differing_path(ours, theirs, ()) if ours is not None else None
    if path is not None:
        return ".".join(str(p) for p in path) or "(top level)"
    line = next((n for n, (a, b) in enumerate(zip(wanted.splitlines(), found.splitlines()), 1) if a != b),
                min(len(wanted.splitlines()), len(found.splitlines())) + 1)
    return f"line {line}"


def _differing_path(ours: Any, theirs: Any, at: tuple) -> tuple | None:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in [*ours, *(k for k in theirs if k not in ours)]:
            if key not in ours or key not in theirs:
                return (*at, key)
            found = _differing_path(ours[key], theirs[key], (*at, key))
            if found is not None:
                return found
        return None
    if isinstance(ours, list) and isinstance(theirs, list):
        for index, (a, b) in enumerate(zip(ours, theirs)):
            found = _differing_path(a, b, (*at, index))
            if found is not None:
                return found
        return (*at, min(len(ours), len(theirs))) if len(ours) != len(theirs) else None
    return None if ours == theirs and type(ours) is type(theirs) else at
