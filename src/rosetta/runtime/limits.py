"""Client-side limits shared by every call that uses the same API key: rate and concurrency.

Providers meter requests and tokens per minute per key, so the buckets are keyed by the
credential (its fingerprint, never the key) and the endpoint: two agents, threads or asyncio
tasks using one key draw from one budget. A bucket never blocks: :meth:`RateLimiter.reserve`
takes the tokens at once (the level may go negative) and says how long the caller must wait,
so the same code serves blocking and async callers. Token reservations count the prompt
estimate plus ``max_tokens`` (what providers count) and are settled with the real usage.

A :class:`Gate` per endpoint bounds the calls in flight (``Limit.max_in_flight``): a spike of
calls waits its turn here rather than in the HTTP client's pool, whose wait counts against
each call's connect timeout (500 calls at once over one pool time out before most are sent).
The wait has its own bound (``RetryPolicy.queue_timeout``): slots held by calls that hang, or by
streams their reader kept without reading or closing, fail the wait with :class:`GateTimeout`
instead of blocking it forever.

litellm's Router also has rpm/tpm, but as routing filters between deployments of one Router
instance: with a single deployment it fails the call instead of pacing it, and it is not shared
between Router instances. Pacing per key is what a client needs, hence these few lines.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rosetta.providers.credentials import credential_values
from rosetta.settings import Limit

if TYPE_CHECKING:
    import asyncio


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
        self._gates: dict[str, Gate] = {}

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
            self._gates.clear()  # calls in flight release the gate they hold; new calls get the new bound

    def limit_for(self, model: str) -> Limit | None:
        """The model's own limit, else its provider's."""
        return self.limits.get(model) or self.limits.get(model.split("/", 1)[0])

    def reserve(self, kwargs: Mapping[str, Any], prompt_tokens: int) -> Reservation | None:
        """Take one request and the call's token estimate; None when the model is unmetered."""
        model = str(kwargs.get("model", ""))
        limit = self.limit_for(model)
        if limit is None:
            return None
        key = self._key(kwargs, model)
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

    def gate(self, kwargs: Mapping[str, Any]) -> Gate:
        """The in-flight gate of the call's endpoint (keyed like its buckets); every endpoint has one."""
        model = str(kwargs.get("model", ""))
        key = self._key(kwargs, model)
        with self._lock:
            gate = self._gates.get(key)
            if gate is None:
                gate = self._gates[key] = Gate((self.limit_for(model) or Limit()).max_in_flight)
            return gate

    def _key(self, kwargs: Mapping[str, Any], model: str) -> str:
        """A model with a limit of its own has its own budget; others share their endpoint's."""
        return credential_key(kwargs) + "|" + model if model in self.limits else credential_key(kwargs)

    def settle(self, reservation: Reservation | None, used_tokens: int | None) -> None:
        """Return the tokens reserved but not used (nothing when usage is unknown)."""
        if reservation is None or used_tokens is None or used_tokens >= reservation.tokens:
            return
        with self._lock:
            bucket = self._tokens.get(reservation.key)
            if bucket is not None:
                bucket.give_back(reservation.tokens - used_tokens, self.clock())


class GateTimeout(TimeoutError):
    """No in-flight slot came free within the wait's bound; nothing was sent."""

    def __init__(self, limit: int, seconds: float) -> None:
        super().__init__(f"all {limit} in-flight slots of this endpoint stayed taken for {seconds:g}s; "
                         "nothing was sent")


class _Waiter:
    """One caller in line for a slot: how to wake it, and whether the slot is already its own."""

    __slots__ = ("wake", "granted")

    def __init__(self, wake: Callable[[], object]) -> None:
        self.wake = wake
        self.granted = False


class Gate:
    """At most ``limit`` holders at once; the others wait, first come first served.

    One gate serves threads and the asyncio tasks of any event loop alike: asyncio's own semaphore
    binds to the loop that first waits on it, and an agent outlives ``asyncio.run``. Its state sits
    under a thread lock, and a freed slot goes straight to the oldest waiter (a thread through an
    Event, a task through its loop's ``call_soon_threadsafe``), so no newcomer jumps the line.
    Use it as ``with gate:`` or ``async with gate:``.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._lock = threading.Lock()
        self._line: deque[_Waiter] = deque()

    @property
    def waiting(self) -> int:
        """Callers in line for a slot."""
        return len(self._line)

    def acquire(self, timeout: float | None = None) -> None:
        """Take a slot, blocking the thread until one is free; :class:`GateTimeout` after
        ``timeout`` seconds (``None``: no bound)."""
        with self._lock:
            if self.held < self.limit and not self._line:
                self.held += 1
                return
            event = threading.Event()
            waiter = _Waiter(event.set)
            self._line.append(waiter)
        try:
            freed = event.wait(timeout)
        except BaseException:  # interrupted (Ctrl-C): leave the line, or pass on the slot just handed over
            self._abandon(waiter)
            raise
        if not freed and self._leave(waiter):  # else a slot came just in time: it is ours
            raise GateTimeout(self.limit, timeout or 0.0)

    async def acquire_async(self, timeout: float | None = None) -> None:
        """Take a slot, suspending the task (not its loop) until one is free; :class:`GateTimeout`
        after ``timeout`` seconds (``None``: no bound)."""
        import asyncio  # only async callers pay for it

        loop = asyncio.get_running_loop()
        with self._lock:
            if self.held < self.limit and not self._line:
                self.held += 1
                return
            future = loop.create_future()
            waiter = _Waiter(lambda: loop.call_soon_threadsafe(_resolve, future))
            self._line.append(waiter)
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            if self._leave(waiter):  # else a slot came just in time: it is ours
                raise GateTimeout(self.limit, timeout or 0.0) from None
        except BaseException:  # cancelled: leave the line, or pass on the slot just handed over
            self._abandon(waiter)
            raise

    def release(self) -> None:
        """Free a slot: hand it to the oldest waiter, if any."""
        with self._lock:
            while self._line:
                waiter = self._line.popleft()
                try:
                    waiter.wake()
                except RuntimeError:  # its event loop has closed: nobody is left there to take the slot
                    continue
                waiter.granted = True
                return
            self.held -= 1

    def _leave(self, waiter: _Waiter) -> bool:
        """Leave the line, unless a slot was handed over meanwhile; whether it left."""
        with self._lock:
            if waiter.granted:
                return False
            if waiter in self._line:
                self._line.remove(waiter)
            return True

    def _abandon(self, waiter: _Waiter) -> None:
        """Leave the line, passing on a slot handed over meanwhile."""
        if not self._leave(waiter):
            self.release()

    def __enter__(self) -> Gate:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    async def __aenter__(self) -> Gate:
        await self.acquire_async()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():  # a cancelled waiter passes the slot on itself (Gate._abandon)
        future.set_result(None)


def credential_key(kwargs: Mapping[str, Any]) -> str:
    """``provider@endpoint#fingerprint``: who is metered, without keeping the key itself."""
    model = str(kwargs.get("model", ""))
    provider = model.split("/", 1)[0]  # canonical ids always carry their provider
    keys = [value for value in credential_values(model, kwargs) if value]
    fingerprint = hashlib.sha256("\0".join(keys).encode()).hexdigest()[:12] if keys else "-"
    return f"{provider}@{kwargs.get('api_base') or kwargs.get('base_url') or 'default'}#{fingerprint}"
