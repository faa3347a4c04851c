"""``rosetta compile --check``: is each artifact, and everything beside it that can be served, exactly
what its sources compile to now?

Nothing an artifact says about itself is trusted: its seal could have been recomputed after an edit,
and ``dataset_sha256`` or ``optimizer`` written by hand. So the check reads each file as the runtime
would (a plain file reached without a symlink, sealed from its first byte, no duplicate keys, this
agent's and this model's, at its own path), compares the inputs it records with what they hash to
now, then renders the prompt again from the sources — for one optimized on labeled data, from that
data too — and compares bytes (:func:`rosetta.store.verify.reproduce`). A prompt that cannot be
rendered again fails. The same holds for the retained versions that were compiled from the current
sources, for every version the rollout file pins (a pin to a version of an earlier definition serves
what no source says, and is reported), and for stray copies of the artifact saved under other names.

Every artifact under ``compiled/`` is checked, not only those of the models an agent targets: one
built with ``--model X`` goes stale like the others, and one that no definition or no resolvable
model stands behind any more (an orphan) would be served, or fallen back from, without a word.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rosetta.store.artifact import Artifact, ArtifactError, Provenance
from rosetta.store.verify import INVALID, STALE, UP_TO_DATE, reproduce


def check_target(path: Path, expected: Provenance, signature: Any, model: Any, adapter: Any,
                 options: Any, dataset: str | None = None, *, targeted: bool = True) -> tuple[str, str]:
    """(status, message) for the artifact at ``path`` and the files beside it, the status a
    :class:`~rosetta.compile.compiler.Status` value; ``expected`` is the provenance a compile would
    record now and ``dataset`` where the agent's labeled examples are. ``targeted`` is false for an
    artifact of a model the agent's compile does not build by default (one made with ``--model``)."""
    from rosetta.fileio import read_trusted

    flags = "" if targeted else f" --model {model.id} {' '.join(expected.source_files[:1])}"
    try:
        text = read_trusted(path, options.out)
    except FileNotFoundError:
        status, message = "missing", f"no artifact; run `rosetta compile{flags}`"
    except (OSError, UnicodeDecodeError) as exc:
        status, message = INVALID, f"cannot be read ({exc}); delete it and run `rosetta compile{flags}`"
    else:
        status, message = _check_text(text, path, expected, signature, model, adapter, options, dataset, flags)
    if flags and status != UP_TO_DATE:
        message += " (it was compiled with --model: the agent's model_preferences do not name it), or delete it"
    problems = _beside(path, expected, signature, model, adapter, options, dataset)
    if problems and status in (UP_TO_DATE, "missing", STALE):
        status = INVALID if status == UP_TO_DATE else status
    return status, "; ".join(m for m in (message, *problems) if m)


def _check_text(text: str, path: Path, expected: Provenance, signature: Any, model: Any, adapter: Any,
                options: Any, dataset: str | None, flags: str) -> tuple[str, str]:
    from rosetta.store.versions import placed_artifact

    try:
        artifact = placed_artifact(text, path, agent=signature.name, model=model.id)
    except ArtifactError as error:
        return INVALID, f"{error.problems[0].message}; run `rosetta compile --force{flags}`"
    status, why = reproduce(artifact, text, expected, signature, model, adapter, dataset=dataset,
                            cache_dir=getattr(options, "cache_dir", None))
    if status == UP_TO_DATE:
        return status, ""
    return status, f"{why}; run `{_rebuild(artifact, status)}{flags}`"


def _rebuild(artifact: Artifact, status: str) -> str:
    if not artifact.provenance.optimizer:
        return "rosetta compile" if status == STALE else "rosetta compile --force"
    return "rosetta compile --optimize --force"


def _beside(path: Path, expected: Provenance, signature: Any, model: Any, adapter: Any, options: Any,
            dataset: str | None) -> list[str]:
    """What is wrong with the files beside the artifact that could be served in its place: retained
    versions, the rollout file and the versions it pins, and stray copies under other names."""
    from rosetta.errors import Location, Problem, RosettaError
    from rosetta.fileio import read_trusted
    from rosetta.store.lookup import scan
    from rosetta.store.pins import read_rollout
    from rosetta.store.versions import known_ids, placed_artifact, rollout_path, short_id

    problems: list[str] = []
    versions: dict[str, tuple[str, str]] = {}  # id → (status, why) of each kept version
    ids = known_ids(path)
    for version_id, file in ids.items():
        if file == path:
            continue
        try:
            text = read_trusted(file, options.out)
            kept = placed_artifact(text, file, agent=signature.name, model=model.id)
            if kept.content_sha256 != version_id:
                raise ArtifactError(Problem(f"it holds version {short_id(kept.content_sha256)}", Location(str(file))))
        except (OSError, UnicodeDecodeError, ArtifactError) as exc:
            problems.append(f"{file}: {exc.problems[0].message if isinstance(exc, ArtifactError) else exc}; delete it")
            continue
        if kept.provenance.source_sha256 != expected.source_sha256:
            versions[version_id] = (STALE, "it was compiled from an earlier definition")
            continue  # history: kept so that a rollout can go back to it, not claimed to match the sources
        versions[version_id] = reproduce(kept, text, expected, signature, model, adapter, dataset=dataset,
                                         cache_dir=getattr(options, "cache_dir", None))
        if versions[version_id][0] == INVALID:
            problems.append(f"version {file}: {versions[version_id][1]}; delete it")
    for stray, named in scan(options.out, signature.name)[1].items():
        if named == model.id:
            problems.append(f"{stray} is a copy of the artifact of {model.id} under another name; delete it")
    try:
        rollout = read_rollout(rollout_path(path))
    except RosettaError as error:
        return [*problems, f"{rollout_path(path)}: {error.problems[0].message}; fix or delete it"]
    if rollout is None:
        return problems
    current = next((i for i, f in ids.items() if f == path), None)
    pinned = [("active", rollout.active)] + ([("experiment.treatment", rollout.experiment.treatment)]
                                             if rollout.experiment else [])
    for field, prefix in pinned:
        match = [i for i in ids if i.startswith(prefix)]
        if len(match) != 1:
            problems.append(f"{rollout_path(path).name} `{field}` pins {prefix}, which is not one retained version")
        elif match[0] != current and versions.get(match[0], (INVALID, ""))[0] != UP_TO_DATE:
            problems.append(f"{rollout_path(path).name} `{field}` pins version {short_id(match[0])}, which is not what "
                            f"the sources compile to now ({versions.get(match[0], (INVALID, 'unreadable'))[1]}): it "
                            "would be served in place of the compiled artifact")
    return problems


ORPHAN = "orphan"


def unresolvable(path: Path, model: str, failure: Any) -> str:
    """Why the artifact at ``path``, compiled for ``model``, is an orphan: the model cannot be
    resolved now (``failure``: the error resolving it raised), so no compile or run reaches it."""
    problem = failure.problems[0]
    return (f"compiled for {model}, which `rosetta compile` refuses now: {problem.message}; delete {path} (with its "
            f".versions/ and .rollout.yaml), or make the model resolvable again: "
            f"{problem.hint or 'declare it in [tool.rosetta.models] or accept it in unlisted_models'}")


def orphaned(paths: Iterable[str | os.PathLike[str]], checked: Mapping[Path, str | None],
             options: Any) -> list[tuple[str, str, str, str, str, str]]:
    """(source, agent, model, status, artifact, message) for each artifact under ``options.out``
    whose agent no checked definition names: ``checked`` maps every file checked to the agent it
    defines (None: it could not be loaded, which is reported already). An artifact is an orphan when
    the definition it was compiled from is gone, names another agent now, or is no agent at all; one
    whose definition lies outside ``paths`` (a check of part of the tree) is not judged. An artifact
    that cannot be read says whose it is to no one, so it is reported (invalid) whatever the paths."""
    from rosetta.fileio import read_trusted
    from rosetta.store.lookup import compiled_models
    from rosetta.store.versions import placed_artifact

    scope = [Path(os.path.realpath(p)) for p in paths]
    defines = {Path(os.path.realpath(file)): agent for file, agent in checked.items()}
    claimed = set(defines.values())
    found = []
    for agent, models in compiled_models(options.out).items():
        if agent in claimed:
            continue  # its artifacts were checked with its definition
        for model, path in models.items():
            try:
                sources = placed_artifact(read_trusted(path, options.out), path, agent=agent,
                                          model=model).provenance.source_files
            except (OSError, UnicodeDecodeError, ArtifactError) as exc:
                why = exc.problems[0].message if isinstance(exc, ArtifactError) else f"cannot be read ({exc})"
                found.append(("", agent, model, INVALID, str(path), f"{why}; delete it"))
                continue
            why = _gone(sources[0] if sources else "", scope, defines, options.root)
            if why is not None:
                found.append((sources[0] if sources else "", agent, model, ORPHAN, str(path), (
                    f"no definition names agent {agent!r}: {why}; delete {path.parent.parent} (its artifacts, "
                    "versions and rollout files), or restore the definition and run `rosetta compile`")))
    return found


def _gone(source: str, scope: list[Path], defines: Mapping[Path, str | None], root: Path) -> str | None:
    """What became of the definition an artifact was compiled from (``source``, relative to the project
    root), or None when it is not this check's to judge: outside the checked paths, or unloadable."""
    relative = Path(source)
    if not source or relative.is_absolute() or ".." in relative.parts:
        return f"it names no definition file inside the project ({source!r})"
    file = Path(os.path.realpath(root / relative))
    if file in defines:
        return None if defines[file] is None else f"{source} now defines agent {defines[file]!r}"
    if not os.path.lexists(file):
        return f"its definition {source} is gone"
    if not any(file == s or file.is_relative_to(s) for s in scope):
        return None
    return f"{source} is no longer an agent definition"
