"""Which build of the embedded decoder answers ``local/`` calls, as a digest: answers cached under
one build must not be replayed as another's. Cheap to import (no litellm, no llama.cpp)."""

from __future__ import annotations

import functools
import hashlib
from importlib import metadata
from pathlib import Path

DECODER_MODULES = ("providers/local_llm.py", "providers/local_grammar.py")
"""The modules that turn a request into the embedded model's answer (decoding loop, loop check,
grammar), relative to the ``rosetta`` package."""


def answerer_revision(model: str) -> str:
    """What decides ``model``'s answer besides the request: the decoder build for ``local/`` models,
    empty for hosted ones (their revision is not visible to us)."""
    return decoder_revision() if model.startswith("local/") else ""


@functools.lru_cache(maxsize=1)
def decoder_revision() -> str:
    """sha256 of the embedded provider's decoding code and the llama.cpp build it drives. A changed
    loop check or grammar cuts answers differently, so a score recorded from cached answers of an
    older build would not reproduce with the current one."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for name in DECODER_MODULES:
        digest.update(name.encode() + b"\0" + (package / name).read_bytes())
    try:
        digest.update(metadata.version("llama_cpp_python").encode())
    except metadata.PackageNotFoundError:
        digest.update(b"no llama.cpp")
    return digest.hexdigest()
