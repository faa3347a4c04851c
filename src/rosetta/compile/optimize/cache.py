"""The evaluation cache: one model answer per (rendered prompt, example, model, parameters), on disk.

A resumed, repeated or parallel study never pays twice for the same answer. Each answer is
committed as soon as it arrives (SQLite in WAL mode, safe across threads and processes), so a
study killed with SIGKILL loses at most the calls in flight. Entries also keep what the answer
cost (calls, USD), so budgets and recorded spend do not depend on what happened to be cached.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rosetta.providers.local_revision import answerer_revision


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


def prompt_key(prompt: Any, options: dict[str, Any] | None = None) -> str:
    """sha256 over what the model is sent (model and parameters included), how it is checked, and
    which build answers it where that is known (the embedded decoder's, for ``local/`` models)."""
    data = prompt.to_dict()
    payload = {"prompt": {key: data[key] for key in SENT if key in data}, "options": options or {}}
    revision = answerer_revision(str(data["model"]))
    if revision:
        payload["answerer"] = revision
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def example_key(example: Any) -> str:
    """sha256 over an example's id and inputs (its label does not change the answer)."""
    payload = [example.id, example.inputs]
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class EvalCache:
    """A small key → :class:`Answer` store; ``path=None`` keeps it in memory only."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._local = threading.local()
        self._memory: dict[str, Answer] = {}
        self.hits = 0
        self.misses = 0
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            with self._connection() as db:
                db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    def _connection(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(str(self.path), timeout=60, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
        return db

    @staticmethod
    def key(prompt_hash: str, example_hash: str) -> str:
        return hashlib.sha256(f"{prompt_hash}:{example_hash}".encode()).hexdigest()

    def get(self, key: str) -> Answer | None:
        answer = self._memory.get(key)
        if answer is None and self.path is not None:
            row = self._connection().execute("SELECT value FROM answers WHERE key = ?", (key,)).fetchone()
            if row is not None:
                try:
                    answer = Answer(**json.loads(row[0]))
                except (TypeError, ValueError):
                    answer = None  # an entry from an older format: ask again
        if answer is None:
            self.misses += 1
        else:
            self.hits += 1
        return answer

    def put(self, key: str, answer: Answer) -> None:
        self._memory[key] = answer
        if self.path is not None:
            self._connection().execute("INSERT OR REPLACE INTO answers (key, value) VALUES (?, ?)",
                                       (key, json.dumps(asdict(answer), ensure_ascii=False, default=str)))
