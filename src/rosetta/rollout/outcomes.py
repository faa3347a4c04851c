"""The outcome log: one JSON line per answered call, appended by any number of processes.

``.rosetta/outcomes/<agent>.jsonl`` under the project root by default. A line::

    {"ts": "2025-06-01T12:00:00.000+00:00", "agent": "vuln-triage", "model": "openai/gpt-4o",
     "experiment": "terse", "arm": "treatment", "version": "<content_sha256>", "valid": true,
     "retries": 0, "latency_s": 0.84, "cost_usd": 0.0021, "success": true, "score": null}

Appends are whole lines under concurrency: each is one ``os.write`` on an ``O_APPEND`` descriptor,
which the kernel does not interleave with other appends for lines up to PIPE_BUF bytes; longer
lines (or platforms without atomic appends) take a file lock as well. A reader skips a torn last
line (a writer killed mid-write) and counts it rather than failing.

The log is trusted no further than it is checked: it is read and appended to only as a plain file
with no symlink on the way from the project root (:mod:`rosetta.fileio`), and a line whose numbers
are impossible (not finite, negative where they cannot be, or beyond :data:`MAX_VALUE`) is skipped
and counted like a torn one, so a hand-edited or planted line can neither crash a report nor sway it.
In the project's own log every line carries an HMAC under the project's key (kept outside the
project: :mod:`rosetta.signing`), and a report counts only lines that verify: a log shipped with a
cloned repository decides no experiment.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import select
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rosetta.errors import Location, Problem, UsageError
from rosetta.fileio import NotRegularFile, TrustedDirectory, locked_trusted, read_regular, read_trusted

log = logging.getLogger(__name__)

ATOMIC_APPEND: int = getattr(select, "PIPE_BUF", 0) if os.name == "posix" else 0
"""Bytes one O_APPEND write is trusted to put down whole (PIPE_BUF); longer lines are locked too."""
MAX_VALUE = 1e9
"""No recorded number is larger: not a call's latency in seconds, its cost in USD, its retries, nor a
caller's score. Past it a value is a planted or corrupted one, and sums of squares of the values
that pass stay far from overflowing."""
MAX_LOG = 256 * 1024 * 1024
"""Bytes of one outcome log that a report reads at most (about a million calls)."""


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


def default_path(agent: str, root: str | os.PathLike[str]) -> Path:
    """``<project root>/.rosetta/outcomes/<agent>.jsonl``: the project is always named (a Result names
    its own), never guessed from the working directory."""
    from rosetta.settings import ProjectState

    return ProjectState.of(root).outcomes(agent)


def record_outcome(result: Any, *, success: bool | None = None, score: float | None = None,
                   path: str | os.PathLike[str] | None = None) -> Path:
    """Append what ``result`` (an ``agent.run`` Result) says about its call to the outcome log — the
    answering agent's project's (``.rosetta/outcomes/<agent>.jsonl``) unless ``path`` is given —
    with the caller's ``success`` verdict or ``score`` when known; returns the log's path."""
    if success is not None and not isinstance(success, bool):
        raise UsageError(Problem(f"success must be True, False or None, not {success!r}", field="success"))
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))
                              or not math.isfinite(score) or abs(score) > MAX_VALUE):
        raise UsageError(Problem(f"score must be a finite number or None, not {score!r}", field="score",
                                 expected=f"a number between -{MAX_VALUE:g} and {MAX_VALUE:g}, or None"))
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
    line = json.dumps(asdict(outcome), ensure_ascii=False, separators=(",", ":"))
    if path is not None:
        target, root = Path(path), None
    else:  # the answering agent's project, wherever this process runs
        if not getattr(result, "project", None):
            raise UsageError(Problem("this result names no project, so its log is unknown", field="result",
                                     hint="pass a Result from agent.run(...), or path=..."))
        target = default_path(agent, result.project)
        root = target.parents[2]
        line = signed_line(line, root)
    append_line(target, line, root=root)
    return target


_SIGNATURE = re.compile(r'(\{.*),"hmac":"([0-9a-f]{64})"\}')
"""A signed line: the outcome's JSON object with its HMAC as the last member."""


def signed_line(line: str, root: Path) -> str:
    """``line`` (one outcome's compact JSON object) with an ``hmac`` member under the project's key
    (:mod:`rosetta.signing`) as its last: a report trusts only lines this machine signed, so lines
    shipped with a cloned project, or written in by hand, decide no experiment. Without a usable key
    the line is written unsigned (and a report ignores it), with a warning saying why."""
    from rosetta.signing import NoSecret, project_secret, sign

    try:
        return f'{line[:-1]},"hmac":"{sign(project_secret(root), "outcome", line)}"}}'
    except NoSecret as exc:
        log.warning("outcome recorded unsigned (an experiment report will not count it): %s", exc)
        return line


def _signed_by(secret: bytes, line: str) -> bool:
    from rosetta.signing import verifies

    found = _SIGNATURE.fullmatch(line)
    return found is not None and verifies(secret, "outcome", found[1] + "}", found[2])


def append_line(path: Path, line: str, *, root: str | os.PathLike[str] | None = None) -> None:
    """Append ``line`` and a newline to ``path`` so that concurrent appenders never interleave;
    under ``root`` (the project, for the default log) no symlink may lead to the log or its lock
    (without it, only the log itself must not be one). The folder is held open while appending
    (:class:`~rosetta.fileio.TrustedDirectory`), so one swapped for a symlink cannot redirect it."""
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    path = Path(os.path.abspath(path))
    root = path.parent if root is None else root
    try:
        with TrustedDirectory.open(path.parent, root, create=True) as directory:
            if len(data) <= ATOMIC_APPEND:
                directory.append(path.name, data)
                return
            with locked_trusted(path.with_name(path.name + ".lock"), root):
                directory.append(path.name, data)
    except NotRegularFile as exc:
        raise UsageError(Problem(f"cannot append to the outcome log: {exc}", Location(str(path)),
                                 hint="the log must be a plain file reached without symlinks; remove the link "
                                      "(rosetta creates the log again)")) from None


def read_outcomes(path: Path, *, root: str | os.PathLike[str] | None = None) -> tuple[list[Outcome], int]:
    """Every whole, plausible outcome in the log, in order, and how many lines were skipped (torn,
    unreadable, holding impossible values, or — in the project's own log — not signed on this
    machine). With ``root`` (the project, for the default log) no symlink may lead to the log and
    only lines signed under the project's key count; without it (a log the user names) the file
    itself must be a plain file, and its lines are the user's."""
    secret = _secret(root)
    outcomes: list[Outcome] = []
    skipped = unsigned = 0
    for line in _text(Path(path), root).split("\n"):  # not splitlines(): U+2028 may sit inside a JSON string
        if not line.strip():
            continue
        if secret is not None and not _signed_by(secret, line):
            unsigned += 1
            continue
        try:
            outcomes.append(_outcome(json.loads(line)))
        except (ValueError, TypeError, KeyError, RecursionError):
            skipped += 1
    return outcomes, skipped + unsigned


def _secret(root: str | os.PathLike[str] | None) -> bytes | None:
    """The project's key when reading its own log (``root``); a :class:`UsageError` when there is
    none to be had (every line would then be ignored: better to say why)."""
    if root is None:
        return None
    from rosetta.signing import NoSecret, project_secret

    try:
        return project_secret(root)
    except NoSecret as exc:
        raise UsageError(Problem(f"cannot check the outcome log's signatures: {exc}", Location(str(root)))) from None


def _text(path: Path, root: str | os.PathLike[str] | None) -> str:
    try:
        return read_trusted(path, root, limit=MAX_LOG) if root is not None else read_regular(path, limit=MAX_LOG)
    except FileNotFoundError:
        return ""
    except UnicodeDecodeError as exc:  # a line torn inside a character: that line is skipped, not the log
        return bytes(exc.object).decode("utf-8", errors="replace")
    except NotRegularFile as exc:
        raise UsageError(Problem(f"cannot read the outcome log: {exc}", Location(str(path)),
                                 hint=f"the log must be a plain file of at most {MAX_LOG >> 20} MiB reached without "
                                      "symlinks: put the file itself in place of a link, or move a log that grew "
                                      "past that aside (rosetta starts a new one)")) from None
    except OSError as exc:
        raise UsageError(Problem(f"cannot read the outcome log: {exc.strerror or exc}", Location(str(path)))) from None


def _outcome(data: Any) -> Outcome:
    """One line's outcome; ValueError or TypeError for a line no recorder could have written."""
    if not isinstance(data, dict):
        raise TypeError("not an object")
    for key in ("experiment", "arm", "version"):
        if not isinstance(data.get(key), (str, type(None))):
            raise TypeError(f"bad {key}")
    if not isinstance(data["valid"], bool) or not isinstance(data.get("success"), (bool, type(None))):
        raise TypeError("bad flag")
    retries, latency, cost, score = data["retries"], data["latency_s"], data.get("cost_usd"), data.get("score")
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_VALUE:
        raise ValueError(f"retries {retries!r}")
    if not _plausible(latency, 0.0):
        raise ValueError(f"latency_s {latency!r}")
    if cost is not None and not _plausible(cost, 0.0):
        raise ValueError(f"cost_usd {cost!r}")
    if score is not None and not _plausible(score, -MAX_VALUE):
        raise ValueError(f"score {score!r}")
    return Outcome(str(data["ts"]), str(data["agent"]), str(data["model"]), data.get("experiment"), data.get("arm"),
                   data.get("version"), data["valid"], retries, float(latency),
                   None if cost is None else float(cost), data.get("success"), None if score is None else float(score))


def _plausible(value: Any, low: float) -> bool:
    """A number between ``low`` and :data:`MAX_VALUE`: never NaN or infinite (json reads both), nor
    an integer too large to be a float."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and low <= value <= MAX_VALUE
