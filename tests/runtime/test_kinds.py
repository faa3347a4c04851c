"""Issue 84: outcome and error kinds are enums a caller can match on (and still plain strings), the
policy data names no kind the runtime does not know, and every failure an attempt records has an
Outcome of the same value."""

from __future__ import annotations

import pickle

import pytest

import rosetta
from rosetta.providers.policy import ErrorKind, error_kinds
from rosetta.runtime.result import ANSWERED, Attempt, ModelCallError, Outcome, paid_calls

CALL_FAILURES = {ErrorKind.TRANSIENT, ErrorKind.LOCAL, ErrorKind.HARD, ErrorKind.DENIED, ErrorKind.CREDENTIALS,
                 ErrorKind.REFUSED, ErrorKind.CONTEXT, ErrorKind.BUSY, ErrorKind.UNAVAILABLE}


def test_the_policy_table_classifies_only_into_kinds_an_attempt_can_record():
    kinds = error_kinds()
    named = {kind for _, kind in kinds.statuses} | set(kinds.classes.values()) | set(kinds.causes.values()) | \
        {kind for _, _, kind in kinds.said}
    assert named and all(isinstance(kind, ErrorKind) for kind in named)
    assert named <= CALL_FAILURES
    assert {Outcome(kind) for kind in CALL_FAILURES} == set(Outcome) - ANSWERED  # same values, one apart


def test_kinds_are_enums_and_still_compare_as_the_strings_they_were():
    attempt = Attempt("openai/gpt-4o", "transient", "503", 0.1)
    assert attempt.outcome is Outcome.TRANSIENT and attempt.outcome == "transient" and f"{attempt.outcome}" == "transient"
    error = ModelCallError("no key", [attempt], "credentials", ("OPENAI_API_KEY",))
    assert error.kind is ErrorKind.CREDENTIALS and error.kind == "credentials"
    copy = pickle.loads(pickle.dumps(error))  # crosses process pools (the optimizer's workers)
    assert copy.kind is ErrorKind.CREDENTIALS and copy.attempts[0].outcome is Outcome.TRANSIENT
    assert rosetta.ErrorKind is ErrorKind and rosetta.Outcome is Outcome


def test_a_kind_nobody_defined_is_refused_where_it_is_made():
    with pytest.raises(ValueError, match="transiant"):
        Attempt("openai/gpt-4o", "transiant", None, 0.0)
    with pytest.raises(ValueError, match="nope"):
        ModelCallError("x", [], "nope")


def test_paid_calls_counts_what_the_provider_answered():
    attempts = [Attempt("m", kind, None, 0.0) for kind in ("transient", "invalid", "cut_off", "ok", "busy", "tool_calls")]
    assert paid_calls(attempts) == 4
