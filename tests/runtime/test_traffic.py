"""Rate limits per API key and provider health cool-downs: the parts alone (with a fake clock),
then through agent.run / arun against the local fault server."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from fault_server import FaultServer

from rosetta.errors import ConfigError
from rosetta.runtime.agent import load
from rosetta.runtime.health import HealthPolicy, ProviderHealth
from rosetta.runtime.invoke import ModelCallError, RetryPolicy
from rosetta.runtime.limits import Limit, RateLimiter, credential_key

GOOD = json.dumps({"severity": "high", "rationale": "Unauthenticated SQL injection in the login form."})
REPORT = {"report": "SQL injection in the login form lets an unauthenticated attacker bypass authentication."}
FAST = RetryPolicy(attempts=3, base=0.01, multiplier=2.0, cap=0.05, timeout=2.0)


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
    assert limiter.reserve(request(model="anthropic/claude-sonnet-4-20250514"), 0) is None  # unmetered


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
    limiter = RateLimiter({"openai": Limit(requests_per_minute=600)})  # 0.1 s a request once drained
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
    arrivals = sorted(r["time"] for r in server.requests[1:])
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    assert len(arrivals) == 5 and min(gaps) >= 0.08  # one request every 0.1 s once the budget is spent
    assert [a.waited_s > 0 for r in results for a in r.attempts].count(True) == 5


def test_a_cooling_provider_is_skipped_for_the_next_provider(agent):
    health = ProviderHealth(HealthPolicy(window_s=60, min_calls=3, error_rate=1.0, cooldown_s=2.0))
    script = [("status", 503)] * 3 + [("ok", GOOD)]
    with FaultServer(script) as server:
        result = agent.run(REPORT, "openai/gpt-4o", fallbacks=["openai/o3", "sonnet"], api_base=server.url,
                           api_key="sk-test-not-a-real-key", health=health, policy=FAST)
        # gpt-4o: three 503s trip the breaker; o3 (same endpoint) is skipped without a request;
        # Claude answers through the Anthropic Messages API
        assert [(a.model.split("/")[-1], a.outcome) for a in result.attempts] == [
            ("gpt-4o", "transient")] * 3 + [("o3", "unavailable"), ("claude-sonnet-4-20250514", "ok")]
        assert len(server.requests) == 4 and server.requests[-1]["path"].endswith("/messages")
        assert result.valid and result.data["severity"] == "high"
        with pytest.raises(ModelCallError) as caught:  # everything left in the chain is cooling
            agent.run(REPORT, "openai/gpt-4o", fallbacks=["openai/o3"], api_base=server.url,
                      api_key="sk-test-not-a-real-key", health=health, policy=FAST)
        assert "cooling down" in str(caught.value) and len(server.requests) == 4
        time.sleep(2.1)
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


# -- configuration -------------------------------------------------------------------------------

def test_project_limits_and_health_are_read_like_settings(tree, monkeypatch):
    from rosetta.config import load_settings
    from rosetta.project import project_dirs

    (tree / "pyproject.toml").write_text(
        "[tool.rosetta.rate_limits]\nopenai = {requests_per_minute = 500, tokens_per_minute = 30000}\n"
        "'openai/o3' = {requests_per_minute = 50}\n[tool.rosetta.health]\ncooldown_s = 5\nmin_calls = 10\n")
    dirs, settings = project_dirs(tree), load_settings(tree)
    assert dirs.rate_limits == {"openai": Limit(500, 30000), "openai/o3": Limit(50, None)}
    assert {k: (v.requests_per_minute, v.tokens_per_minute) for k, v in settings.rate_limits.items()} == {
        "openai": (500, 30000), "openai/o3": (50, None)}
    assert (dirs.health.cooldown_s, dirs.health.min_calls) == (settings.health.cooldown_s, settings.health.min_calls)
    monkeypatch.setenv("ROSETTA_RATE_LIMITS", '{"gemini": {"requests_per_minute": 5}, "openai": {"tokens_per_minute": 9}}')
    expected = {"gemini": Limit(5, None), "openai": Limit(500, 9), "openai/o3": Limit(50, None)}
    assert project_dirs(tree).rate_limits == expected
    assert {k: Limit(v.requests_per_minute, v.tokens_per_minute)
            for k, v in load_settings(tree).rate_limits.items()} == expected


@pytest.mark.parametrize("toml, message", [
    ("[tool.rosetta.rate_limits]\nopenai = {requests_per_min = 5}\n", "unknown rate limit key"),
    ("[tool.rosetta.rate_limits]\nopenai = {requests_per_minute = -5}\n", "must be a positive number"),
    ("[tool.rosetta.rate_limits]\nopenai = 5\n", "must be a table"),
    ("[tool.rosetta.health]\nerror_rate = 2\n", "at most 1"),
    ("[tool.rosetta.health]\ncooldown = 5\n", "unknown health setting"),
])
def test_bad_traffic_settings_are_clear_errors(tree, toml, message):
    from rosetta.project import project_dirs

    (tree / "pyproject.toml").write_text(toml)
    with pytest.raises(ConfigError) as caught:
        project_dirs(tree)
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
