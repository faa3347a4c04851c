"""Load: 500 concurrent calls on a faulty provider with a 2 s timeout, two runs in a row on one agent
(tests/load_spike.py says what is played and checked; bench/load_faults.py runs ten in a row)."""

from __future__ import annotations

import pytest
from load_spike import HEADER, ROW, spike, spiking_agent


@pytest.mark.slow
def test_500_concurrent_calls_with_faults_and_a_2s_timeout_lose_none_two_runs_in_a_row(tree, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    monkeypatch.setenv("OPENAI_API_BASE", "")  # spike() points them at its servers; restored afterwards
    monkeypatch.setenv("ANTHROPIC_API_BASE", "")
    agent = spiking_agent(tree)
    rows = [spike(agent, run) for run in range(2)]
    with capsys.disabled():
        print("\n" + HEADER)
        for row in rows:
            print(ROW.format(*row))
