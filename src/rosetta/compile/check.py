"""``rosetta compile --check``: is each artifact exactly what its sources compile to now?

An artifact's own claims are not trusted: its seal could have been recomputed after an edit. So
the check reads it as the runtime would (a plain file, sealed from its first byte, no duplicate
keys, this agent's and this model's), compares the inputs it records with what they hash to now —
for an optimized artifact, the labeled data too — then renders the prompt again from the sources
and the recorded knobs and compares bytes. A difference names the first field that differs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rosetta.errors import RosettaError
from rosetta.store.artifact import Artifact, ArtifactError, Provenance, changed_inputs, parse_artifact
from rosetta.store.verify import first_difference, render_again


def check_target(path: Path, expected: Provenance, signature: Any, model: Any, adapter: Any,
                 options: Any, dataset: str | None = None) -> tuple[str, str]:
    """(status, message) for the artifact at ``path``, the status a
    :class:`~rosetta.compile.compiler.Status` value; ``expected`` is the provenance a compile would
    record now and ``dataset`` where the agent's labeled examples are."""
    from rosetta.fileio import read_regular
    from rosetta.store.publish import inside

    try:
        inside(path, options.out)  # a symlinked folder on the way could hold anyone's artifact
        text = read_regular(path)
    except FileNotFoundError:
        return "missing", "no artifact; run `rosetta compile`"
    except ArtifactError as error:
        return "invalid", f"{error.problems[0].message}; {error.problems[0].hint}"
    except (OSError, UnicodeDecodeError) as exc:
        return "invalid", f"cannot be read ({exc}); delete it and run `rosetta compile`"
    try:
        artifact = parse_artifact(text, path=str(path))
    except ArtifactError as error:
        return "invalid", f"{error.problems[0].message}; run `rosetta compile --force`"
    rebuild = "rosetta compile --optimize --force" if artifact.provenance.optimizer else "rosetta compile --force"
    if artifact.agent != signature.name or artifact.model != model.id:
        return "invalid", (f"it is the artifact of {artifact.agent} on {artifact.model}, not of "
                                f"{signature.name} on {model.id} (copied or moved?); run `{rebuild}`")
    stale = changed_inputs(artifact.provenance, expected)
    if stale:
        return "stale", f"{stale}; run `{'rosetta compile' if not artifact.provenance.optimizer else rebuild}`"
    demos, note = labeled_demos(artifact, signature, options, dataset)
    if demos is None:
        return ("stale", f"{note}; run `{rebuild}`") if note else ("up to date", "")
    try:
        wanted = render_again(artifact, expected, signature, model, adapter, demos)
    except RosettaError as error:  # e.g. demos a search generated (bootstrapped), which no source holds
        return "up to date", f"seal and inputs verified; the prompt was not rendered again: {error.problems[0].message}"
    if wanted != text:
        return "invalid", (f"differs from what its sources compile to now, at `{first_difference(wanted, text)}` "
                           f"(edited after compiling, or rendered by an older rosetta); run `{rebuild}`")
    return "up to date", note


def labeled_demos(artifact: Artifact, signature: Any, options: Any, dataset: str | None) -> tuple[Any, str]:
    """The demos an optimized artifact may draw on (its train rows), checked against the data it was
    optimized on. (None, why) when the data changed; (demos, note) otherwise."""
    recorded = artifact.provenance.dataset_sha256
    if not recorded:
        return signature.demos, ""
    if dataset is None:
        return signature.demos, "labeled data not verified: no datasets directory given"
    from rosetta.compile.optimize.labeled import DatasetError, load_labeled
    from rosetta.signature import Demo

    try:
        data = load_labeled(signature, dataset, cache_dir=getattr(options, "cache_dir", None), required=())
    except DatasetError as error:
        return signature.demos, f"labeled data not verified: {error.problems[0].message}"
    if data.sha256 != recorded:
        return None, f"the labeled data at {dataset} changed since it was optimized on it"
    return signature.demos + tuple(Demo(id=f"train:{e.id}", inputs=e.inputs, output=e.output) for e in data.train), ""
