"""Sticky assignment: the same user always gets the same arm, and arms get their configured share."""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys

import pytest

from rosetta.store.pins import Experiment
from rosetta.store.routing import CONTROL, TREATMENT, Route, assign, bucket

USERS = [f"user-{n}" for n in range(100_000)]


def within_tolerance(hits: int, total: int, share: float, standard_errors: float = 4.0) -> bool:
    """|hits/total - share| within ``standard_errors`` binomial standard errors."""
    error = math.sqrt(share * (1 - share) / total)
    return abs(hits / total - share) <= standard_errors * error


def test_bucket_is_the_documented_hash():
    for user in ("alice", "user-42", "ünïcode", 12345):
        digest = hashlib.sha256(f"exp-1:{user}".encode()).hexdigest()
        assert bucket("exp-1", user) == int(digest, 16) / 2**256


@pytest.mark.parametrize("share", [0.01, 0.2, 0.5, 0.9])
def test_share_matches_over_100k_users_and_is_sticky(share):
    first = [assign("exp-1", user, share) for user in USERS]
    again = [assign("exp-1", user, share) for user in reversed(USERS)][::-1]
    assert first == again
    treated = first.count(TREATMENT)
    assert within_tolerance(treated, len(USERS), share), treated
    assert set(first) == {CONTROL, TREATMENT}


def test_the_tolerance_check_can_fail():
    assert not within_tolerance(21_000, 100_000, 0.2)  # 1 point off at n=100k is ~8 standard errors


def test_share_edges_and_growth_only_moves_users_into_treatment():
    assert {assign("e", user, 0.0) for user in USERS[:5000]} == {CONTROL}
    assert {assign("e", user, 1.0) for user in USERS[:5000]} == {TREATMENT}
    small = {user for user in USERS[:20_000] if assign("e", user, 0.1) == TREATMENT}
    large = {user for user in USERS[:20_000] if assign("e", user, 0.3) == TREATMENT}
    assert small < large


def test_experiments_assign_independently():
    one = {user for user in USERS if assign("exp-a", user, 0.5) == TREATMENT}
    two = {user for user in USERS if assign("exp-b", user, 0.5) == TREATMENT}
    assert within_tolerance(len(one & two), len(USERS), 0.25)


def test_assignment_is_the_same_in_another_process():
    code = ("from rosetta.store.routing import assign; "
            "print(''.join('t' if assign('exp-1', f'user-{n}', 0.2) == 'treatment' else 'c' for n in range(2000)))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    here = "".join("t" if assign("exp-1", f"user-{n}", 0.2) == TREATMENT else "c" for n in range(2000))
    assert other.stdout.strip() == here


def test_route_picks_by_user_and_keeps_callers_without_one_on_the_active_version():
    experiment = Experiment("exp-1", "b" * 64, 0.5)
    route = Route("active", experiment, "control", "treatment")
    picks = {user: route.pick(user) for user in USERS[:1000]}
    assert set(picks.values()) == {"control", "treatment"}
    assert all(route.pick(user) == pick for user, pick in picks.items())
    assert all(pick == assign("exp-1", user, 0.5) for user, pick in picks.items())
    assert route.pick(None) == "active"
    assert Route("active").pick("user-1") == "active"
