"""A project's traffic: its rate limiter and its provider-health tracker, built from its settings.

Every agent loaded from one project shares one :class:`Traffic` (calls with the same API key draw
from the same buckets and wait for the same in-flight slots, and one endpoint's outage cools it
down for all of them); another project
in the same process, with other limits or another health policy, gets its own. Nothing here is
process-wide state that one project's settings could leak into another's.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from rosetta.runtime.health import ProviderHealth
from rosetta.runtime.limits import RateLimiter
from rosetta.settings import Settings


@dataclass(frozen=True)
class Traffic:
    """The limiter (rates and in-flight bounds) and health tracker calls of one project go through."""

    limiter: RateLimiter
    health: ProviderHealth


_by_project: dict[tuple[Any, ...], Traffic] = {}
_lock = threading.Lock()


def traffic_for(dirs: Settings) -> Traffic:
    """The project's traffic, created on first use and shared by its agents; a project whose
    settings changed since gets a fresh one."""
    key = (dirs.root, tuple(sorted(dirs.rate_limits.items())), dirs.health)
    with _lock:
        if key not in _by_project:
            limiter = RateLimiter()
            for name, limit in dirs.rate_limits.items():
                limiter.configure(name, limit)
            _by_project[key] = Traffic(limiter, ProviderHealth(dirs.health))
        return _by_project[key]
