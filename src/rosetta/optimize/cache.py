"""The evaluation cache: one model answer per (rendered prompt, example, model, parameters), on disk.

A resumed, repeated or parallel study never pays twice for the same answer. Each answer is
committed as soon as it arrives (SQLite in WAL mode, safe across threads and processes), so a
study killed with SIGKILL loses at most the calls in flight. Entries also keep what the answer
cost (calls, USD), so budgets and recorded spend do not depend on what happened to be cached.

The file sits in the project, where anyone can write it, so nothing in it is taken on its word:
each entry carries an HMAC over its key and value under a secret kept outside the project (see
:mod:`signing`), and every value is range-checked when read. An entry that fails either check is a
miss (asked again, then overwritten), never a score or a discount on the budget; the cache says so
once. A cache file that is not a plain file (a symlink, a FIFO, a device) is not opened at all: the
search runs uncached, with a warning.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import sqlite3
import threading
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rosetta.fileio import NotRegularFile, trusted_path
from rosetta.local.project import LocalSettings
from rosetta.local.revision import answerer_revision
from rosetta.signing import NoSecret, project_secret, sign, verifies

if TYPE_CHECKING:
    from rosetta.datasets import Example
    from rosetta.render.prompt import RenderedPrompt

log = logging.getLogger("rosetta.optimize")


@dataclass(frozen=True)
class Answer:
    """What one evaluation call produced."""

    data: Any  # the parsed answer (JSON value or text); None when nothing usable came back
    raw: str
    valid: bool
    calls: int  # model calls it took, corrective retries included
    cost: float  # USD, from litellm's pricing (0 for local models)
    error: str | None = None
    odds: dict[str, float] | None = None  # each label's probability, when the answer was asked with logprobs


SENT = ("model", "system", "system_placement", "demos", "demo_pool", "user_blocks", "tools", "tool_envelope",
        "structured_output", "request_params", "generation", "output_schema")
"""The parts of a rendered prompt that decide the answer: what is sent, and what it is validated
against. Bookkeeping (knobs, token estimates, warnings) is left out, so two variants that send the
same request share one answer. ``demo_pool`` appears only in prompts that have one, so the keys of
all other prompts are what they were before it existed."""


def prompt_key(prompt: RenderedPrompt, options: dict[str, Any] | None = None, *,
               local: LocalSettings | None = None) -> str:
    """sha256 over what the model is sent (model and parameters included), how it is checked, and
    which build answers it where that is known (the embedded decoder's, for ``local/`` models, whose
    weights the project's ``local`` settings name)."""
    data = prompt.to_dict()
    payload: dict[str, Any] = {"prompt": {key: data[key] for key in SENT if key in data}, "options": options or {}}
    revision = answerer_revision(str(data["model"]), local)
    if revision:
        payload["answerer"] = revision
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def example_key(example: Example) -> str:
    """sha256 over an example's id and inputs (its label does not change the answer)."""
    payload = [example.id, example.inputs]
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


_TABLE = "CREATE TABLE answers (key TEXT PRIMARY KEY, value TEXT NOT NULL, digest TEXT)"
_UNSIGNED_TABLE = "CREATE TABLE answers (key TEXT PRIMARY KEY, value TEXT NOT NULL)"  # before entries were signed
_OURS = {("table", "answers"), ("index", "sqlite_autoindex_answers_1")}


class EvalCache:
    """A small key → :class:`Answer` store; ``path=None`` keeps it in memory only.

    ``path`` is ``<project>/.rosetta/eval-cache.sqlite``: the folder above its folder is the
    project, whose secret signs the entries (``secret`` overrides it) and below which no symlink
    may lead to the file. A path that cannot be trusted, or a secret that cannot be had, leaves the
    cache in memory only, with one warning that says why.
    """

    def __init__(self, path: Path | None, *, secret: bytes | None = None) -> None:
        self.path: Path | None = None
        self._secret = b""
        self._local = threading.local()
        self._memory: dict[str, Answer] = {}
        self._warned: set[str] = set()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        if path is None:
            return
        path = Path(os.path.abspath(path))
        try:
            self._secret = secret if secret is not None else project_secret(path.parent.parent)
            self._open(path)
        except (NoSecret, OSError, sqlite3.Error) as exc:
            self._close()
            self.path = None
            log.warning("evaluation cache not used, every answer is asked again: %s", _reason(path, exc))

    def _open(self, path: Path) -> None:
        self._check(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._check(path)
        self.path = path
        db = self._connection()
        db.execute("CREATE TABLE IF NOT EXISTS" + _TABLE.removeprefix("CREATE TABLE"))
        found = {(kind, name): sql for kind, name, sql in db.execute("SELECT type, name, sql FROM sqlite_master")}
        foreign = sorted(name for kind, name in found if (kind, name) not in _OURS)
        if foreign:  # a trigger or view could run anything on every read or write
            raise sqlite3.DatabaseError(f"it holds {', '.join(foreign)}, which rosetta never makes")
        table = found[("table", "answers")]
        if table == _UNSIGNED_TABLE:
            try:
                db.execute("ALTER TABLE answers ADD COLUMN digest TEXT")
            except sqlite3.OperationalError as exc:  # a parallel worker added it first
                if "duplicate column" not in str(exc):
                    raise
        elif table != _TABLE:
            raise sqlite3.DatabaseError(f"its answers table is not the one rosetta makes: {table}")

    @staticmethod
    def _check(path: Path) -> None:
        """The database and SQLite's two companion files must be plain files with no symlink on the way."""
        for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            trusted_path(file, path.parent.parent)

    def _connection(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(str(self.path), timeout=60, isolation_level=None)
            self._local.db = db
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
        return db

    def _close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    @staticmethod
    def key(prompt_hash: str, example_hash: str) -> str:
        return hashlib.sha256(f"{prompt_hash}:{example_hash}".encode()).hexdigest()

    def get(self, key: str, *, score: bool = False) -> Answer | None:
        """The answer kept under ``key``, or None; ``score``: the entry is a metric's verdict, whose
        ``data`` must be a score in [0, 1]. An entry that is not signed by this project or holds an
        impossible value is None too (asked again, and overwritten)."""
        answer = self._memory.get(key)
        if answer is None and self.path is not None:
            answer = self._stored(key, score)
        if answer is None:
            self.misses += 1
        else:
            self.hits += 1
        return answer

    def _stored(self, key: str, score: bool) -> Answer | None:
        try:
            row = self._connection().execute("SELECT value, digest FROM answers WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            self._warn("unreadable", f"the evaluation cache {self.path} cannot be read ({exc}): its answers are "
                                     "asked again")
            return None
        if row is None:
            return None
        value, digest = row
        if not isinstance(value, str) or not verifies(self._secret, key, value, digest):
            self._warn("unsigned", f"the evaluation cache {self.path} holds entries this project did not sign "
                                   "(planted, copied from another project, or written by an older rosetta): they "
                                   "are asked again and overwritten")
            return None
        try:
            return checked(json.loads(value), score=score)
        except (ValueError, OverflowError) as exc:
            self._warn("range", f"the evaluation cache {self.path} holds signed entries with impossible values "
                                f"(the first: {exc}): they are asked again")
            return None

    def put(self, key: str, answer: Answer) -> None:
        self._memory[key] = answer
        if self.path is None:
            return
        value = json.dumps(asdict(answer), ensure_ascii=False, default=str)
        try:
            self._connection().execute("INSERT OR REPLACE INTO answers (key, value, digest) VALUES (?, ?, ?)",
                                       (key, value, sign(self._secret, key, value)))
        except sqlite3.Error as exc:
            self._warn("unwritable", f"the evaluation cache {self.path} cannot be written ({exc}): answers are "
                                     "kept for this run only")

    def _warn(self, kind: str, message: str) -> None:
        """Log ``message`` once per cache and kind of trouble, not once per entry."""
        with self._lock:
            if kind in self._warned:
                return
            self._warned.add(kind)
        log.warning("%s", message)


_FIELDS = {field.name for field in fields(Answer)}


def checked(data: object, *, score: bool = False) -> Answer:
    """``data`` (a stored entry) as an :class:`Answer`, or ValueError naming the impossible value:
    calls a whole number ≥ 0, cost a finite number ≥ 0, label probabilities and (``score``) a
    verdict finite and within [0, 1]."""
    if not isinstance(data, dict) or not {"data", "raw", "valid", "calls", "cost"} <= set(data) <= _FIELDS:
        raise ValueError("fields other than an answer's")
    calls, cost, odds = data["calls"], data["cost"], data.get("odds")
    if not isinstance(calls, int) or isinstance(calls, bool) or calls < 0:
        raise ValueError(f"calls {calls!r} (a whole number ≥ 0 expected)")
    if not _number(cost) or cost < 0:
        raise ValueError(f"cost {cost!r} (a finite number ≥ 0 expected)")
    if not isinstance(data["raw"], str) or not isinstance(data["valid"], bool) \
            or not isinstance(data.get("error"), (str, type(None))):
        raise ValueError("a raw answer, validity or error of the wrong type")
    if odds is not None and (not isinstance(odds, dict) or not all(_unit(p) for p in odds.values())):
        raise ValueError(f"label probabilities {odds!r} (numbers in [0, 1] expected)")
    if score and not _unit(data["data"]):
        raise ValueError(f"a score of {data['data']!r} (a number in [0, 1] expected)")
    return Answer(**data)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _unit(value: object) -> bool:
    return _number(value) and 0.0 <= value <= 1.0  # type: ignore[operator]


def _reason(path: Path, error: BaseException) -> str:
    if isinstance(error, NoSecret):
        return str(error)
    if isinstance(error, NotRegularFile):
        return f"{error}; remove it and rosetta makes a new cache"
    return f"{path}: {error}; delete it and rosetta makes a new one (it only saves calls)"
