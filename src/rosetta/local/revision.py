"""Which build answers a ``local/`` model, as a digest: answers cached under one build must not be
replayed as another's, nor one model's as another's. Cheap to import (no litellm, no llama.cpp)."""

from __future__ import annotations

import functools
import hashlib
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rosetta.local.project import LocalSettings

PACKAGE = Path(__file__).resolve().parent
"""The embedded engine's package: every module in it counts, found by listing it (see :data:`NEUTRAL`)."""
NEUTRAL = ("__init__.py", "litellm_offline.py", "project.py", "revision.py", "threads.py", "weights.py")
"""Its modules that take no part in deciding an answer: the package's docstring, registering the
provider, the project settings a call carries, this digest, the thread count (it changes only the
speed) and finding the weights (they count by their sha256, not by the code that finds them)."""


def answerer_revision(model: str, settings: LocalSettings | None = None) -> str:
    """What decides ``model``'s answer besides the request: the engine's code, the llama.cpp build and
    the model's weights (under the project's ``settings``: default, the working directory's) for
    ``local/`` models; empty for hosted ones (their revision is not visible to us)."""
    if not model.startswith("local/"):
        return ""
    from rosetta.local.weights import weights_sha256

    return hashlib.sha256(f"{engine_revision()}\0{weights_sha256(model, settings)}".encode()).hexdigest()


def answerer_build(model: str) -> str:
    """The readable side of :func:`answerer_revision`: which llama.cpp build answers ``local/`` models."""
    return llama_cpp_build() if model.startswith("local/") else ""


@functools.lru_cache(maxsize=1)
def engine_revision() -> str:
    """sha256 of the engine's decoding code and the llama.cpp build it drives. A changed loop check or
    grammar cuts answers differently, and kernels compiled for other instructions (AVX-512 rather
    than AVX2, say) round differently, which flips greedy near-ties in long answers: a score
    recorded under one build need not reproduce under another."""
    digest = hashlib.sha256()
    for source in sorted(PACKAGE.glob("*.py")):
        if source.name not in NEUTRAL:
            digest.update(source.name.encode() + b"\0" + source.read_bytes())
    digest.update(b"\0" + llama_cpp_build().encode())
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def llama_cpp_build() -> str:
    """llama-cpp-python's version and the instruction sets its kernels were compiled for."""
    try:
        version = metadata.version("llama_cpp_python")
    except metadata.PackageNotFoundError:
        return "no llama.cpp"
    try:
        import llama_cpp

        features = llama_cpp.llama_print_system_info().decode(errors="replace").strip()
    except Exception as error:  # the package is there but its library does not load
        features = f"unloadable: {type(error).__name__}"
    return f"llama-cpp-python {version}; {features}"
