"""Rate limits per API key, in-flight bounds per endpoint and provider health cool-downs: the parts
alone (with a fake clock), what counts against an endpoint (real failures from litellm), then
through agent.run / arun against the local fault server."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from fault_server import FaultServer

from rosetta.errors import ConfigError
from rosetta.runtime.agent import load
from rosetta.runtime.health import HealthPolicy, ProviderHealth
from rosetta.runtime.invoke import classify
from rosetta.runtime.result import ModelCallError, RetryPolicy
from rosetta.runtime.limits import Gate, Limit, RateLimiter, credential_key

GOOD = json.dumps({"severity": "high", "rationale": "Unauthenticated SQL injection in the login form."})
REPORT = {"report": "SQL injection in the login form lets an unauthenticated attacker bypass authentication."}
FAST = RetryPolicy(attempts=3, base=0.01, multiplier=2.0, cap=0.05, timeout=2.0)
KEY = "sk-test-not-a-real-key"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def request(key: str = "sk-a", model: str = "openai/gpt-4o", **extra) -> dict:
    return {"model": model, "api_key": key, "api_base": "http://127.0.0.1:1/v1", **extra}


# -- the limiter alone ---------------------------------------------------------------------------

def test_requests_beyond_a_minutes_budget_wait_their_turn():
    clock = Clock()
    limiter = RateLimiter({"openai": Limit(requests_per_minute=60)}, clock=clock)
    waits = [limiter.reserve(request(), 0).wait for _ in range(63)]
    assert waits[:60] == [0.0] * 60 and waits[60:] == pytest.approx([1.0, 2.0, 3.0])
    clock.now += 10  # ten requests' worth refilled, three of them already promised
    assert [limiter.reserve(request(), 0).wait for _ in range(8)] == pytest.approx([0.0] * 7 + [1.0])


def test_tokens_count_prompt_plus_max_tokens_and_unused_ones_come_back():
    clock = Clock()
    limiter = RateLimiter({"openai": Limit(tokens_per_minute=6000)}, clock=clock)
    first = limiter.reserve(request(max_tokens=1000), 2000)
    assert first.tokens == 3000 and first.wait == 0.0
    second = limiter.reserve(request(max_tokens=1000), 2000)
    assert second.wait == 0.0
    assert limiter.reserve(request(max_tokens=1000), 2000).wait == pytest.approx(30.0)  # 3,000 short at 100/s
    limiter.settle(first, 500)  # 2,500 unused tokens return
    assert limiter.reserve(request(max_tokens=0), 0).wait == pytest.approx(5.0)


def test_buckets_are_per_api_key_and_a_model_limit_beats_its_providers():
    clock = Clock()
    limiter = RateLimiter({"openai": Limit(requests_per_minute=1), "openai/o3": Limit(requests_per_minute=2)},
                          clock=clock)
    assert limiter.reserve(request("sk-a"), 0).wait == 0.0
    assert limiter.reserve(request("sk-a"), 0).wait == pytest.approx(60.0)
    assert limiter.reserve(request("sk-b"), 0).wait == 0.0  # another key: its own budget
    assert [limiter.reserve(request("sk-a", "openai/o3"), 0).wait for _ in range(3)] == pytest.approx([0, 0, 30])
    assert limiter.reserve(request(model="anthropic/claude-sonnet-5-5"), 0) is None  # unmetered


def test_credential_key_never_holds_the_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-1234567890")
    from_env = credential_key({"model": "openai/gpt-4o"})
    assert "sk-from-env" not in from_env and from_env.startswith("openai@default#")
    assert credential_key({"model": "openai/o3"}) == from_env  # one key, one budget across models
    assert credential_key({"model": "openai/gpt-4o", "api_key": "sk-other"}) != from_env


def test_concurrent_threads_share_one_budget_exactly():
    clock = Clock()
    limiter = RateLimiter({"openai": Limit(requests_per_minute=600)}, clock=clock)
    waits: list[float] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(100):
            wait = limiter.reserve(request(), 0).wait
            with lock:
                waits.append(wait)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # 800 requests against 600/min: 600 go now, the other 200 are spaced 0.1 s apart, none twice
    assert sorted(waits) == pytest.approx([0.0] * 600 + [0.1 * n for n in range(1, 201)])


# -- health alone --------------------------------------------------------------------------------

def test_an_outage_cools_down_and_recovers():
    clock = Clock()
    health = ProviderHealth(HealthPolicy(window_s=60, min_calls=4, error_rate=0.75, cooldown_s=30), clock=clock)
    for failed in (True, False, True, True):
        assert health.cooling("p") == 0.0
        health.record("p", failed)
    assert health.cooling("p") == pytest.approx(30.0)
    assert health.cooling("q") == 0.0  # other endpoints are unaffected
    clock.now += 31
    assert health.cooling("p") == 0.0
    health.record("p", True)  # a fresh window after the cool-down: one failure is not an outage
    assert health.cooling("p") == 0.0


def test_old_outcomes_leave_the_window_and_degraded_service_does_not_trip():
    clock = Clock()
    health = ProviderHealth(HealthPolicy(window_s=10, min_calls=4, error_rate=0.75, cooldown_s=30), clock=clock)
    for _ in range(3):
        health.record("p", True)
    clock.now += 11
    health.record("p", True)  # the first three are too old to count
    assert health.cooling("p") == 0.0
    for failed in [True, False, False, True] * 10:  # 50% errors: retries handle it
        health.record("p", failed)
    assert health.cooling("p") == 0.0


def test_calls_still_out_count_as_not_failed_so_fast_failures_do_not_trip_before_slow_successes():
    clock = Clock()
    health = ProviderHealth(HealthPolicy(window_s=60, min_calls=20, error_rate=0.8, cooldown_s=30), clock=clock)
    calls = [health.sending("p") for _ in range(100)]
    for call in calls:
        call.__enter__()
    started = clock()
    for call in calls[:30]:  # 30 of the 100 fail at once, while the 70 others are still out
        call.__exit__(None, None, None)
        health.record("p", True, started)
    assert health.cooling("p") == 0.0
    for call in calls[30:]:  # then the successes come back, one by one
        call.__exit__(None, None, None)
        health.record("p", False, started)
    assert health.cooling("p") == 0.0
    for _ in range(20):  # an outage: every call fails, none is out
        with health.sending("p"):
            pass
        health.record("p", True, clock())
    assert health.cooling("p") == 0.0  # 50 of 120 in the window
    for _ in range(250):  # 300 failures of 370: past 80%
        health.record("p", True, clock())
    assert health.cooling("p") == pytest.approx(30.0)


def test_outcomes_coming_back_during_a_cool_down_are_kept_for_after_it():
    clock = Clock()
    health = ProviderHealth(HealthPolicy(window_s=60, min_calls=4, error_rate=0.75, cooldown_s=5), clock=clock)
    for _ in range(4):
        health.record("p", True)
    assert health.cooling("p") > 0
    for _ in range(12):  # calls that started before the cool-down, coming back fine
        health.record("p", False)
    clock.now += 6
    health.record("p", True)  # 1 failure in 13: the endpoint is fine
    assert health.cooling("p") == 0.0


# -- the in-flight gate alone -------------------------------------------------------------------

def until(condition: Callable[[], bool]) -> None:
    """Wait for another thread to get somewhere (no timing is asserted)."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.005)


def test_every_endpoint_has_a_gate_64_wide_unless_its_limit_says_otherwise():
    limiter = RateLimiter({"openai": Limit(max_in_flight=8), "openai/o3": Limit(requests_per_minute=5)})
    assert limiter.gate(request()).limit == 8 and limiter.gate(request()) is limiter.gate(request())
    assert limiter.gate(request("sk-b")) is not limiter.gate(request())  # another key, another endpoint
    assert limiter.gate(request(model="openai/o3")).limit == 64  # a model with its own entry counts alone
    assert limiter.gate(request(model="anthropic/claude-sonnet-5-5")).limit == Limit().max_in_flight == 64


def test_a_gate_admits_its_limit_and_hands_freed_slots_over_in_arrival_order():
    gate, order = Gate(2), []
    gate.acquire()
    gate.acquire()
    threads = []
    for number in range(3):
        threads.append(threading.Thread(target=lambda n=number: (gate.acquire(), order.append(n))))
        threads[-1].start()
        until(lambda n=number: gate.waiting == n + 1)
    for number in range(3):
        assert len(order) == number and gate.held == 2
        gate.release()
        until(lambda n=number: len(order) == n + 1)
    for thread in threads:
        thread.join()
    assert order == [0, 1, 2] and gate.held == 2 and gate.waiting == 0


def test_one_gate_serves_threads_and_the_tasks_of_several_event_loops():
    gate, order = Gate(1), []

    def loop_in_a_thread(name: str) -> None:
        async def main() -> None:
            async with gate:
                order.append(name)

        asyncio.run(main())

    gate.acquire()  # held by this thread
    loops = [threading.Thread(target=loop_in_a_thread, args=(name,)) for name in ("a", "b")]
    for number, thread in enumerate(loops):
        thread.start()
        until(lambda n=number: gate.waiting == n + 1)
    gate.release()  # wakes loop a's task; it hands the slot to loop b's on leaving
    for thread in loops:
        thread.join()
    loop_in_a_thread("c")  # a third loop, after the first two closed
    assert order == ["a", "b", "c"] and gate.held == 0


def test_a_cancelled_waiter_leaves_the_line_and_passes_on_a_slot_handed_to_it():
    gate = Gate(1)

    async def main() -> None:
        await gate.acquire_async()
        first, second, third = (asyncio.create_task(gate.acquire_async()) for _ in range(3))
        await asyncio.sleep(0)
        assert gate.waiting == 3
        first.cancel()  # still in line: it leaves
        await asyncio.gather(first, return_exceptions=True)
        assert gate.waiting == 2
        gate.release()  # the slot goes to second, which is cancelled before it resumes...
        second.cancel()
        await asyncio.gather(second, return_exceptions=True)
        await third  # ...and passes it on instead of losing it
        assert gate.held == 1 and gate.waiting == 0
        gate.release()

    asyncio.run(main())
    assert gate.held == 0


# -- what counts against an endpoint: real failures, as litellm raises them -----------------------

def completion(url: str, timeout: object, **extra) -> object:
    """One blocking litellm call to ``url``: its response, or the exception it raised."""
    from rosetta.local.litellm_offline import import_litellm

    try:
        return import_litellm().completion(**litellm_request(url, timeout, **extra))
    except Exception as error:
        return error


async def acompletion(url: str, timeout: object, **extra) -> object:
    """:func:`completion`, awaited."""
    from rosetta.local.litellm_offline import import_litellm

    try:
        return await import_litellm().acompletion(**litellm_request(url, timeout, **extra))
    except Exception as error:
        return error


def litellm_request(url: str, timeout: object, **extra) -> dict:
    return {"model": "openai/gpt-4o", "messages": [{"role": "user", "content": "hi"}], "api_base": url,
            "api_key": KEY, "timeout": timeout, "num_retries": 0, "max_retries": 0, **extra}


def chain(error: BaseException) -> str:
    links = []
    while error is not None:
        links.append(type(error).__name__)
        error = error.__cause__ or error.__context__
    return " <- ".join(links)


@contextlib.contextmanager
def unanswered() -> Iterator[str]:
    """A URL whose connections never open: the listener's accept queue is full, so the kernel drops
    new connection attempts and the client's own connect timeout runs out."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = [socket.socket() for _ in range(4)]
    for filler in fillers:
        filler.setblocking(False)
        filler.connect_ex(listener.getsockname())
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        for sock in (*fillers, listener):
            sock.close()


@pytest.mark.parametrize("fault", [("status", 503), ("status", 429), ("stall", 3.0), ("drop",), ("reset",)],
                         ids=lambda fault: "-".join(map(str, fault)))
def test_failures_the_provider_caused_count_against_its_endpoint(fault):
    with FaultServer([fault]) as server:
        blocking = completion(server.url, 0.5)  # a stall: the read times out after the request was sent
        awaited = asyncio.run(acompletion(server.url, 0.5))
    assert len(server.requests) == 2  # both reached the provider
    for error in (blocking, awaited):
        assert isinstance(error, Exception) and classify(error) == "transient", chain(error)


def test_a_refused_connection_counts_against_the_endpoint():
    with unanswered() as url:
        pass  # the port is closed again: nothing listens there now
    for error in (completion(url, 0.5), asyncio.run(acompletion(url, 0.5))):
        assert classify(error) == "transient", chain(error)


def test_a_connection_the_client_never_opened_in_time_is_not_the_providers_failure():
    with unanswered() as url:
        for error in (completion(url, 0.3), asyncio.run(acompletion(url, 0.3))):
            # litellm.Timeout <- openai.APITimeoutError <- httpx.ConnectTimeout (<- aiohttp.ConnectionTimeoutError)
            assert "ConnectTimeout" in chain(error) and classify(error) == "local", chain(error)


def test_waiting_for_a_pooled_connection_is_not_the_providers_failure():
    import httpx
    import openai

    timeout = httpx.Timeout(5.0, pool=0.2)  # the pool's wait: the client's own wall-clock limit
    single = httpx.Limits(max_connections=1)
    with FaultServer([("stall", 1.0)]) as server:
        client = openai.OpenAI(api_key=KEY, base_url=server.url, max_retries=0,
                               http_client=httpx.Client(limits=single))
        with ThreadPoolExecutor(1) as pool:
            holder = pool.submit(completion, server.url, timeout, client=client)
            until(lambda: len(server.requests) == 1)
            blocking = completion(server.url, timeout, client=client)
            holder.result()

        async def behind_another_call() -> object:
            aclient = openai.AsyncOpenAI(api_key=KEY, base_url=server.url, max_retries=0,
                                         http_client=httpx.AsyncClient(limits=single))
            holder = asyncio.create_task(acompletion(server.url, timeout, client=aclient))
            while len(server.requests) < 2:
                await asyncio.sleep(0.005)
            error = await acompletion(server.url, timeout, client=aclient)
            await holder
            return error

        awaited = asyncio.run(behind_another_call())
    assert len(server.requests) == 2  # only the calls that held the connection were sent
    for error in (blocking, awaited):
        assert "PoolTimeout" in chain(error) and classify(error) == "local", chain(error)


def test_running_out_of_sockets_is_not_the_providers_failure():
    import httpx

    with pytest.raises(httpx.ConnectError) as caught:
        try:
            raise OSError(errno.EMFILE, "Too many open files")
        except OSError as exc:
            raise httpx.ConnectError(str(exc)) from exc
    assert classify(caught.value) == "local"


# -- through agent.run ---------------------------------------------------------------------------

@pytest.fixture
def agent(tree):
    from rosetta.compile.compiler import CompileOptions, compile_paths
    from rosetta.providers.adapter import load_adapters

    options = CompileOptions(out=tree / "compiled", root=tree, adapters=load_adapters(),
                             models=("openai/gpt-4o", "o3", "sonnet"))
    compile_paths([tree / "signatures"], options, jobs=1)
    return load("vuln-triage", project=tree)


def test_calls_are_paced_when_the_keys_budget_is_spent(agent):
    # 0.1 s a request once drained; the limiter's clock stands still, so the slots it hands out are exact
    limiter = RateLimiter({"openai": Limit(requests_per_minute=600)}, clock=lambda: 500.0)
    with FaultServer([("ok", GOOD)]) as server:
        other = agent.run(REPORT, "openai/gpt-4o", api_base=server.url, api_key="sk-test-other", limiter=limiter,
                          policy=FAST)  # another key: not delayed (and everything is imported and warm)
        drained = {"model": "openai/gpt-4o", "api_base": server.url, "api_key": "sk-test-shared"}
        for _ in range(600):
            limiter.reserve(drained, 0)

        async def burst():
            return await asyncio.gather(*(agent.arun(REPORT, "openai/gpt-4o", api_base=server.url,
                                                     api_key="sk-test-shared", limiter=limiter, policy=FAST)
                                          for _ in range(5)))

        results = asyncio.run(burst())
    assert all(r.valid for r in results) and other.valid and other.attempts[0].waited_s == 0.0
    # one request every 0.1 s once the budget is spent: each waited for its own slot, the slots 0.1 s
    # apart (what the limiter decides; arrival gaps at the server also carry the machine's load)
    waits = sorted(a.waited_s for r in results for a in r.attempts)
    assert len(server.requests[1:]) == 5 and waits == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5], abs=1e-6)
    arrivals = sorted(r["time"] for r in server.requests[1:])
    assert arrivals[-1] - arrivals[0] >= 0.3  # the five really were spread out, not sent at once


def test_a_cooling_provider_is_skipped_for_the_next_provider(agent):
    now = [1000.0]  # the health's clock: the cool-down passes when the test says so, not after a sleep
    health = ProviderHealth(HealthPolicy(window_s=60, min_calls=3, error_rate=1.0, cooldown_s=2.0),
                            clock=lambda: now[0])
    script = [("status", 503)] * 3 + [("ok", GOOD)]
    with FaultServer(script) as server:
        result = agent.run(REPORT, "openai/gpt-4o", fallbacks=["openai/o3", "sonnet"], api_base=server.url,
                           api_key="sk-test-not-a-real-key", health=health, policy=FAST)
        # gpt-4o: three 503s trip the breaker; o3 (same endpoint) is skipped without a request;
        # Claude answers through the Anthropic Messages API
        assert [(a.model.split("/")[-1], a.outcome) for a in result.attempts] == [
            ("gpt-4o", "transient")] * 3 + [("o3", "unavailable"), ("claude-sonnet-5-5", "ok")]
        assert len(server.requests) == 4 and server.requests[-1]["path"].endswith("/messages")
        assert result.valid and result.data["severity"] == "high"
        with pytest.raises(ModelCallError) as caught:  # everything left in the chain is cooling
            agent.run(REPORT, "openai/gpt-4o", fallbacks=["openai/o3"], api_base=server.url,
                      api_key="sk-test-not-a-real-key", health=health, policy=FAST)
        assert "cooling down" in str(caught.value) and len(server.requests) == 4
        now[0] += 2.1
        after = agent.run(REPORT, "openai/gpt-4o", api_base=server.url, api_key="sk-test-not-a-real-key",
                          health=health, policy=FAST)
    assert after.model == "openai/gpt-4o" and after.valid


def test_hard_errors_do_not_count_against_health(agent):
    health = ProviderHealth(HealthPolicy(window_s=60, min_calls=2, error_rate=1.0, cooldown_s=60))
    with FaultServer([("status", 400)]) as server:
        for _ in range(3):
            with pytest.raises(ModelCallError):
                agent.run(REPORT, "openai/gpt-4o", api_base=server.url, api_key="sk-test-not-a-real-key",
                          health=health, policy=FAST)
    assert len(server.requests) == 3 and health.cooling(credential_key(
        {"model": "openai/gpt-4o", "api_base": server.url, "api_key": "sk-test-not-a-real-key"})) == 0.0


def endpoint(url: str) -> str:
    return credential_key({"model": "openai/gpt-4o", "api_base": url, "api_key": KEY})


def test_only_the_providers_failures_cool_down_its_endpoint(agent):
    health = ProviderHealth(HealthPolicy(window_s=60, min_calls=3, error_rate=1.0, cooldown_s=60))
    policy = RetryPolicy(attempts=3, base=0.01, multiplier=2.0, cap=0.05, timeout=0.3)
    with unanswered() as url:
        with pytest.raises(ModelCallError) as caught:
            agent.run(REPORT, "openai/gpt-4o", fallbacks=[], api_base=url, api_key=KEY, health=health, policy=policy)
    assert [a.outcome for a in caught.value.attempts] == ["local"] * 3  # retried, after a backoff
    assert health.cooling(endpoint(url)) == 0.0
    with FaultServer([("stall", 2.0)]) as server:  # the same timeout once the request is out: the provider's
        with pytest.raises(ModelCallError) as caught:
            agent.run(REPORT, "openai/gpt-4o", fallbacks=[], api_base=server.url, api_key=KEY, health=health,
                      policy=policy)
    assert [a.outcome for a in caught.value.attempts] == ["transient"] * 3
    assert health.cooling(endpoint(server.url)) > 0


def test_a_spike_waits_for_a_slot_and_the_wait_is_not_part_of_the_timeout(agent, tree):
    (tree / "pyproject.toml").write_text("[project]\nname = 'demo'\n\n[tool.rosetta.rate_limits]\n"
                                         "openai = {max_in_flight = 2}\n")
    limited = load("vuln-triage", project=tree)
    policy = RetryPolicy(attempts=1, timeout=1.0)  # any timeout would fail its call
    with FaultServer([("stall", 0.3, GOOD)]) as server:
        options = {"fallbacks": [], "api_base": server.url, "api_key": KEY, "policy": policy}

        async def four() -> list:
            return await asyncio.gather(*(limited.arun(REPORT, "openai/gpt-4o", **options) for _ in range(4)))

        with ThreadPoolExecutor(6) as pool:  # four threads, and two event loops of four tasks each
            blocking = [pool.submit(limited.run, REPORT, "openai/gpt-4o", **options) for _ in range(4)]
            awaited = [pool.submit(asyncio.run, four()) for _ in range(2)]
            results = [f.result() for f in blocking] + [r for f in awaited for r in f.result()]
    # twelve calls of 0.3 s, two at a time: the last ones waited longer than their 1 s timeout, unharmed
    assert len(results) == 12 and all(r.valid and [a.outcome for a in r.attempts] == ["ok"] for r in results)
    assert len(server.requests) == 12 and server.peak <= 2


# -- configuration -------------------------------------------------------------------------------

def test_project_limits_and_health_are_read_from_the_settings(tree, monkeypatch):
    from rosetta.settings import load_settings

    (tree / "pyproject.toml").write_text(
        "[tool.rosetta.rate_limits]\nopenai = {requests_per_minute = 500, tokens_per_minute = 30000, "
        "max_in_flight = 16}\n"
        "'openai/o3' = {requests_per_minute = 50}\n[tool.rosetta.health]\ncooldown_s = 5\nmin_calls = 10\n")
    settings = load_settings(tree)
    assert settings.rate_limits == {"openai": Limit(500, 30000, 16), "openai/o3": Limit(50, None)}
    assert (settings.health.cooldown_s, settings.health.min_calls) == (5, 10)
    monkeypatch.setenv("ROSETTA_RATE_LIMITS", '{"gemini": {"requests_per_minute": 5}, "openai": {"tokens_per_minute": 9}}')
    expected = {"gemini": Limit(5, None), "openai": Limit(500, 9, 16), "openai/o3": Limit(50, None)}
    assert load_settings(tree).rate_limits == expected


@pytest.mark.parametrize("toml, message", [
    ("[tool.rosetta.rate_limits]\nopenai = {requests_per_min = 5}\n", "unknown rate limit key"),
    ("[tool.rosetta.rate_limits]\nopenai = {requests_per_minute = -5}\n", "must be a positive number"),
    ("[tool.rosetta.rate_limits]\nopenai = 5\n", "must be a table"),
    ("[tool.rosetta.rate_limits]\nopenai = {max_in_flight = 2.5}\n", "must be a positive integer"),
    ("[tool.rosetta.health]\nerror_rate = 2\n", "at most 1"),
    ("[tool.rosetta.health]\ncooldown = 5\n", "unknown health setting"),
])
def test_bad_traffic_settings_are_clear_errors(tree, toml, message):
    from rosetta.settings import load_settings

    (tree / "pyproject.toml").write_text(toml)
    with pytest.raises(ConfigError) as caught:
        load_settings(tree)
    assert message in str(caught.value)


def test_two_projects_in_one_process_keep_their_own_limits_and_health(tmp_path):
    from conftest import make_project

    strict_project = make_project(tmp_path / "a")
    (strict_project / "pyproject.toml").write_text(
        "[tool.rosetta.rate_limits]\nopenai = {requests_per_minute = 1}\n[tool.rosetta.health]\ncooldown_s = 999\n")
    relaxed_project = make_project(tmp_path / "b")
    first = load("vuln-triage", project=strict_project)
    second = load("vuln-triage", project=relaxed_project)
    assert first.traffic.limiter.limits == {"openai": Limit(1, None)} and first.traffic.health.policy.cooldown_s == 999
    assert second.traffic.limiter.limits == {} and second.traffic.health.policy == HealthPolicy()
    assert load("advisory-extractor", project=strict_project).traffic is first.traffic  # one project, one budget
    endpoint = credential_key({"model": "openai/gpt-4o", "api_key": "sk-test-not-a-real-key"})
    for _ in range(HealthPolicy().min_calls):
        first.traffic.health.record(endpoint, failed=True)
    assert first.traffic.health.cooling(endpoint) > 900 and second.traffic.health.cooling(endpoint) == 0.0


def test_metering_follows_the_variable_litellm_reads_not_a_guessed_one(monkeypatch):
    """together_ai reads $TOGETHERAI_API_KEY (not TOGETHER_AI_API_KEY), Gemini either of two: two
    keys in those variables are two budgets."""
    for model, variable in (("together_ai/meta-llama/Llama-3-8b", "TOGETHERAI_API_KEY"),
                            ("gemini/gemini-2.5-pro", "GEMINI_API_KEY")):
        monkeypatch.setenv(variable, "key-one-0123456789")
        first = credential_key({"model": model})
        monkeypatch.setenv(variable, "key-two-0123456789")
        second = credential_key({"model": model})
        assert first != second and not first.endswith("#-") and "key-" not in first + second, model
