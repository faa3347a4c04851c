"""The incremental compiler: every agent × target model → a sealed artifact under ``compiled/``.

An artifact is rebuilt only when its inputs changed: the definition's files, the adapter file, the
model's catalog entry, the compiler version, knobs or project section-role overrides, all folded
into ``inputs_sha256``. Up-to-date checks read one line of each artifact and never render. Writes go
through a temp file and a rename, under one lock per output tree, so concurrent compiles of the
same tree leave only complete files.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Any

from rosetta.__about__ import __version__
from rosetta.errors import DefinitionError, RosettaError
from rosetta.store.artifact import (
    FORMAT,
    Artifact,
    Provenance,
    artifact_path,
    dump_artifact,
    inputs_digest,
    stored_header,
)
from rosetta.store.index import IndexEntry, files_digest, read_index
from rosetta.store.publish import publish, save_index

COMPILER_VERSION = f"{__version__}+format{FORMAT}"


class Status(StrEnum):
    """What happened to one (agent, model) target."""

    WRITTEN = "written"
    UP_TO_DATE = "up to date"
    MISSING = "missing"  # --check: no artifact
    STALE = "stale"  # --check: inputs changed since the artifact was written
    INVALID = "invalid"  # --check: tampered, truncated or unreadable artifact
    FAILED = "failed"  # the definition could not be loaded or the prompt could not be rendered


@dataclass(frozen=True)
class TargetResult:
    """The outcome for one agent on one model (or for a file that failed before targets existed)."""

    source: str
    agent: str | None
    model: str | None
    status: Status
    artifact: str | None = None
    message: str = ""
    warnings: tuple[str, ...] = ()  # what the rendered prompt could not carry or had to change


@dataclass
class CompileReport:
    """All target results, in discovery order."""

    results: list[TargetResult] = field(default_factory=list)

    def count(self, status: Status) -> int:
        return sum(1 for r in self.results if r.status is status)

    def exit_code(self) -> int:
        """0 all good, 1 targets failed or (with --check) are missing/stale/invalid."""
        bad = (Status.FAILED, Status.MISSING, Status.STALE, Status.INVALID)
        return 1 if any(r.status in bad for r in self.results) else 0


def relative_to(path: str | Path, root: Path) -> str:
    """A stable, machine-independent name for a source file (relative to the project root)."""
    return os.path.relpath(os.path.realpath(path), os.path.realpath(root)).replace(os.sep, "/")


@dataclass(frozen=True)
class CompileOptions:
    """Everything one compile needs besides the files; picklable for worker processes."""

    out: Path
    root: Path
    adapters: Mapping[str, Any]  # name → Adapter (see rosetta.providers.adapter.load_adapters)
    models: tuple[str, ...] = ()
    default_models: tuple[str, ...] = ()  # empty: the catalog's default_targets
    section_roles: Mapping[str, Any] = field(default_factory=dict)
    force: bool = False
    check: bool = False


def compile_paths(paths: Iterable[str | os.PathLike[str]], options: CompileOptions,
                  *, jobs: int | None = None) -> CompileReport:
    """Compile every agent found under ``paths``; results keep discovery order.

    Files whose sources and artifacts are unchanged are settled from the build index without
    parsing; the rest are loaded, rendered and written, on ``jobs`` processes when there are many.
    """
    from rosetta.definition.loader import discover_many

    found = discover_many(paths)
    index = read_index(options.out, COMPILER_VERSION)
    settled: dict[int, list[TargetResult]] = {}
    if not options.force:
        for position, (file, error) in enumerate(found):
            entry = index.get(relative_to(file, options.root)) if error is None else None
            results = _settle_from_index(file, entry, options) if entry else None
            if results is not None:
                settled[position] = results
    pending = [(position, file, error) for position, (file, error) in enumerate(found) if position not in settled]
    jobs = max(1, jobs or os.cpu_count() or 1)
    if jobs == 1 or len(pending) < 16:
        outcomes = [_compile_file(file, error, options) for _, file, error in pending]
    else:
        import multiprocessing

        context = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            outcomes = list(pool.map(_compile_file, [f for _, f, _ in pending], [e for _, _, e in pending],
                                     [options] * len(pending), chunksize=max(1, len(pending) // (jobs * 8))))
    for (position, file, _), (results, entry) in zip(pending, outcomes, strict=True):
        settled[position] = results
        if entry is not None:
            index[relative_to(file, options.root)] = entry
    if pending and not options.check:
        save_index(options.out, index, COMPILER_VERSION)
    return CompileReport([result for position in range(len(found)) for result in settled[position]])


def _defaults(options: CompileOptions) -> tuple[str, ...]:
    from rosetta.providers.catalog import load_catalog

    return options.default_models or load_catalog().default_targets


@lru_cache(maxsize=256)
def model_fingerprint(model: Any) -> str:
    """sha256 of a catalog entry (what the renderer knows about the model)."""
    return inputs_digest(model=asdict(model))


def _target_inputs(source_sha: str, model: Any, adapter: Any, knobs: dict[str, Any], options: CompileOptions) -> str:
    """The inputs hash of one target: equal hashes mean an identical artifact."""
    return inputs_digest(format=FORMAT, compiler=COMPILER_VERSION, source=source_sha, adapter=adapter.sha256,
                         model=model_fingerprint(model), knobs=knobs, section_roles=dict(options.section_roles))


def _settle_from_index(file: Path, entry: IndexEntry, options: CompileOptions) -> list[TargetResult] | None:
    """Up-to-date results without parsing, or None when anything needs a closer look."""
    from rosetta.providers.catalog import load_catalog

    if any((options.root / probe).exists() for probe in entry.probes):
        return None
    if files_digest(options.root, entry.files) != entry.source_sha256:
        return None
    results = []
    for name in dict.fromkeys(options.models or entry.preferences or _defaults(options)):
        try:
            model = load_catalog().resolve(name, dict(options.adapters))
        except RosettaError:
            return None
        adapter = options.adapters.get(model.adapter)
        if adapter is None:
            return None
        path = artifact_path(options.out, entry.agent, model.id)
        if _current_status(path, _target_inputs(entry.source_sha256, model, adapter, {}, options)) \
                is not Status.UP_TO_DATE:
            return None
        results.append(TargetResult(str(file), entry.agent, model.id, Status.UP_TO_DATE, str(path)))
    return results


def _compile_file(file: Path, error: DefinitionError | None,
                  options: CompileOptions) -> tuple[list[TargetResult], IndexEntry | None]:
    from rosetta.definition.formats import SIDECAR_SUFFIXES, stem_of
    from rosetta.definition.loader import load_definition
    from rosetta.providers.catalog import load_catalog
    from rosetta.signature import lower, source_digest

    if error is not None:
        return [TargetResult(str(file), None, None, Status.FAILED, message=str(error))], None
    try:
        definition = load_definition(file, root=options.root, section_roles=dict(options.section_roles))
        signature = lower(definition)
    except DefinitionError as failure:
        return [TargetResult(str(file), None, None, Status.FAILED, message=str(failure))], None
    adapters = dict(options.adapters)
    preferences = tuple(definition.spec.portability.model_preferences)
    targets = options.models or preferences or _defaults(options)
    source_sha = source_digest(definition)
    source_files = tuple(relative_to(f, options.root) for f in definition.source.files)
    probes = tuple(relative_to(file.with_name(stem_of(file) + suffix), options.root) for suffix in SIDECAR_SUFFIXES
                   if relative_to(file.with_name(stem_of(file) + suffix), options.root) not in source_files)
    entry = IndexEntry(signature.name, source_files, probes, source_sha, preferences)
    results = []
    for name in dict.fromkeys(targets):  # keep order, drop duplicates
        try:
            model = load_catalog().resolve(name, adapters)
        except RosettaError as failure:
            results.append(TargetResult(str(file), signature.name, name, Status.FAILED, message=str(failure)))
            continue
        adapter = adapters[model.adapter]
        knobs: dict[str, Any] = {}
        inputs_sha = _target_inputs(source_sha, model, adapter, knobs, options)
        path = artifact_path(options.out, signature.name, model.id)
        status = _current_status(path, inputs_sha)
        if status is Status.UP_TO_DATE and not options.force:
            results.append(TargetResult(str(file), signature.name, model.id, status, str(path)))
            continue
        if options.check:
            results.append(TargetResult(str(file), signature.name, model.id, status, str(path),
                                        _CHECK_MESSAGES[status]))
            continue
        results.append(_build(file, signature, model, adapter, path, inputs_sha, source_sha, source_files, knobs,
                              options))
    return results, entry


_CHECK_MESSAGES = {
    Status.MISSING: "no artifact; run `rosetta compile`",
    Status.STALE: "inputs changed since it was compiled; run `rosetta compile`",
    Status.INVALID: "artifact was edited, truncated or corrupted; run `rosetta compile --force`",
    Status.UP_TO_DATE: "",
}


def _current_status(path: Path, inputs_sha: str) -> Status:
    header = stored_header(path)
    if header is None:
        return Status.MISSING
    if not header.intact:
        return Status.INVALID
    return Status.UP_TO_DATE if header.inputs_sha256 == inputs_sha else Status.STALE


def _build(file: Path, signature: Any, model: Any, adapter: Any, path: Path, inputs_sha: str, source_sha: str,
           source_files: tuple[str, ...], knobs: dict[str, Any], options: CompileOptions) -> TargetResult:
    from rosetta.errors import RenderError
    from rosetta.render.render import render

    try:
        prompt = render(signature, model, adapters={adapter.name: adapter})
    except RenderError as failure:
        return TargetResult(str(file), signature.name, model.id, Status.FAILED, str(path), str(failure))
    artifact = Artifact(
        agent=signature.name, version=signature.version, model=model.id, adapter=adapter.name,
        provenance=Provenance(
            inputs_sha256=inputs_sha, source_sha256=source_sha, source_files=source_files,
            adapter_sha256=adapter.sha256, model_sha256=model_fingerprint(model),
            compiler_version=COMPILER_VERSION, knobs=knobs,
        ),
        prompt=prompt,
        extensions=signature.extensions,
    )
    publish(path, dump_artifact(artifact), options.out, replace=lambda: options.force or _current_status(
        path, inputs_sha) is not Status.UP_TO_DATE)
    return TargetResult(str(file), signature.name, model.id, Status.WRITTEN, str(path), warnings=prompt.warnings)
