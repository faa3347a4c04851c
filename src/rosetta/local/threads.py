"""How many CPU threads the embedded models use. Kept apart from the decoding code: the count
changes how fast an answer comes, never the answer (each dot product is one thread's), so it is
not part of the engine's revision (:mod:`rosetta.local.revision`)."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

log = logging.getLogger("rosetta.local")

SETTING = "ROSETTA_LOCAL_THREADS (or local_threads in [tool.rosetta])"
"""Where the thread count is set, as messages name it."""

SAMPLE_S = 0.2
"""How long the CPUs' use is watched before a context is made: enough to see a busy CPU, little
beside loading a model."""

SLOW_CALL_S = 30.0
"""A local call taking longer than this (seconds) is worth a word on the thread count: the bundled
models answer a typical request in a few seconds on one idle CPU."""

_chosen: int | None = None  # the count the last context was made with
_slow_said: set[str] = set()  # models whose slowness was already explained in this process
_lock = threading.Lock()


def thread_count(configured: int | None) -> int:
    """CPU threads per llama.cpp context: the project's ``local_threads`` ([tool.rosetta] or
    ROSETTA_LOCAL_THREADS, ``configured``) when set, else :func:`default_threads` of the CPUs this
    process may run on and the machine's load now."""
    global _chosen
    _chosen = configured or default_threads(available_cpus(), current_load())
    return _chosen


def default_threads(cpus: int, load: float | None = None) -> int:
    """The thread count when none is set: the CPUs this process may use (``cpus``) that are free now
    (``load``: the CPUs other work keeps busy, rounded, as :func:`current_load` measures it), at
    least one; half of them when the load is unknown.

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
    """How many of this process's CPUs other work keeps busy now: their use over :data:`SAMPLE_S`,
    read from ``/proc/stat`` where there is one (Linux); else the 1-minute load average; else None
    (Windows). Not the load average first: it lags a minute, so a command run just after another
    (a compile, then a verify) would still see the finished one's load and take one thread."""
    before = cpu_times()
    if before:
        time.sleep(SAMPLE_S)
        after = cpu_times()
        return sum((after[cpu][0] - busy) / (after[cpu][1] - total)
                   for cpu, (busy, total) in before.items() if cpu in after and after[cpu][1] > total)
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def cpu_times(stat: Path = Path("/proc/stat")) -> dict[int, tuple[int, int]]:
    """Busy and total clock ticks so far of each CPU this process may run on, from ``stat`` ({}
    where it cannot be read). Idle and I/O wait count as free; the rest (steal included) as busy."""
    try:
        lines = stat.read_text(encoding="ascii").splitlines()
        allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    except (OSError, UnicodeDecodeError):
        return {}
    times: dict[int, tuple[int, int]] = {}
    for line in lines:
        name, *fields = line.split()
        if not name.startswith("cpu") or not name[3:].isdigit() or len(fields) < 5 or \
                not all(field.isdigit() for field in fields[:8]):
            continue
        cpu, ticks = int(name[3:]), [int(field) for field in fields[:8]]
        if allowed is None or cpu in allowed:
            times[cpu] = (sum(ticks) - ticks[3] - ticks[4], sum(ticks))
    return times


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
