"""Rendering an artifact again from its sources: the one way to tell a sealed prompt is what its
sources compile to (a seal can be recomputed after an edit, and every field of an artifact,
``dataset_sha256`` and ``optimizer`` included, can be written by whoever edits it). ``rosetta
compile --check`` does it for every artifact, version and pin; the strict runtime does it before it
first serves any of them. Both call :func:`reproduce`, so both reach the same verdict."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from rosetta.store.artifact import (
    COMPILER_VERSION,
    Artifact,
    Provenance,
    changed_inputs,
    dump_artifact,
    model_fingerprint,
    target_inputs,
)

UP_TO_DATE, STALE, INVALID = "up to date", "stale", "invalid"


def relative_to(path: str | Path, root: Path) -> str:
    """A stable, machine-independent name for a source file (relative to the project root)."""
    return os.path.relpath(os.path.realpath(path), os.path.realpath(root)).replace(os.sep, "/")


def expected_provenance(definition: Any, model: Any, adapter: Any, root: Path, section_roles: Any,
                        source_sha: str | None = None) -> Provenance:
    """The provenance a compile of ``definition`` for ``model`` records now (search records empty);
    ``source_sha``, the definition's :func:`~rosetta.signature.source_digest`, when already known."""
    from rosetta.signature import source_digest

    source_sha = source_sha or source_digest(definition)
    return Provenance(inputs_sha256=target_inputs(source_sha, model, adapter.sha256, section_roles),
                      source_sha256=source_sha, source_files=tuple(relative_to(f, root) for f in definition.source.files),
                      adapter_sha256=adapter.sha256, model_sha256=model_fingerprint(model),
                      compiler_version=COMPILER_VERSION)


def artifact_of(signature: Any, adapter: Any, provenance: Provenance, prompt: Any) -> Artifact:
    """The artifact of ``signature`` rendered as ``prompt`` (one recipe for the compiler and the check)."""
    return Artifact(agent=signature.name, version=signature.version, model=prompt.model, adapter=adapter.name,
                    provenance=provenance, prompt=prompt, extensions=signature.extensions)


def render_again(artifact: Artifact, expected: Provenance, signature: Any, model: Any, adapter: Any,
                 demos: tuple[Any, ...]) -> str:
    """The artifact text a compile would write now, with the search's records (knobs, scores,
    budget) taken from the artifact: they describe a search, which is not repeated. ``demos`` are
    those the render may choose from (an optimized artifact's come from its labeled data)."""
    from rosetta.render.renderer import render

    recorded = artifact.provenance
    knobs = artifact.prompt.knobs if recorded.optimizer or recorded.knobs else None
    prompt = render(signature.model_copy(update={"demos": demos}), model, knobs, adapters={adapter.name: adapter})
    provenance = replace(expected, knobs=recorded.knobs, dataset_sha256=recorded.dataset_sha256,
                         scores=recorded.scores, budget=recorded.budget, optimizer=recorded.optimizer)
    return dump_artifact(artifact_of(signature, adapter, provenance, prompt))


def labeled_demos(artifact: Artifact, signature: Any, dataset: str | None,
                  cache_dir: Path | None) -> tuple[tuple[Any, ...] | None, str]:
    """The demos an artifact may draw on: the definition's, and for one that says it was searched on
    labeled data, the train rows of that data. (None, why) when that data is absent or changed:
    whatever an artifact claims about itself is checked, never taken as a reason to skip a check."""
    recorded = artifact.provenance.dataset_sha256
    if not recorded:
        return signature.demos, ""
    from rosetta.datasets import DatasetError, load_labeled
    from rosetta.parts import Demo

    if dataset is None:
        return None, "it names labeled data (dataset_sha256) and no datasets directory was given to check it against"
    try:
        data = load_labeled(signature, dataset, cache_dir=cache_dir, required=())
    except DatasetError as error:
        return None, f"the labeled data it names cannot be read: {error.problems[0].message}"
    if data.sha256 != recorded:
        return None, f"the labeled data at {dataset} is not the data it says it was optimized on (dataset_sha256)"
    return signature.demos + tuple(Demo(id=f"train:{e.id}", inputs=e.inputs, output=e.output) for e in data.train), ""


def reproduce(artifact: Artifact, text: str, expected: Provenance, signature: Any, model: Any, adapter: Any,
              *, dataset: str | None, cache_dir: Path | None = None) -> tuple[str, str]:
    """(status, why) for an artifact whose seal, identity and path were checked: ``up to date`` only
    when ``text`` is byte for byte what its sources (and labeled data) render to now; ``stale`` when
    an input changed since it was compiled; ``invalid`` when it differs or cannot be rendered again.
    A prompt that cannot be rendered again is never passed: that is what a forgery looks like."""
    from rosetta.errors import RosettaError

    stale = changed_inputs(artifact.provenance, expected)
    if stale:
        return STALE, stale
    if artifact.prompt.knobs.instructions not in (None, signature.description):  # the terse candidate is a source
        return INVALID, ("its instructions were written by a proposer model during a search; no source holds them, "
                         "so they cannot be verified (put them in the definition's body to make them a source)")
    demos, why = labeled_demos(artifact, signature, dataset, cache_dir)
    if demos is None:
        return INVALID, f"it cannot be verified: {why}"
    try:
        wanted = render_again(artifact, expected, signature, model, adapter, demos)
    except RosettaError as error:  # e.g. demos a model answered during a search, which no source holds
        return INVALID, (f"its prompt cannot be rendered again from its sources and labeled data: "
                         f"{error.problems[0].message}")
    if wanted != text:
        return INVALID, (f"it differs from what its sources compile to now, at `{first_difference(wanted, text)}` "
                         "(edited after compiling, or rendered by an older rosetta)")
    return UP_TO_DATE, ""


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


def _differing_path(ours: Any, theirs: Any, at: tuple[Any, ...]) -> tuple[Any, ...] | None:
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
