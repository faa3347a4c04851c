"""gitleaks' rules, converted by tools/gitleaks_rules.py into ``secret_rules_gitleaks.toml``: the
file is what the converter makes of the gitleaks config it records, none left out unsaid; every
rule finds its own example, drawn from its gitleaks regex as gitleaks draws its true positives,
alone and in each context gitleaks' GenerateSampleSecrets puts it in, whole or streamed in pieces
cut anywhere; and gitleaks' checks (entropy, allowlists, keywords) decide a stream as they decide
the whole text."""

from __future__ import annotations

import random
import sys
import tomllib
from importlib import resources
from pathlib import Path

import pytest
from secret_samples import GITLEAKS, core, gitleaks_example, wrapped

from rosetta.runtime.secrets import SecretStream, find_secrets, redact, rules

TOOLS = Path(__file__).resolve().parents[2] / "tools"
GENERATED = resources.files("rosetta.runtime").joinpath("secret_rules_gitleaks.toml")


@pytest.fixture(scope="module")
def converter():
    sys.path.insert(0, str(TOOLS))
    try:
        import gitleaks_rules
    finally:
        sys.path.remove(str(TOOLS))
    return gitleaks_rules


def test_the_generated_rules_are_what_the_converter_makes_of_the_rules_they_record(converter, tmp_path, capsys):
    assert converter.main(["--check", "--recorded"]) == 0  # the source's sha256 is in the header: see its --check
    stale = tmp_path / "stale.toml"
    stale.write_text(GENERATED.read_text(encoding="utf-8").replace("{0,20}", "{0,21}", 1), encoding="utf-8")
    assert converter.main(["--check", "--recorded", "--output", str(stale)]) == 1
    assert "is stale" in capsys.readouterr().err


def test_every_gitleaks_rule_is_converted_or_said_why_not():
    text = GENERATED.read_text(encoding="utf-8")
    data = tomllib.loads(text)
    assert data["version"] == "v8.30.0" and len(data["sha256"]) == 64
    assert len(data["rules"]) + len(data["skipped"]) == 222 and len(data["rules"]) == len(GITLEAKS) == 221
    for skipped in data["skipped"]:  # pkcs12-file flags files by name alone
        assert f"#   {skipped['id']}: {skipped['reason']}" in text
    stood_for = {f"gitleaks:{rule_id}" for rule in rules() for rule_id in rule.replaces}  # rosetta's rule instead
    assert {rule.id for rule in rules()} == {rule.id for rule in rules() if ":" not in rule.id} | (
        {rule.id for rule in GITLEAKS} - stood_for)


@pytest.mark.parametrize("rule", GITLEAKS, ids=lambda rule: rule.id.removeprefix("gitleaks:"))
def test_every_gitleaks_rule_finds_its_own_example_alone_and_in_gitleaks_contexts(rule):
    example, secret = gitleaks_example(rule.id)
    for text in (example, *wrapped(rule, example)):
        stream = SecretStream()
        redacted = stream.flush_text(text)
        assert stream.kinds and core(secret) not in redacted, (text, redacted)


@pytest.mark.parametrize("rule", GITLEAKS, ids=lambda rule: rule.id.removeprefix("gitleaks:"))
def test_every_gitleaks_example_streams_as_the_whole_wherever_it_is_cut(rule):
    example, secret = gitleaks_example(rule.id)
    rnd = random.Random(rule.id)
    text = f"see {rnd.choice(wrapped(rule, example))} and {example}."
    whole = redact(text)
    assert core(secret) not in whole
    alone = f"{example}."
    cuttings = [(text, sorted(rnd.sample(range(1, len(text)), rnd.randint(1, 6)))) for _ in range(3)]
    for text, cuts in [*cuttings, (alone, list(range(1, len(alone))))]:  # the last: a character at a time
        whole, stream, sent = redact(text), SecretStream(), ""
        for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True):
            sent += stream.feed(text[start:end])
            assert whole.startswith(sent), (text, cuts, sent)
        assert sent + stream.flush() == whole, (text, cuts)


def _streamed(text: str, size: int = 3) -> str:
    stream = SecretStream()
    return "".join(stream.feed(text[i:i + size]) for i in range(0, len(text), size)) + stream.flush()


def test_entropy_and_allowlists_decide_as_gitleaks_does_whole_or_streamed():
    cases = {  # text: whether it holds a credential
        "found AKCp" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8Bb7Aa6Zz5Yy4Xx3Ww2Vv1Uu0Tt9Ss8Rr7Qq6P": True,
        "found AKCp" + "a" * 69: False,  # artifactory-api-key: entropy 4.5 or less, no credential
        "api_key = 'Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk'": True,
        "api_key = 'Zx9Yw8abcdefghijklmnopqrstuvwxyz'": False,  # gitleaks' global stopword
        "random_access = Zx9Yw8Vu7Ts6Rq5Po4Nm": False,  # an allowlist on the match, the dropped lead included
        "access = Zx9Yw8Vu7Ts6Rq5Po4Nm": True,
    }
    for text, holds in cases.items():
        assert bool(find_secrets(text)) is holds, text
        assert _streamed(text) == redact(text) and _streamed(text, 1) == redact(text)


def test_a_keyword_must_come_by_the_credentials_end():
    token = "1308742762612587" + "|" + "rhoK1cbv0DOU_RTX_87O4MkX7AI"  # gitleaks' Facebook app token shape
    assert find_secrets(f"facebook app: {token}") == ["facebook access token"]
    assert find_secrets(f"an app token: {token}") == []  # no keyword: a pipe after 16 digits is no credential
    assert find_secrets(f"{token} is facebook's") == []  # gitleaks looks in the whole file; a stream cannot wait
    text = f"facebook: {token}"
    assert _streamed(text) == redact(text) == "facebook: [redacted facebook access token]"


def test_a_generic_match_gives_way_to_a_specific_rule_on_the_same_secret():
    token = "ghp" + "_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8"
    assert redact(f"token = {token}") == "token = [redacted github token]"
    assert redact("token = Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8") == "token = [redacted generic api key]"


def test_a_credential_starting_inside_one_redacted_is_redacted_past_it():
    """Without gitleaks' boundary after a secret, a shorter look-alike can match first (the
    wrapper's ``cloudflareToken="...``); the credential that starts inside it still counts."""
    secret = "aB66a200B948EAC13f3eFeE1ec6ba9eeDEde6"
    text = f'cloudflareToken="quDBqNPl9R0lrk9CRCkI_ZLBCLOudFLaReYMS_FUn.,{secret}"'
    assert redact(text) == 'cloudflareToken="[redacted cloudflare api key].,[redacted cloudflare global api key]"'
    assert _streamed(text, 1) == redact(text)


def test_quotes_and_white_space_around_a_secret_may_come_escaped():
    secret = "0123456789abcdef0123456789abcdef"  # adobe-client-id: 32 hex digits
    for text in (f'adobe_id = "{secret}"', f'adobe_id = \\"{secret}\\"', f'adobe_id =\\n\\"{secret}\\"',
                 f'adobe_id = \\\\\\"{secret}\\\\\\"'):
        assert redact(text).count("[redacted adobe client id]") == 1 and secret not in redact(text), text
