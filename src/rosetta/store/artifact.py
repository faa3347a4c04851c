"""Compiled artifacts: one readable YAML file per agent and model, holding the whole rendered prompt
and where it came from, sealed by a content hash.

Layout of a file::

    # rosetta compiled prompt: written by `rosetta compile`; do not edit.
    # content_sha256 covers every byte after its own line; a file that does not match is refused.
    content_sha256: 3f5c...
    format: 1
    agent: {name: ..., version: ...}
    model: anthropic/claude-sonnet-4-20250514
    adapter: anthropic
    provenance: {inputs_sha256, source_sha256, source_files, adapter_sha256, model_sha256, ...}
    prompt: {system: |, ...}

Hashing the serialized bytes (not a re-serialization) makes verification a single sha256 over the
file, with no YAML parsing, and catches any edit, truncation or re-formatting. Nothing machine-
specific (timestamps, absolute paths) is written, so the same inputs give byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from rosetta.__about__ import __version__
from rosetta.errors import Location, Problem, RosettaError
from rosetta.render.prompt import RenderedPrompt

FORMAT = 1
COMPILER_VERSION = f"{__version__}+format{FORMAT}"
"""Recorded in every artifact and folded into its inputs hash: a new rosetta makes artifacts stale."""
HEADER = (
    "# rosetta compiled prompt: written by `rosetta compile`; do not edit.\n"
    "# content_sha256 covers every byte after its own line; a file that does not match is refused.\n"
)
_HASH_LINE = re.compile(r"content_sha256: ([0-9a-f]{64})\n")
_INPUTS_LINE = re.compile(r"^  inputs_sha256: ([0-9a-f]{64})$", re.MULTILINE)
_SOURCE_LINE = re.compile(r"^  source_sha256: ([0-9a-f]{64})$", re.MULTILINE)


class ArtifactError(RosettaError):
    """A compiled artifact is missing, unreadable, tampered with, truncated or stale."""


@dataclass(frozen=True)
class Provenance:
    """Where an artifact came from; every hash is hex sha256."""

    inputs_sha256: str  # over everything below: equal inputs ⇒ the same artifact
    source_sha256: str
    source_files: tuple[str, ...]  # relative to the project root, main file first
    adapter_sha256: str
    model_sha256: str  # the catalog entry the prompt was rendered for
    compiler_version: str
    knobs: dict[str, Any] = field(default_factory=dict)
    dataset_sha256: str | None = None
    scores: dict[str, Any] = field(default_factory=dict)
    budget: dict[str, Any] = field(default_factory=dict)
    optimizer: dict[str, Any] = field(default_factory=dict)  # empty for a plain (unoptimized) render


@dataclass(frozen=True)
class Artifact:
    """A compiled prompt for one agent on one model."""

    agent: str
    version: str | None
    model: str
    adapter: str
    provenance: Provenance
    prompt: RenderedPrompt
    content_sha256: str = ""
    extensions: dict[str, Any] = field(default_factory=dict)  # the definition's unknown fields, as written


def artifact_path(out: Path, agent: str, model_id: str) -> Path:
    """``compiled/<agent>/<provider>/<model>.yaml``; characters unsafe in file names become ``_``.

    Here rather than in the compiler so that the runtime can find an artifact's rollout file
    without importing the compiler (and its process pool)."""
    provider, _, name = model_id.partition("/")
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return out / agent / provider / f"{safe}.yaml"


def inputs_digest(**parts: Any) -> str:
    """sha256 over canonical JSON of the compile inputs."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


@lru_cache(maxsize=256)
def model_fingerprint(model: Any) -> str:
    """sha256 of a catalog entry (what the renderer knows about the model). Fields left unset
    (None) are left out, so that a rule added to the catalog later changes the fingerprint of the
    models it is set for, not of every model (and their artifacts stay current). A local model's
    weights count by their sha256, not by the packages that deliver the file; ``served_as`` and where
    a declaration was written do not count."""
    data = asdict(model)
    data.pop("served_as", None)  # names other hosts give the model: how it is found, not how it renders
    if data.get("endpoint"):
        data["endpoint"].pop("named_in", None)  # where the project wrote it (its path differs per clone)
    if data.get("weights"):
        data["weights"].pop("parts")
    return inputs_digest(model=_set_fields(data))


def _set_fields(data: dict[str, Any]) -> dict[str, Any]:
    return {key: _set_fields(value) if isinstance(value, dict) else value
            for key, value in data.items() if value is not None}


def target_inputs(source_sha: str, model: Any, adapter_sha: str, section_roles: Mapping[str, Any]) -> str:
    """The inputs hash of one target: equal hashes mean an identical (unoptimized) artifact. The
    compiler records it; the runtime recomputes it before it trusts an artifact."""
    return inputs_digest(format=FORMAT, compiler=COMPILER_VERSION, source=source_sha, adapter=adapter_sha,
                         model=model_fingerprint(model), knobs={}, section_roles=dict(section_roles))


def changed_inputs(recorded: Provenance, now: Provenance) -> str | None:
    """Which input of an artifact hashes differently now (None when all are the same): the
    compiler's version, the source files, the adapter, the model's catalog entry, and last the
    inputs hash itself, which also folds in the project's section roles."""
    if recorded.compiler_version != now.compiler_version:
        return f"compiled by rosetta {recorded.compiler_version}; this is {now.compiler_version}"
    if tuple(recorded.source_files) != tuple(now.source_files):
        return f"built from {', '.join(recorded.source_files)}; the definition now reads {', '.join(now.source_files)}"
    if recorded.source_sha256 != now.source_sha256:
        return "the definition (or a file it references) changed since it was compiled"
    if recorded.adapter_sha256 != now.adapter_sha256:
        return "its adapter changed since it was compiled"
    if recorded.model_sha256 != now.model_sha256:
        return "its model's catalog entry changed since it was compiled"
    if recorded.inputs_sha256 != now.inputs_sha256:
        return "its inputs changed since it was compiled (the project's section_roles)"
    return None


def dump_artifact(artifact: Artifact) -> str:
    """The artifact as sealed, deterministic YAML text."""
    from rosetta.yaml_text import dump_yaml

    provenance = artifact.provenance
    body = dump_yaml({
        "format": FORMAT,
        "agent": {"name": artifact.agent, "version": artifact.version,
                  **({"extensions": artifact.extensions} if artifact.extensions else {})},
        "model": artifact.model,
        "adapter": artifact.adapter,
        "provenance": {
            "inputs_sha256": provenance.inputs_sha256,
            "source_sha256": provenance.source_sha256,
            "source_files": list(provenance.source_files),
            "adapter_sha256": provenance.adapter_sha256,
            "model_sha256": provenance.model_sha256,
            "dataset_sha256": provenance.dataset_sha256,
            "compiler_version": provenance.compiler_version,
            "knobs": provenance.knobs,
            "scores": _text_keys(provenance.scores),
            "budget": _text_keys(provenance.budget),
            **({"optimizer": _text_keys(provenance.optimizer)} if provenance.optimizer else {}),
        },
        "prompt": artifact.prompt.to_dict(),
    })
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()
    return f"{HEADER}content_sha256: {digest}\n{body}"


def _text_keys(value: Any) -> Any:
    """``value`` with every mapping key written as text: YAML reads ``11:`` back as a number but a
    record read back is written again as text, and an artifact must survive that round trip byte
    for byte (``rosetta compile --check`` renders it again from what it records)."""
    if isinstance(value, dict):
        return {str(key): _text_keys(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_text_keys(item) for item in value]
    return value


@dataclass(frozen=True)
class Header:
    """What can be learned from an artifact without parsing it: its seal and key hashes."""

    content_sha256: str
    inputs_sha256: str | None
    source_sha256: str | None
    intact: bool


def read_header(text: str) -> Header:
    """Check the seal and pull out the hashes; ``intact`` is False for tampered or truncated files.

    The two comment lines and the seal must open the file exactly: the seal covers what follows it,
    so nothing may stand above it."""
    match = _HASH_LINE.match(text, len(HEADER)) if text.startswith(HEADER) else None
    if match is None:
        return Header("", None, None, False)
    body = text[match.end():]
    intact = hashlib.sha256(body.encode("utf-8")).hexdigest() == match.group(1)
    inputs = _INPUTS_LINE.search(body, 0, 2000)
    source = _SOURCE_LINE.search(body, 0, 2000)
    return Header(match.group(1), inputs and inputs.group(1), source and source.group(1), intact)


def read_stored_artifact(path: Path) -> str:
    """The text of ``compiled/<agent>/<provider>/<model>.yaml``, a trusted file of its compiled tree
    (:func:`rosetta.fileio.read_trusted`: no symlink on the way, no FIFO, no device, size-capped)."""
    from rosetta.fileio import read_trusted

    return read_trusted(path, Path(path).parents[2])


def stored_header(path: Path) -> Header | None:
    """The header of the artifact at ``path`` (not intact when unreadable); None when there is none."""
    try:
        text = read_stored_artifact(path)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return Header("", None, None, False)
    return read_header(text)


def read_artifact(path: Path) -> Artifact:
    """The verified artifact at ``path``; :class:`ArtifactError` says what is wrong with it."""
    try:
        text = read_stored_artifact(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ArtifactError(Problem(f"artifact cannot be read: {exc}", Location(str(path)),
                                    hint="recompile it with `rosetta compile --force`")) from None
    return parse_artifact(text, path=str(path))


def parse_artifact(text: str, *, path: str) -> Artifact:
    """Verify and load an artifact; raise :class:`ArtifactError` saying what is wrong with it."""
    from rosetta.definition.yaml_source import parse_yaml
    from rosetta.errors import DefinitionError

    header = read_header(text)
    if not header.intact:
        what = "has no content_sha256 seal" if not header.content_sha256 else "does not match its content_sha256"
        raise ArtifactError(Problem(f"artifact {what} (edited, truncated or corrupted)", Location(path),
                                    hint="recompile it with `rosetta compile --force`"))
    try:
        data, _ = parse_yaml(text, file=path)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"unsupported artifact format {data.get('format') if isinstance(data, dict) else data!r}")
        provenance = dict(data["provenance"])
        provenance["source_files"] = tuple(provenance["source_files"])
        return Artifact(
            agent=data["agent"]["name"],
            version=data["agent"]["version"],
            model=data["model"],
            adapter=data["adapter"],
            provenance=Provenance(**provenance),
            prompt=RenderedPrompt.from_dict(data["prompt"]),
            content_sha256=header.content_sha256,
            extensions=dict(data["agent"].get("extensions") or {}),
        )
    except DefinitionError as error:
        raise ArtifactError(error.problems) from None
    except (KeyError, TypeError, ValueError) as exc:
        raise ArtifactError(Problem(f"artifact is not valid: {exc}", Location(path),
                                    hint="recompile it with `rosetta compile --force`")) from None

