"""How many CPU threads the embedded models use. Kept apart from the decoding code: the count
changes how fast an answer comes, never the answer (each dot product is one thread's), so it is
not part of the engine's revision (:mod:`rosetta.local.revision`)."""

from __future__ import annotations

import os


def thread_count() -> int:
    """CPU threads per llama.cpp context: ``local_threads`` ([tool.rosetta] or ROSETTA_LOCAL_THREADS),
    else every CPU. Two processes each spinning on every CPU slow each other down many times over."""
    from rosetta.settings import load_settings

    return load_settings().local_threads or os.cpu_count() or 1
