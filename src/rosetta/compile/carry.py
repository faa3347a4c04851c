"""An optimized artifact whose inputs changed: carried over when the change leaves its prompt as
it was, never silently replaced by an unoptimized render.

A search costs hours on a local model and money on a hosted one. Editing a definition's
``model_preferences`` (or anything else that is not rendered for this model), or an adapter field
no render reads, changes the artifact's inputs hash, and used to send it back to square one. When
the sources, rendered again with the artifact's recorded knobs and the labeled data it was searched
on, give the very same prompt, the scores it records are still the scores of the prompt it serves
(under the decoder build they name): the artifact is rewritten with the new provenance and a note
naming the inputs it was carried over from. Anything else is left for ``--optimize`` (search
again) or ``--force`` (replace it with the unoptimized render).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from rosetta.errors import RosettaError
from rosetta.store.artifact import (
    Artifact,
    ArtifactError,
    Provenance,
    changed_inputs,
    dump_artifact,
    parse_artifact,
)


def optimized_artifact(path: Path) -> Artifact | None:
    """The optimized artifact at ``path``; None when there is none (or it cannot be read)."""
    from rosetta.store.artifact import read_stored_artifact

    try:
        artifact = parse_artifact(read_stored_artifact(path), path=str(path))
    except (ArtifactError, OSError, UnicodeDecodeError):
        return None
    return artifact if artifact.provenance.optimizer else None


def carry_over(artifact: Artifact, expected: Provenance, signature: Any, model: Any, adapter: Any,
               options: Any, dataset: str | None) -> tuple[str | None, str]:
    """(artifact text to write, note) when ``artifact`` carries over to the provenance a compile
    records now (``expected``); (None, why not) otherwise."""
    from rosetta.store.verify import labeled_demos, render_again

    recorded = artifact.provenance
    if recorded.compiler_version != expected.compiler_version:
        return None, f"it was optimized by rosetta {recorded.compiler_version}"
    demos, note = labeled_demos(artifact, signature, dataset, getattr(options, "cache_dir", None))
    if demos is None:
        return None, note
    try:
        fresh = parse_artifact(render_again(artifact, expected, signature, model, adapter, demos), path="<fresh>")
    except RosettaError as error:
        return None, f"its prompt cannot be rendered again: {error.problems[0].message}"
    if fresh.prompt != artifact.prompt:
        return None, "the change alters its prompt"
    note = (f"carried over from inputs {recorded.inputs_sha256[:12]} to {expected.inputs_sha256[:12]}: "
            f"{changed_inputs(recorded, expected)}, but this prompt renders byte for byte as it was searched "
            "(`rosetta compile --optimize --force` searches again)")
    optimizer = {**recorded.optimizer, "notes": [*recorded.optimizer.get("notes", ()), note]}
    return dump_artifact(replace(fresh, provenance=replace(fresh.provenance, optimizer=optimizer))), note
