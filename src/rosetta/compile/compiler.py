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
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from rosetta.errors import DefinitionError, RosettaError
from rosetta.store.artifact import (
    COMPILER_VERSION,
    ArtifactError,
    Provenance,
    artifact_path,
    dump_artifact,
    stored_header,
    target_inputs,
)
from rosetta.store.index import IndexEntry, files_digest, read_index
from rosetta.store.publish import save_index
from rosetta.store.verify import expected_provenance, relative_to


class Status(StrEnum):
    """What happened to one (agent, model) target."""

    WRITTEN = "written"
    UP_TO_DATE = "up to date"
    MISSING = "missing"  # --check: no artifact
    STALE = "stale"  # --check: inputs changed since the artifact was written
    INVALID = "invalid"  # --check: tampered, truncated or unreadable artifact
    ORPHAN = "orphan"  # --check: an artifact no definition or no resolvable model stands behind
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
        """0 all good, 1 targets failed or (with --check) are missing/stale/invalid/orphaned."""
        bad = (Status.FAILED, Status.MISSING, Status.STALE, Status.INVALID, Status.ORPHAN)
        return 1 if any(r.status in bad for r in self.results) else 0


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
    check: bool = False  # verify the artifacts instead of writing them (see rosetta.compile.check)
    unlisted: tuple[str, ...] = ("*",)  # patterns of ids outside the catalog to accept ("*": any litellm routes)
    datasets_dir: Path | None = None  # where --check finds the labeled data optimized artifacts were searched on
    cache_dir: Path | None = None  # HF datasets' cache, for reading that data
    declared_models: Mapping[str, Any] = field(default_factory=dict)  # the project's [tool.rosetta.models]

    @classmethod
    def for_settings(cls, settings: Any, *, adapter_dirs: Iterable[Path] = (), **overrides: Any) -> CompileOptions:
        """The options `rosetta compile` takes from a project's settings (``rosetta.settings.Settings``),
        with ``adapter_dirs`` loaded beside the project's and ``overrides`` on top: one recipe for
        compile and for the gate `rosetta validate` shares with it."""
        from rosetta.providers.adapter import load_adapters

        options = cls(**{"out": settings.compiled_dir, "root": settings.root,
                         "adapters": load_adapters([*settings.adapter_dirs, *adapter_dirs]),
                         "default_models": tuple(settings.default_models),
                         "section_roles": dict(settings.section_roles), "unlisted": tuple(settings.unlisted_models),
                         "datasets_dir": settings.datasets_dir, "cache_dir": settings.cache_dir,
                         "declared_models": dict(settings.models), **overrides})
        options.refuse_unknown_environment_defaults()
        return options

    def refuse_unknown_environment_defaults(self) -> None:
        """``$ROSETTA_DEFAULT_MODELS`` may hold a key pasted into the wrong variable, and a value from
        the environment is never quoted: an entry that names no model is refused here, by its
        position, before any target, report or later error could show it."""
        from rosetta.errors import ConfigError, Location, Problem
        from rosetta.settings import ENV_PREFIX

        variable = f"{ENV_PREFIX}DEFAULT_MODELS"
        if variable not in os.environ:
            return
        catalog = self.catalog()
        for number, name in enumerate(self.default_models, 1):
            try:
                catalog.resolve(name, dict(self.adapters), unlisted=self.unlisted)
            except RosettaError:
                raise ConfigError(Problem(
                    f"entry {number} of {len(self.default_models)} names no model rosetta or litellm knows, or one "
                    "the project does not accept (its value is not shown: it may be a key pasted into the wrong "
                    "variable)", Location(f"${variable}"),
                    expected="comma-separated model ids", hint="`rosetta models` lists them; e.g. "
                    f"{variable}=anthropic/claude-sonnet-5-5,openai/gpt-5.6")) from None

    def catalog(self) -> Any:
        """The model catalog with the project's declared models."""
        from rosetta.providers.catalog import catalog_for

        return catalog_for(self.root, self.declared_models)


def compile_paths(paths: Iterable[str | os.PathLike[str]], options: CompileOptions,
                  *, jobs: int | None = None) -> CompileReport:
    """Compile (or, with ``options.check``, verify) every agent found under ``paths``; results keep
    discovery order.

    Files whose sources and artifacts are unchanged are settled from the build index without
    parsing; the rest are loaded and rendered, on ``jobs`` processes when there are many. Artifacts
    are staged by the workers and moved into place here, once no two files claim one agent name.
    """
    from rosetta.definition.discovery import discover_many
    from rosetta.store.publish import clean_stale_temporaries

    paths = list(paths)
    found = discover_many(paths)
    if not options.check:
        clean_stale_temporaries(options.out)
    index = read_index(options.out, COMPILER_VERSION)
    outcomes: dict[int, FileOutcome] = {}
    if not options.force and not options.check:
        for position, (file, error) in enumerate(found):
            entry = index.get(relative_to(file, options.root)) if error is None else None
            results = _settle_from_index(file, entry, options) if entry else None
            if results is not None:
                outcomes[position] = FileOutcome(results, entry)
    pending = [(position, file, error) for position, (file, error) in enumerate(found) if position not in outcomes]
    jobs = max(1, jobs or os.cpu_count() or 1)
    if jobs == 1 or len(pending) < 16:
        done = [_compile_file(file, error, options) for _, file, error in pending]
    else:
        import multiprocessing

        context = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            done = list(pool.map(_compile_file, [f for _, f, _ in pending], [e for _, _, e in pending],
                                 [options] * len(pending), chunksize=max(1, len(pending) // (jobs * 8))))
    outcomes.update((position, outcome) for (position, _, _), outcome in zip(pending, done, strict=True))
    ordered = [(found[position][0], outcomes[position]) for position in range(len(found))]
    clashes = _refuse_name_clashes(ordered)
    if any(outcome.staged for _, outcome in ordered):
        from rosetta.store.publish import locked

        with locked(options.out):  # once for all: the renames are quick, the fsyncs happened while staging
            for _, outcome in ordered:
                _publish(outcome, options)
    orphans: list[TargetResult] = []
    if options.check:
        from rosetta.compile.check import orphaned

        _check_index(ordered, index, options)
        orphans = [TargetResult(source, agent, model, Status(status), artifact, message) for
                   source, agent, model, status, artifact, message in
                   orphaned(paths, {file: o.entry.agent if o.entry else None for file, o in ordered}, options)]
    for file, outcome in ordered:
        key = relative_to(file, options.root)
        if file in clashes:
            index.pop(key, None)
        elif outcome.entry is not None:
            index[key] = outcome.entry
    if pending and not options.check:
        save_index(options.out, index, COMPILER_VERSION)
    return CompileReport([result for _, outcome in ordered for result in outcome.results] + orphans)


@dataclass
class FileOutcome:
    """One definition file's results, its index entry, and the artifacts its worker staged."""

    results: list[TargetResult]
    entry: IndexEntry | None = None
    staged: dict[int, tuple[Any, str]] = field(default_factory=dict)  # result position → (Staged, inputs hash)


def _check_index(ordered: list[tuple[Path, FileOutcome]], index: dict[str, IndexEntry], options: CompileOptions) -> None:
    """``--check`` of the build index: an entry whose files still hash as it records but which is not
    what its definition compiles to now would let a later compile settle that file without looking
    at it (an entry of an edited file is merely out of date: a compile sees the new hash)."""
    from rosetta.store.index import INDEX_NAME

    for file, outcome in ordered:
        recorded = index.get(relative_to(file, options.root))
        if recorded is None or outcome.entry is None or recorded == outcome.entry:
            continue
        if files_digest(options.root, recorded.files) == recorded.source_sha256:  # a compile would trust it
            fields = [name for name in ("agent", "files", "probes", "source_sha256", "preferences")
                      if getattr(recorded, name) != getattr(outcome.entry, name)]
            outcome.results.append(TargetResult(str(file), outcome.entry.agent, None, Status.INVALID,
                                                str(options.out / INDEX_NAME), (
                f"the build index records another {', '.join(fields)} for {file.name} than it has now; delete "
                f"{options.out / INDEX_NAME} (a cache: the next compile writes it again)")))


def _refuse_name_clashes(ordered: list[tuple[Path, FileOutcome]]) -> set[Path]:
    """Fail every file whose agent name another file also uses (their artifacts would overwrite each
    other under ``compiled/<name>/``); nothing of theirs is written. Returns those files."""
    from rosetta.store.publish import discard

    clashes = name_clashes((file, outcome.entry.agent if outcome.entry else next(
        (r.agent for r in outcome.results if r.agent), None)) for file, outcome in ordered)
    refused = set()
    for file, outcome in ordered:
        name = outcome.entry.agent if outcome.entry else None
        if name not in clashes:
            continue
        refused.add(file)
        for staged, _ in outcome.staged.values():
            discard(staged)
        others = ", ".join(str(f) for f in clashes[name] if f != file)
        outcome.results = [TargetResult(str(file), name, None, Status.FAILED, message=(
            f"agent name {name!r} is also used by {others}; nothing was written for either\n"
            "hint: give each definition a unique `name:` (artifacts live under compiled/<name>/)"))]
        outcome.staged = {}
    return refused


def name_clashes(named: Iterable[tuple[Path, str | None]]) -> dict[str, list[Path]]:
    """Agent name → the files that use it, for each name more than one file uses: their artifacts
    would overwrite each other under ``compiled/<name>/``, so compile refuses them all."""
    claimed: dict[str, list[Path]] = {}
    for file, name in named:
        if name is not None:
            claimed.setdefault(name, []).append(file)
    return {name: files for name, files in claimed.items() if len(set(files)) > 1}


def _publish(outcome: FileOutcome, options: CompileOptions) -> None:
    """Move the file's staged artifacts into place (unless an identical one appeared meanwhile);
    the caller holds the tree's lock."""
    from rosetta.store.publish import place

    for position, (staged, inputs_sha) in outcome.staged.items():
        try:
            place(staged, options.out, replace=lambda p=staged.path, i=inputs_sha: options.force or _current_status(
                p, i) is not Status.UP_TO_DATE)
        except RosettaError as failure:
            result = outcome.results[position]
            outcome.results[position] = replace(result, status=Status.FAILED, message=str(failure), warnings=())


def _defaults(options: CompileOptions) -> tuple[str, ...]:
    return options.default_models or options.catalog().default_targets


def targets(preferences: Iterable[str], options: CompileOptions) -> tuple[str, ...]:
    """The model names compile builds an agent with these ``model_preferences`` for, in order."""
    return tuple(dict.fromkeys(options.models or tuple(preferences) or _defaults(options)))


def resolve_target(name: str, options: CompileOptions, signature: Any = None) -> tuple[Any, Any]:
    """The catalog model and adapter compile builds ``name`` with; raises the :class:`RosettaError`
    that refuses the target (an unknown or unaccepted model, a retired one, one with no adapter, and
    with ``signature``, one the agent does not fit: its window, tools, vision)."""
    from rosetta.errors import RenderError
    from rosetta.providers.adapter import no_adapter
    from rosetta.render.renderer import check_fit

    catalog = options.catalog()
    model = catalog.resolve(name, dict(options.adapters), unlisted=options.unlisted)
    adapter = options.adapters.get(model.adapter)
    if adapter is None:
        raise RenderError(no_adapter(model, dict(options.adapters)))
    catalog.refuse_retired(model)
    if signature is not None:
        check_fit(signature, model)
    return model, adapter


def _settle_from_index(file: Path, entry: IndexEntry, options: CompileOptions) -> list[TargetResult] | None:
    """Up-to-date results without parsing, or None when anything needs a closer look."""
    if any((options.root / probe).exists() for probe in entry.probes):
        return None
    if files_digest(options.root, entry.files) != entry.source_sha256:
        return None
    results = []
    for name in targets(entry.preferences, options):
        try:
            model, adapter = resolve_target(name, options)
        except RosettaError:
            return None
        path = artifact_path(options.out, entry.agent, model.id)
        if _current_status(path, target_inputs(entry.source_sha256, model, adapter.sha256, options.section_roles)) \
                is not Status.UP_TO_DATE:
            return None
        results.append(TargetResult(str(file), entry.agent, model.id, Status.UP_TO_DATE, str(path)))
    return results


def _compile_file(file: Path, error: DefinitionError | None, options: CompileOptions) -> FileOutcome:
    from rosetta.compile.carry import optimized_artifact
    from rosetta.compile.check import check_target, unresolvable
    from rosetta.datasets import default_location
    from rosetta.definition.formats import SIDECAR_SUFFIXES, stem_of
    from rosetta.definition.loader import load_definition
    from rosetta.signature import lower, source_digest
    from rosetta.store.lookup import scan

    if error is not None:
        return FileOutcome([TargetResult(str(file), None, None, Status.FAILED, message=str(error))])
    try:
        definition = load_definition(file, root=options.root, section_roles=dict(options.section_roles))
        signature = lower(definition)
    except DefinitionError as failure:
        return FileOutcome([TargetResult(str(file), None, None, Status.FAILED, message=str(failure))])
    preferences = tuple(definition.spec.portability.model_preferences)
    wanted = targets(preferences, options)
    compiled, strays = scan(options.out, signature.name) if options.check and not options.models else ({}, {})
    source_sha = source_digest(definition)
    source_files = tuple(relative_to(f, options.root) for f in definition.source.files)
    probes = tuple(relative_to(file.with_name(stem_of(file) + suffix), options.root) for suffix in SIDECAR_SUFFIXES
                   if relative_to(file.with_name(stem_of(file) + suffix), options.root) not in source_files)
    outcome = FileOutcome([], IndexEntry(signature.name, source_files, probes, source_sha, preferences))
    try:
        dataset = None if options.datasets_dir is None else default_location(
            options.datasets_dir, signature.name, definition.spec.evaluation.dataset, options.root)
    except RosettaError as failure:  # evaluation.dataset outside the project
        return FileOutcome([TargetResult(str(file), signature.name, None, Status.FAILED, message=str(failure))])
    checked: set[str] = set()
    for name in dict.fromkeys((*wanted, *compiled)):  # --check: every artifact of the agent, targeted or not
        try:
            model, adapter = resolve_target(name, options, signature if name in wanted else None)
        except RosettaError as failure:
            outcome.results.append(TargetResult(str(file), signature.name, name, Status.FAILED, message=str(failure))
                                   if name in wanted else TargetResult(str(file), signature.name, name, Status.ORPHAN,
                                                                       str(compiled[name]), unresolvable(
                                                                           compiled[name], name, failure)))
            continue
        if name not in wanted and model.id != name:  # an alias or another case at its own path: never served
            outcome.results.append(TargetResult(
                str(file), signature.name, name, Status.INVALID, str(compiled[name]),
                f"an artifact of {model.id} saved as {name!r}, which is not that model's id: no model is served it; "
                "delete it"))
            continue
        if name not in wanted and model.id in checked:
            continue
        checked.add(model.id)
        provenance = expected_provenance(definition, model, adapter, options.root, options.section_roles, source_sha)
        inputs_sha = provenance.inputs_sha256
        path = artifact_path(options.out, signature.name, model.id)
        if options.check:
            status, message = check_target(path, provenance, signature, model, adapter, options, dataset,
                                           targeted=name in wanted)
            outcome.results.append(TargetResult(str(file), signature.name, model.id, Status(status), str(path),
                                                message))
            continue
        if not options.force and _current_status(path, inputs_sha) is Status.UP_TO_DATE:
            outcome.results.append(TargetResult(str(file), signature.name, model.id, Status.UP_TO_DATE, str(path)))
            continue
        optimized = None if options.force else optimized_artifact(path)
        if optimized is not None:
            outcome.results.append(_carry(file, optimized, provenance, signature, model, adapter, path, options,
                                          dataset, outcome))
            continue
        outcome.results.append(_build(file, provenance, signature, model, adapter, path, options, outcome))
    for stray, named in strays.items():  # --check: every other file under compiled/<agent>/ is reported
        if named not in checked:  # (a copy of a checked model's artifact is, beside that artifact)
            outcome.results.append(TargetResult(
                str(file), signature.name, named or None, Status.INVALID, str(stray),
                (f"names model {named!r} but is not that model's artifact path" if named else
                 "is not an artifact rosetta wrote") + ": no model is served it; delete it"))
    return outcome


def _carry(file: Path, artifact: Any, provenance: Provenance, signature: Any, model: Any, adapter: Any, path: Path,
           options: CompileOptions, dataset: str | None, outcome: FileOutcome) -> TargetResult:
    """A stale optimized artifact: carried over when its prompt renders the same, else left as it
    is (stale) rather than replaced by an unoptimized render."""
    from rosetta.compile.carry import carry_over
    from rosetta.store.artifact import read_header
    from rosetta.store.measured import mark_measured, measured_ids
    from rosetta.store.publish import stage

    text, note = carry_over(artifact, provenance, signature, model, adapter, options, dataset)
    if text is None:
        return TargetResult(str(file), signature.name, model.id, Status.STALE, str(path),
                            f"optimized on earlier sources and not carried over ({note}); `rosetta compile "
                            "--optimize` searches again, `--force` replaces it with the unoptimized render")
    try:
        staged = stage(path, text, options.out)
    except ArtifactError as failure:
        return TargetResult(str(file), signature.name, model.id, Status.FAILED, str(path), str(failure))
    if artifact.content_sha256 in measured_ids(options.root):  # the same prompt, so the same measured scores
        mark_measured(options.root, read_header(text).content_sha256)
    outcome.staged[len(outcome.results)] = (staged, provenance.inputs_sha256)
    return TargetResult(str(file), signature.name, model.id, Status.WRITTEN, str(path), note)


def _current_status(path: Path, inputs_sha: str) -> Status:
    header = stored_header(path)
    if header is None:
        return Status.MISSING
    if not header.intact:
        return Status.INVALID
    return Status.UP_TO_DATE if header.inputs_sha256 == inputs_sha else Status.STALE


def _build(file: Path, provenance: Provenance, signature: Any, model: Any, adapter: Any, path: Path,
           options: CompileOptions, outcome: FileOutcome) -> TargetResult:
    """Render the target and stage its artifact (published by :func:`compile_paths`)."""
    from rosetta.errors import RenderError
    from rosetta.render.renderer import render
    from rosetta.store.publish import stage
    from rosetta.store.verify import artifact_of

    try:
        prompt = render(signature, model, adapters={adapter.name: adapter})
        staged = stage(path, dump_artifact(artifact_of(signature, adapter, provenance, prompt)), options.out)
    except (RenderError, ArtifactError) as failure:
        return TargetResult(str(file), signature.name, model.id, Status.FAILED, str(path), str(failure))
    outcome.staged[len(outcome.results)] = (staged, provenance.inputs_sha256)
    return TargetResult(str(file), signature.name, model.id, Status.WRITTEN, str(path), warnings=prompt.warnings)
