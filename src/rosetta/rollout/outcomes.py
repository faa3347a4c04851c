"""The outcome log: one JSON line per answered call, appended by any number of processes.

``.rosetta/outcomes/<agent>.jsonl`` under the project root by default. A line::

    {"ts": "2025-06-01T12:00:00.000+00:00", "agent": "vuln-triage", "model": "openai/gpt-4o",
     "experiment": "terse", "arm": "treatment", "version": "<content_sha256>", "valid": true,
     "retries": 0, "latency_s": 0.84, "cost_usd": 0.0021, "success": true, "score": null}

Appends are whole lines under concurrency: each is one ``os.write`` on an ``O_APPEND`` descriptor,
which the kernel does not interleave with other appends for lines up to PIPE_BUF bytes; longer
lines (or platforms without atomic appends) take a file lock as well. A reader skips a torn last
line (a writer killed mid-write) and counts it rather than failing.
"""

from __future__ import annotations

import json
import math
import os
import select
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rosetta.errors import Location, Problem, UsageError

ATOMIC_APPEND: int = getattr(select, "PIPE_BUF", 0) if os.name == "posix" else 0
"""Bytes one O_APPEND write is trusted to put down whole (PIPE_BUF); longer lines are locked too."""


@dataclass(frozen=True)
class Outcome:
    """One answered call, as the log records it."""

    ts: str
    agent: str
    model: str
    experiment: str | None  # None: outside any experiment
    arm: str | None  # "control" | "treatment" | None
    version: str | None  # content_sha256 of the artifact that answered
    valid: bool  # the answer validated against the output schema
    retries: int  # calls beyond the first (transient retries, corrections, fallbacks)
    latency_s: float
    cost_usd: float | None
    success: bool | None = None  # the caller's verdict, when given
    score: float | None = None  # the caller's score, when given


def default_path(agent: str, root: str | os.PathLike[str] | None = None) -> Path:
    """``<project root>/.rosetta/outcomes/<agent>.jsonl`` (the project holding the working directory)."""
    if root is None:
        from rosetta.project import project_dirs

        root = project_dirs().root
    return Path(root) / ".rosetta" / "outcomes" / f"{agent}.jsonl"


def record_outcome(result: Any, *, success: bool | None = None, score: float | None = None,
                   path: str | os.PathLike[str] | None = None) -> Path:
    """Append what ``result`` (an ``agent.run`` Result) says about its call to the outcome log,
    with the caller's ``success`` verdict or ``score`` when known; returns the log's path."""
    if success is not None and not isinstance(success, bool):
        raise UsageError(Problem(f"success must be True, False or None, not {success!r}", field="success"))
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))
                              or not math.isfinite(score)):
        raise UsageError(Problem(f"score must be a finite number or None, not {score!r}", field="score"))
    agent = getattr(result, "agent", "")
    if not agent:
        raise UsageError(Problem("this result names no agent, so its log is unknown", field="result",
                                 hint="pass a Result from agent.run(...), or path=..."))
    cost = result.cost
    outcome = Outcome(
        ts=datetime.now(UTC).isoformat(timespec="milliseconds"), agent=agent, model=result.model,
        experiment=result.experiment, arm=result.arm, version=result.version, valid=bool(result.valid),
        retries=max(len(result.attempts) - 1, 0), latency_s=round(float(result.latency_s), 6),
        cost_usd=None if cost is None else round(float(cost), 8), success=success,
        score=None if score is None else float(score))
    target = Path(path) if path is not None else default_path(agent)
    append_line(target, json.dumps(asdict(outcome), ensure_ascii=False, separators=(",", ":")))
    return target


def append_line(path: Path, line: str) -> None:
    """Append ``line`` and a newline to ``path`` so that concurrent appenders never interleave."""
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    if len(data) <= ATOMIC_APPEND:
        _append(path, data)
        return
    from filelock import FileLock

    with FileLock(str(path) + ".lock"):
        _append(path, data)


def _append(path: Path, data: bytes) -> None:
    handle = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(handle, data)
        while written < len(data):  # only after a signal or a full disk; the rest still goes at the end
            written += os.write(handle, data[written:])
    finally:
        os.close(handle)


def read_outcomes(path: Path) -> tuple[list[Outcome], int]:
    """Every whole outcome in the log, in order, and how many lines could not be read."""
    outcomes, skipped = [], 0
    for line in _lines(path):
        try:
            outcomes.append(_outcome(json.loads(line)))
        except (ValueError, TypeError, KeyError):
            skipped += 1
    return outcomes, skipped


def _lines(path: Path) -> Iterator[str]:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.strip():
                    yield line
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(Problem(f"cannot read the outcome log: {exc.strerror}", Location(str(path)))) from None


def _outcome(data: Any) -> Outcome:
    if not isinstance(data, dict):
        raise TypeError("not an object")
    number = (int, float)
    if not isinstance(data["valid"], bool) or not isinstance(data["retries"], int) \
            or not isinstance(data["latency_s"], number):
        raise TypeError("bad field")
    for key, kinds in (("cost_usd", number), ("score", number), ("success", bool)):
        if data.get(key) is not None and not isinstance(data[key], kinds):
            raise TypeError(f"bad {key}")
    return Outcome(str(data["ts"]), str(data["agent"]), str(data["model"]), data.get("experiment"), data.get("arm"),
                   data.get("version"), data["valid"], data["retries"], float(data["latency_s"]),
                   data.get("cost_usd"), data.get("success"), data.get("score"))
