"""``rosetta compile --check``: is each artifact exactly what its sources compile to now?

An artifact's own claims are not trusted: its seal could have been recomputed after an edit. So
the check reads it as the runtime would (a plain file, sealed from its first byte, no duplicate
keys, this agent's and this model's), compares the inputs it records with what they hash to now —
for an optimized artifact, the labeled data too — then renders the prompt again from the sources
and the recorded knobs and compares bytes. A difference names the first field that differs.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from rosetta.store.artifact import Artifact, ArtifactError, Provenance, changed_inputs, dump_artifact, parse_artifact


def artifact_of(signature: Any, adapter: Any, provenance: Provenance, prompt: Any) -> Artifact:
    """The artifact of ``signature`` rendered as ``prompt`` (one recipe for the compiler and the check)."""
    return Artifact(agent=signature.name, version=signature.version, model=prompt.model, adapter=adapter.name,
                    provenance=provenance, prompt=prompt, extensions=signature.extensions)


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
    demos, note = _labeled_demos(artifact, signature, options, dataset)
    if demos is None:
        return ("stale", f"{note}; run `{rebuild}`") if note else ("up to date", "")
    try:
        wanted = _render_again(artifact, expected, signature, model, adapter, demos)
    except Exception as exc:  # noqa: BLE001 (a knob the renderer refuses now is a finding, not a crash)
        return "up to date", f"seal and inputs verified; the prompt was not rendered again: {exc}"
    if wanted != text:
        return "invalid", (f"differs from what its sources compile to now, at `{first_difference(wanted, text)}` "
                           f"(edited after compiling, or rendered by an older rosetta); run `{rebuild}`")
    return "up to date", note


def _labeled_demos(artifact: Artifact, signature: Any, options: Any, dataset: str | None) -> tuple[Any, str]:
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


def _render_again(artifact: Artifact, expected: Provenance, signature: Any, model: Any, adapter: Any,
                  demos: tuple[Any, ...]) -> str:
    """The artifact text a compile would write now, with the search's records (knobs, scores,
    budget) taken from the artifact: they describe a search, which is not repeated."""
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
