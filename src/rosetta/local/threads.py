"""How many CPU threads the embedded models use. Kept apart from the decoding code: the count
changes how fast an answer comes, never the answer (each dot product is one thread's), so it is
not part of the engine's revision (:mod:`rosetta.local.revision`)."""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger("rosetta.local")

SETTING = "ROSETTA_LOCAL_THREADS (or local_threads in [tool.rosetta])"
"""Where the thread count is set, as messages name it."""

SLOW_CALL_S = 30.0
"""A local call taking longer than this (seconds) is worth a word on the thread count: the bundled
models answer a typical request in a few seconds on one idle CPU."""

_chosen: int | None = None  # the count the last context was made with
_slow_said: set[str] = set()  # models whose slowness was already explained in this process
_lock = threading.Lock()


def thread_count() -> int:
    """CPU threads per llama.cpp context: ``local_threads`` ([tool.rosetta] or ROSETTA_LOCAL_THREADS)
    when set, else :func:`default_threads` of the CPUs this process may run on and the machine's
    load now."""
    from rosetta.settings import load_settings

    global _chosen
    _chosen = load_settings().local_threads or default_threads(available_cpus(), current_load())
    return _chosen


def default_threads(cpus: int, load: float | None = None) -> int:
    """The thread count when none is set: the CPUs this process may use (``cpus``) that are free now
    (``load``: the 1-minute load average, rounded, counts CPUs taken), at least one; half of them
    when the load is unknown.

    llama.cpp's threads spin while they wait for each other, so a context with more threads than
    free CPUs does not merely share them: it stalls, and two processes that each take every CPU run
    many times slower than either alone (one ``rosetta run`` beside another job on two CPUs: 82 s
    with two threads, 23.5 s with one). Alone on an idle machine it takes every CPU, as fast as it
    can be. A pure function of its arguments, so the choice is testable."""
    cpus = max(1, int(cpus))
    if load is None or load != load or load < 0:  # unknown (or NaN): leave room for the rest
        return max(1, cpus // 2)
    return max(1, min(cpus, cpus - int(load + 0.5)))


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one), at least one."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # macOS and Windows have no affinity mask
        return os.cpu_count() or 1


def current_load() -> float | None:
    """The 1-minute load average, or None where the OS has none (Windows)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def slow_call(model: str, seconds: float) -> None:
    """Log, once per ``model`` and process, that a call to an embedded model took ``seconds`` when
    that is more than :data:`SLOW_CALL_S`, with the thread count and how to change it."""
    if seconds <= SLOW_CALL_S:
        return
    with _lock:
        if model in _slow_said:
            return
        _slow_said.add(model)
    used = f"{_chosen} CPU thread(s)" if _chosen is not None else "its CPU threads"
    log.warning("%s took %.0f s to answer on %s (%d CPU(s) here): when other work shares the CPUs, fewer "
                "threads are faster (llama.cpp's threads spin while they wait); set %s, e.g. "
                "ROSETTA_LOCAL_THREADS=1 (said once per model)", model, seconds, used, available_cpus(), SETTING)
