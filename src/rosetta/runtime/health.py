"""Provider health: stop sending calls to an endpoint that keeps failing, for a while.

Each endpoint (provider + API base + key fingerprint, as metered by :mod:`rosetta.runtime.limits`)
keeps the outcomes of its recent calls, by when each call started. When at least ``min_calls``
started in the last ``window_s`` seconds and the provider's failures reach ``error_rate`` of them,
the endpoint cools down for ``cooldown_s``: runs skip its models and go down the fallback chain at
once instead of spending retries. After the cool-down it starts afresh.

Calls still out count as not failed (yet): a failure comes back in milliseconds and a success may
take seconds, so judging only the calls that have come back would see the fast failures of a batch
before any of its slow successes, and cool down an endpoint failing 30% of the time. A call counts
as out from when it is sent (after any wait for an in-flight slot) until its response arrives.
Outcomes that come back during a cool-down are kept for the next window, not dropped.

Only the provider's failures count (``classify`` says ``transient``): a 429 or 5xx, a read timeout
once the request was sent, a connection refused, dropped or reset, a 200 with no answer. Hard and
denied errors (a bad request; a key or model the endpoint refuses: 401, 403, 404) say nothing about
its health, and neither do this process's own limits: a call that found no free connection, or
opened none within its connect timeout (``local``), or no in-flight slot in time (``busy``), never
reached the provider, and under a spike thousands of those would cool down a healthy endpoint.
Shared by every thread and task of the process.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rosetta.settings import HealthPolicy


class ProviderHealth:
    """Recent outcomes per endpoint and the cool-downs they triggered."""

    def __init__(self, policy: HealthPolicy = HealthPolicy(), clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self.clock = clock
        self._lock = threading.Lock()
        self._outcomes: dict[str, deque[tuple[float, bool]]] = {}  # (when the call started, failed)
        self._out: dict[str, int] = {}  # calls sent and not yet back
        self._cooling_until: dict[str, float] = {}

    @contextmanager
    def sending(self, key: str) -> Iterator[None]:
        """While a call to ``key`` is out (from its request to its response, or until it is abandoned)."""
        with self._lock:
            self._out[key] = self._out.get(key, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._out[key] -= 1

    def record(self, key: str, failed: bool, started: float | None = None) -> None:
        """Count the outcome of one call that started at ``started`` (default: now; ``failed``: a
        transient error); may start a cool-down."""
        policy = self.policy
        with self._lock:
            now = self.clock()
            outcomes = self._outcomes.setdefault(key, deque())
            outcomes.append((now if started is None else started, failed))
            while outcomes and outcomes[0][0] < now - policy.window_s:
                outcomes.popleft()
            if self._cooling_until.get(key, 0.0) > now:
                return  # kept for after the cool-down
            failures = sum(1 for _, bad in outcomes if bad)
            calls = len(outcomes) + self._out.get(key, 0)  # those still out have not failed (yet)
            if calls >= policy.min_calls and failures >= policy.error_rate * calls:
                self._cooling_until[key] = now + policy.cooldown_s
                outcomes.clear()

    def cooling(self, key: str) -> float:
        """Seconds left in ``key``'s cool-down (0.0 when it may be called)."""
        with self._lock:
            until = self._cooling_until.get(key)
            if until is None:
                return 0.0
            left = until - self.clock()
            if left <= 0:
                del self._cooling_until[key]
                return 0.0
            return left

    def reset(self) -> None:
        with self._lock:
            self._outcomes.clear()
            self._cooling_until.clear()  # calls still out stay counted until they come back
