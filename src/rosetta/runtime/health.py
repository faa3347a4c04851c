"""Provider health: stop sending calls to an endpoint that keeps failing, for a while.

Each endpoint (provider + API base + key fingerprint, as metered by :mod:`rosetta.runtime.limits`)
keeps the outcomes of its recent calls. When at least ``min_calls`` fell in the last ``window_s``
seconds and the share of failures the provider caused reaches ``error_rate``, the endpoint cools
down for ``cooldown_s``: runs skip its models and go down the fallback chain at once instead of
spending retries. After the cool-down it starts afresh.

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
from collections.abc import Callable

from rosetta.settings import HealthPolicy


class ProviderHealth:
    """Recent outcomes per endpoint and the cool-downs they triggered."""

    def __init__(self, policy: HealthPolicy = HealthPolicy(), clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self.clock = clock
        self._lock = threading.Lock()
        self._outcomes: dict[str, deque[tuple[float, bool]]] = {}
        self._cooling_until: dict[str, float] = {}

    def record(self, key: str, failed: bool) -> None:
        """Count one call's outcome (``failed``: a transient error); may start a cool-down."""
        policy = self.policy
        with self._lock:
            now = self.clock()
            if self._cooling_until.get(key, 0.0) > now:
                return  # calls already in flight when the cool-down began
            outcomes = self._outcomes.setdefault(key, deque())
            outcomes.append((now, failed))
            while outcomes and outcomes[0][0] < now - policy.window_s:
                outcomes.popleft()
            failures = sum(1 for _, bad in outcomes if bad)
            if len(outcomes) >= policy.min_calls and failures / len(outcomes) >= policy.error_rate:
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
            self._cooling_until.clear()
