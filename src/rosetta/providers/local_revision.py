"""Which build of the embedded decoder answers ``local/`` calls, as a digest: answers cached under
one build must not be replayed as another's. Cheap to import (no litellm, no llama.cpp)."""

from __future__ import annotations

import functools
import hashlib
from importlib import metadata
from pathlib import Path

DECODER_MODULES = ("providers/local_llm.py", "providers/local_decoder.py", "providers/local_grammar.py")
"""The modules that turn a request into the embedded model's answer (decoding loop, loop check,
grammar), relative to the ``rosetta`` package."""


def answerer_revision(model: str) -> str:
    """What decides ``model``'s answer besides the request: the decoder build for ``local/`` models,
    empty for hosted ones (their revision is not visible to us)."""
    return decoder_revision() if model.startswith("local/") else ""


def answerer_build(model: str) -> str:
    """The readable side of :func:`answerer_revision`: which llama.cpp build answers ``local/`` models."""
    return llama_cpp_build() if model.startswith("local/") else ""


@functools.lru_cache(maxsize=1)
def decoder_revision() -> str:
    """sha256 of the embedded provider's decoding code and the llama.cpp build it drives. A changed
    loop check or grammar cuts answers differently, and kernels compiled for other instructions
    (AVX-512 rather than AVX2, say) round differently, which flips greedy near-ties in long answers:
    a score recorded under one build need not reproduce under another."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for name in DECODER_MODULES:
        digest.update(name.encode() + b"\0" + (package / name).read_bytes())
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
