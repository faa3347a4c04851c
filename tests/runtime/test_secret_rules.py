"""The credential rules (rosetta's own ``secret_rules.toml`` and gitleaks' converted ones): each of
rosetta's finds its planted example and not its near miss (as do the gitleaks rules that took over
from rosetta's), none can backtrack without bound, and streamed redaction is exact and linear.
gitleaks' rules are checked against their own examples in test_gitleaks_rules.py."""

from __future__ import annotations

import re
import time
from importlib import resources

import pytest
from secret_samples import EXAMPLES, secret_part

from rosetta.runtime.secrets import SecretStream, find_secrets, redact, rules

RULES = {rule.id: rule for rule in rules()}


OWN = {rule_id for rule_id in RULES if not rule_id.startswith("gitleaks:")}


def test_every_rule_of_rosettas_has_an_example_and_a_near_miss():
    assert OWN <= set(EXAMPLES) <= set(RULES)  # the rest: the gitleaks rules that took over from rosetta's


def test_the_rules_files_are_package_data_and_name_their_sources():
    files = resources.files("rosetta.runtime")
    own = files.joinpath("secret_rules.toml").read_text(encoding="utf-8")
    gitleaks = files.joinpath("secret_rules_gitleaks.toml").read_text(encoding="utf-8")
    stood_for = {rule_id for rule in RULES.values() for rule_id in rule.replaces}  # rosetta's rule stands for it
    assert own.count("\n[[rules]]\n") == len(OWN)
    assert gitleaks.count("\n[[rules]]\n") == len(RULES) - len(OWN) + len(stood_for) > 200
    assert list(RULES)[:len(OWN)] == [rule_id for rule_id in RULES if rule_id in OWN]  # rosetta's are tried first
    for rule in RULES.values():
        assert rule.source.startswith(("gitleaks ", "detect-secrets ", "format: ")), rule.id
        if rule.id.startswith("gitleaks:"):
            assert rule.source == "gitleaks " + rule.id.removeprefix("gitleaks:") and rule.gitleaks_regex
    assert "MIT License, Copyright (c) 2019 Zachary Rice" in gitleaks


@pytest.mark.parametrize("rule_id", sorted(EXAMPLES))
def test_a_rule_finds_its_example_in_context_and_not_its_near_miss(rule_id):
    planted, near_miss = EXAMPLES[rule_id]
    kind = RULES[rule_id].kind
    for context in ("{}", "key: {}\n", '{{"note": "{}"}}', "({}).", "`{}`"):
        text = context.format(planted)
        assert kind in find_secrets(text), (rule_id, text)
        assert secret_part(rule_id, planted) not in redact(text) and f"[redacted {kind}]" in redact(text)
    assert find_secrets(near_miss) == [], (rule_id, near_miss)
    assert redact(near_miss) == near_miss


def test_only_the_secret_group_is_redacted_where_a_rule_has_one():
    assert redact(EXAMPLES["password-in-url"][0]) == "postgres://admin:[redacted password in url]@db.internal:5432/app"
    assert redact(EXAMPLES["aws-secret-access-key"][0]) == "aws_secret_access_key = [redacted aws secret key]"
    assert redact("aws_" + "AKIAIOSFODNN7EXAMPLE_x") == "aws_[redacted aws access key]_x"


def test_a_credential_longer_than_its_rule_is_redacted_whole():
    longer = EXAMPLES["openai-api-key"][0] + "x" * 5000
    assert redact(f"a {longer} b") == "a [redacted openai key] b"
    key = EXAMPLES["private-key"][0]
    unterminated = key[:key.index("-----END")] + "A" * 5000
    assert redact(f"x {unterminated}") == "x [redacted private key]"  # to the end of the text


def _repeats(tree, inside: bool = False):
    """(repeat max, whether it sits inside another repeat) for every repetition in a parsed pattern."""
    from re import _constants as c

    for op, arg in tree:
        if op in (c.MAX_REPEAT, c.MIN_REPEAT):
            low, high, sub = arg
            yield high, inside
            yield from _repeats(sub, inside or high > 1)
        elif op is c.SUBPATTERN:
            yield from _repeats(arg[-1], inside)
        elif op is c.BRANCH:
            for branch in arg[1]:
                yield from _repeats(branch, inside)
        elif op in (c.ASSERT, c.ASSERT_NOT):
            yield from _repeats(arg[1], inside)


def test_rules_have_no_nested_or_unbounded_repetition():
    from re import _constants, _parser

    assert len(RULES) > 200  # gitleaks' too
    for rule in RULES.values():
        for pattern in filter(None, (rule.regex, rule.until, rule.tail)):
            for high, nested in _repeats(_parser.parse(pattern)):
                assert high < _constants.MAXREPEAT and not nested, (rule.id, pattern)
        if rule.tail:  # one unit: one character more decides whether the credential goes on
            assert _parser.parse(rule.tail).getwidth() == (1, 1), rule.id


@pytest.mark.parametrize("rule_id", sorted(EXAMPLES))
def test_every_split_of_every_example_streams_as_the_whole(rule_id):
    planted, near_miss = EXAMPLES[rule_id]
    text = f"a {planted} b {near_miss} {planted}c"
    whole = redact(text)
    for cut in range(len(text) + 1):
        stream = SecretStream()
        sent = stream.feed(text[:cut])
        assert whole.startswith(sent)
        assert sent + stream.feed(text[cut:]) + stream.flush() == whole, cut
    one = SecretStream()
    assert "".join(one.feed(char) for char in text) + one.flush() == whole


@pytest.mark.parametrize("shape", ["ordinary", "token", "key"])
def test_streamed_redaction_is_linear(shape):
    def seconds(size: int) -> float:
        body = {"ordinary": ("a bearer sk ey AKIA word " * size)[:size],
                "token": ("Zx9Yw8Vu7Ts6Rq5P" * size)[:size],
                "key": EXAMPLES["openai-api-key"][0] + "x" * size}[shape]
        began = time.perf_counter()
        stream = SecretStream()
        for start in range(0, len(body), 8):
            stream.feed(body[start:start + 8])
        stream.flush()
        return time.perf_counter() - began

    small, large = min(seconds(20_000) for _ in range(2)), min(seconds(200_000) for _ in range(2))
    assert large < 25 * small, (small, large)  # ten times the text: about ten times the time, not a hundred
