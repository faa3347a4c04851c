"""Client-side rate limits shared by every call that uses the same API key.

Providers meter requests and tokens per minute per key, so the buckets are keyed by the
credential (its fingerprint, never the key) and the endpoint: two agents, threads or asyncio
tasks using one key draw from one budget. A bucket never blocks: :meth:`RateLimiter.reserve`
takes the tokens at once (the level may go negative) and says how long the caller must wait,
so the same code serves blocking and async callers. Token reservations count the prompt
estimate plus ``max_tokens`` (what providers count) and are settled with the real usage.

litellm's Router also has rpm/tpm, but as routing filters between deployments of one Router
instance: with a single deployment it fails the call instead of pacing it, and it is not shared
between Router instances. Pacing per key is what a client needs, hence these few lines.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rosetta.project import Limit


class TokenBucket:
    """``per_minute`` units refilled continuously, holding at most one minute's worth."""

    def __init__(self, per_minute: float, now: float) -> None:
        self.per_minute = float(per_minute)
        self.level = self.per_minute
        self.stamp = now

    def take(self, amount: float, now: float) -> float:
        """Take ``amount`` (capped at the capacity) and return the seconds until it is covered."""
        self._refill(now)
        self.level -= min(amount, self.per_minute)
        return max(0.0, -self.level / self.per_minute * 60.0)

    def give_back(self, amount: float, now: float) -> None:
        self._refill(now)
        self.level = min(self.per_minute, self.level + amount)

    def _refill(self, now: float) -> None:
        self.level = min(self.per_minute, self.level + (now - self.stamp) * self.per_minute / 60.0)
        self.stamp = now


@dataclass(frozen=True)
class Reservation:
    """What one call took from its key's buckets, to settle once its real usage is known."""

    key: str
    tokens: int
    wait: float


class RateLimiter:
    """Per-key request and token buckets; safe across threads and asyncio tasks (one lock, no I/O)."""

    def __init__(self, limits: Mapping[str, Limit] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits: dict[str, Limit] = dict(limits or {})
        self.clock = clock
        self._lock = threading.Lock()
        self._requests: dict[str, TokenBucket] = {}
        self._tokens: dict[str, TokenBucket] = {}

    def configure(self, name: str, limit: Limit | None) -> None:
        """Set (or with ``None`` remove) the limit of a provider (``openai``) or a model id."""
        with self._lock:
            if self.limits.get(name) == limit:
                return  # loading another agent of the same project keeps the buckets' levels
            if limit is None:
                self.limits.pop(name, None)
            else:
                self.limits[name] = limit
            self._requests.clear()
            self._tokens.clear()

    def limit_for(self, model: str) -> Limit | None:
        """The model's own limit, else its provider's."""
        return self.limits.get(model) or self.limits.get(model.split("/", 1)[0])

    def reserve(self, kwargs: Mapping[str, Any], prompt_tokens: int) -> Reservation | None:
        """Take one request and the call's token estimate; None when the model is unmetered."""
        model = str(kwargs.get("model", ""))
        limit = self.limit_for(model)
        if limit is None:
            return None
        key = credential_key(kwargs) + "|" + model if model in self.limits else credential_key(kwargs)
        tokens = prompt_tokens + int(kwargs.get("max_tokens") or kwargs.get("max_completion_tokens") or 0)
        with self._lock:
            now = self.clock()
            wait = 0.0
            if limit.requests_per_minute:
                bucket = self._requests.setdefault(key, TokenBucket(limit.requests_per_minute, now))
                wait = bucket.take(1, now)
            if limit.tokens_per_minute:
                bucket = self._tokens.setdefault(key, TokenBucket(limit.tokens_per_minute, now))
                wait = max(wait, bucket.take(tokens, now))
        return Reservation(key, tokens, wait)

    def settle(self, reservation: Reservation | None, used_tokens: int | None) -> None:
        """Return the tokens reserved but not used (nothing when usage is unknown)."""
        if reservation is None or used_tokens is None or used_tokens >= reservation.tokens:
            return
        with self._lock:
            bucket = self._tokens.get(reservation.key)
            if bucket is not None:
                bucket.give_back(reservation.tokens - used_tokens, self.clock())


def credential_key(kwargs: Mapping[str, Any]) -> str:
    """``provider@endpoint#fingerprint``: who is metered, without keeping the key itself."""
    model = str(kwargs.get("model", ""))
    provider = model.split("/", 1)[0]  # canonical ids always carry their provider
    key = kwargs.get("api_key") or os.environ.get(f"{provider.upper()}_API_KEY", "")
    fingerprint = hashlib.sha256(str(key).encode()).hexdigest()[:12] if key else "-"
    return f"{provider}@{kwargs.get('api_base') or kwargs.get('base_url') or 'default'}#{fingerprint}"
