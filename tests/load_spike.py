"""A load spike on a faulty provider, shared by tests/runtime/test_load.py (two runs) and
bench/load_faults.py (ten runs in a row, the load run): 500 concurrent calls with a 2 s timeout.

Such a spike used to time out in this process's own connection pool before most requests were
sent; those timeouts were counted against the endpoint, whose cool-down then failed most calls and
cooled a fault-free fallback as well (issue 36). Now the spike waits for in-flight slots, and only
failures the provider caused count. The primary model's provider plays 503s, 429s, stalls past the
timeout, dropped and reset connections; the fallback's provider, another server, never fails.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from fault_server import FaultServer

from rosetta.runtime.agent import Agent

REPORT = "SQL injection in the login form lets an unauthenticated attacker bypass authentication."
FAULTS = [("status", 503), ("status", 429), ("stall", 5.0), ("drop",), ("reset",)]
PRIMARY, FALLBACK = "openai/gpt-4o", "anthropic/claude-sonnet-5-5"
HEADER = "run  requests  provider faults  local timeouts  fell back  peak in flight  wall s"
ROW = "{:>3}  {:>8}  {:>15}  {:>14}  {:>9}  {:>14}  {:>6.1f}"


def spiking_agent(tree: Path) -> Agent:
    """vuln-triage of the project at ``tree``, compiled for both models, with a cool-down that
    outlasts the spike (one tripped during any run is still there when it is checked)."""
    from rosetta.compile.compiler import CompileOptions, compile_paths
    from rosetta.providers.adapter import load_adapters
    from rosetta.runtime.agent import load

    (tree / "pyproject.toml").write_text("[project]\nname = 'demo'\n\n[tool.rosetta.health]\ncooldown_s = 3600\n")
    options = CompileOptions(out=tree / "compiled", root=tree, adapters=load_adapters(), models=(PRIMARY, FALLBACK))
    compile_paths([tree / "signatures"], options, jobs=1)
    return load("vuln-triage", project=tree)


def spike(agent: Agent, run: int, calls: int = 500, *, faults: list[tuple] = FAULTS, rate: float = 0.3,
          success_s: float = 0.0, timeout: float = 2.0) -> tuple[int | float, ...]:
    """One spike of ``calls`` concurrent calls with a ``timeout`` per attempt, a share ``rate`` of the
    provider's answers one of ``faults`` and its successes ``success_s`` late; asserts that none was lost, swapped or held
    against a healthy endpoint, and returns the run's row of :data:`ROW`. Needs the providers' keys set; sets
    their endpoints (each provider's endpoint comes from its environment, so the two models reach two
    servers)."""
    from rosetta.runtime.result import RetryPolicy
    from rosetta.runtime.limits import credential_key

    policy = RetryPolicy(attempts=2, base=0.01, multiplier=2.0, cap=0.1, timeout=timeout)  # one call in ~11 falls back
    health = agent.traffic.health
    endpoints = {model: credential_key({"model": model}) for model in (PRIMARY, FALLBACK)}
    with FaultServer([("flaky", rate, faults, success_s)]) as faulty, FaultServer([("flaky", 0.0)]) as healthy:
        os.environ["OPENAI_API_BASE"] = faulty.url
        os.environ["ANTHROPIC_API_BASE"] = healthy.url.removesuffix("/v1")

        async def main() -> list[Any]:
            return await asyncio.gather(*(agent.arun({"report": f"[call {n}] {REPORT}"}, model=PRIMARY,
                                                     fallbacks=[FALLBACK], policy=policy) for n in range(calls)),
                                        return_exceptions=True)

        began = time.monotonic()
        results = asyncio.run(main())
        wall = time.monotonic() - began
    failures = [r for r in results if isinstance(r, BaseException)]
    assert not failures, f"run {run}: {len(failures)} calls failed, first: {failures[0]!r}"
    assert all(r.valid and f"[call {n}]" in r.data["rationale"] for n, r in enumerate(results))  # none swapped
    outcomes = [a.outcome for r in results for a in r.attempts]
    transient = outcomes.count("transient")
    # each fault the provider played is one transient attempt, and nothing else is held against it
    assert transient == faulty.faults, f"run {run}: {transient} transient attempts, {faulty.faults} faults"
    assert "unavailable" not in outcomes and {m: health.cooling(e) for m, e in endpoints.items()} == {
        PRIMARY: 0.0, FALLBACK: 0.0}, f"run {run}: an endpoint cooled down"
    fell_back = sum(r.model == FALLBACK for r in results)
    assert len(healthy.requests) == fell_back > 0  # the fallback answered each call it got, first time
    assert faulty.peak <= 64  # the in-flight bound held at the provider
    gates = [agent.traffic.limiter.gate({"model": model}) for model in (PRIMARY, FALLBACK)]
    assert [(gate.held, gate.waiting) for gate in gates] == [(0, 0), (0, 0)]  # every slot came back
    return run, len(faulty.requests), transient, outcomes.count("local"), fell_back, faulty.peak, wall
