"""No credential leaves the runtime: every kind of the secret rules, planted in inputs, answers,
provider errors and streamed text, is found in no output, no log record rosetta emits (at DEBUG)
and no file the runtime writes, unless the caller asks for raw transcripts."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fault_server import FaultServer
from secret_samples import EXAMPLES
from rosetta.runtime.agent import load
from rosetta.runtime.guardrails import GuardrailError
from rosetta.runtime.result import ModelCallError, RetryPolicy
from rosetta.runtime.log_redaction import ROSETTA_LOGGERS
from rosetta.runtime.secrets import SecretStream, find_secrets, redact, rules

SAMPLES = {
    "private key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo\n"
                   "-----END RSA PRIVATE KEY-----",
    "anthropic key": "sk-ant-api03-Xq7Lm2Pz9Rt4Vw8Ky3Bn",
    "openai key": "sk-proj-Hd8Fj2Kl5Mn9Pq3Rs7Tv",
    "google api key": "AIzaSyD4f8G2h6J9k3L7m1N5p8Q2r6S9t3V7w1",
    "aws access key": "AKIAIOSFODNN7EXAMPLE",
    "github token": "ghp_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8",
    "slack token": "xoxb-2048-Qw3Er4Ty5Ui6",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.Sfl2KxwRJSMeKKF2QT4fwpMeJf36POk6yJV",
    "bearer token": "Bearer Mz8Nq2Rw6Tx4Vy7Zb3Cd5",
}
CORES = {kind: max(re.findall(r"[A-Za-z0-9]+", secret), key=len) for kind, secret in SAMPLES.items()}
"""The part of each sample that no redacted text can contain."""
EVERY = " and ".join(SAMPLES.values())
REPORT = {"report": "SQL injection in the login form lets an unauthenticated attacker bypass authentication."}
FAST = RetryPolicy(attempts=2, base=0.001, multiplier=1.0, cap=0.001, timeout=2.0)


def leaks(text: str) -> list[str]:
    """The kinds of sample found in ``text``, whole or by their core, and any credential at all."""
    return [kind for kind, core in CORES.items() if core in text] + find_secrets(text)


def answer(rationale: str) -> str:
    return json.dumps({"severity": "high", "rationale": rationale})


@pytest.fixture
def triage(tree):
    return load("vuln-triage", project=tree)


@pytest.fixture
def logs(caplog):
    caplog.set_level(logging.DEBUG, logger="rosetta")
    return caplog


def logged(caplog) -> str:
    return "\n".join(record.getMessage() for record in caplog.records)


def test_every_kind_of_secret_has_a_sample():
    assert set(SAMPLES) <= {rule.kind for rule in rules()}
    for kind, secret in SAMPLES.items():
        assert redact(secret) == f"[redacted {kind}]" and kind in find_secrets(secret)


# -- streamed redaction ----------------------------------------------------------------------------

_PLANTED = [*SAMPLES.values(), *(text for pair in EXAMPLES.values() for text in pair)]
_PIECES = st.one_of(
    st.sampled_from(_PLANTED),
    st.sampled_from(_PLANTED).flatmap(lambda s: st.integers(0, len(s)).map(lambda n: s[:n])),
    st.sampled_from(["-----BEGIN ", "PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "Bearer ", "bearer\t",
                     "sk-", "AKIA", "ghp_", "xoxb-", "eyJ", "AIza", "\n", " ", "-", ".", '"', "=", "Q", "_", "://",
                     "u:p@", "@", ":", "\\", "private_key_id\": \"", "AccountKey=", "hooks.slack.com/services/"]),
    st.text(alphabet="aAbBsSk-_.xeyJ09 \n/+=~", max_size=10),
)


@settings(max_examples=int(os.environ.get("ROSETTA_FUZZ_EXAMPLES", 400)), deadline=None)
@given(pieces=st.lists(_PIECES, max_size=12), cuts=st.lists(st.integers(0, 400), max_size=12))
@example(pieces=["x", SAMPLES["aws access key"], " "], cuts=[1])
@example(pieces=["Bearer ", SAMPLES["aws access key"], "-bearer\t", "Mz8Nq2", "Rw6Tx4Vy7Zb3Cd5"], cuts=[42])
def test_streamed_text_redacts_as_the_whole_text_would(pieces, cuts):
    # the examples: no key after a letter (\b), and a bearer token inside a longer one that, once
    # the AWS key in it is redacted, is no token
    text = "".join(pieces)
    cuts = sorted(min(cut, len(text)) for cut in cuts)
    whole, stream, sent = redact(text), SecretStream(), ""
    for start, end in zip([0, *cuts], [*cuts, len(text)]):
        sent += stream.feed(text[start:end])
        assert whole.startswith(sent) and not find_secrets(sent)  # nothing sent is ever part of a key
    assert sent + stream.flush() == whole


def test_stream_holds_back_only_what_could_become_a_secret():
    stream = SecretStream()
    assert stream.feed('{"rationale": "the key ') == '{"rationale": "the '  # `key = ...` is gitleaks' generic key
    assert stream.feed("AKIAIOSFOD") == ""  # could still be an AWS key
    sent = stream.feed('NN7EXAMPLE", "x": "-----BEGIN RSA PRIVATE KEY-----\\nabc')
    assert sent == 'key [redacted aws access key]", "x": "[redacted private key]'  # its start is certain
    assert stream.feed("\\ndef") == ""  # what follows is dropped until its END line
    assert stream.feed('\\n-----END RSA PRIVATE KEY-----"}') == '"}'
    assert stream.flush() == ""


@pytest.mark.parametrize("reader", ["for", "async for"])
def test_streamed_answers_never_carry_a_secret(triage, logs, reader):
    leaky = answer(f"The repository exposes {EVERY}.")

    async def read_async(stream):
        return [chunk async for chunk in stream], await stream.aresult()

    with FaultServer([("ok", leaky)]) as server:
        stream = triage.stream(REPORT, "openai/gpt-4o", policy=FAST, api_base=server.url,
                               api_key="sk-test-not-a-real-key")
        chunks, result = (list(stream), stream.result()) if reader == "for" else asyncio.run(read_async(stream))
    assert len(chunks) > 10 and server.requests[0]["body"]["stream"] is True
    assert "".join(chunks) == result.raw == redact(leaky)  # too long to validate: the run retried, unstreamed
    assert not any(leaks(chunk) for chunk in chunks) and not leaks(result.raw) and not leaks(logged(logs))


def test_a_streamed_secret_under_on_secret_fail_raises_without_showing_it(triage, logs):
    chunks = []
    with FaultServer([("ok", answer(f"Found {SAMPLES['github token']} in the logs."))]) as server:
        with pytest.raises(GuardrailError, match="github token") as caught:
            for chunk in triage.stream(REPORT, "openai/gpt-4o", policy=FAST, on_secret="fail", api_base=server.url,
                                       api_key="sk-test-not-a-real-key"):
                chunks.append(chunk)
    assert chunks and not leaks("".join(chunks)) and not leaks(str(caught.value)) and not leaks(logged(logs))


# -- issues, attempts, errors and logs -------------------------------------------------------------

def test_invalid_answers_quote_no_secret_in_issues_attempts_or_logs(triage, logs):
    bad = json.dumps({"severity": EVERY, "rationale": "x", SAMPLES["aws access key"]: SAMPLES["slack token"]})
    with FaultServer([("ok", bad)]) as server:
        result = triage.run(REPORT, "openai/gpt-4o", policy=FAST, api_base=server.url,
                            api_key="sk-test-not-a-real-key")
    assert not result.valid and [a.outcome for a in result.attempts] == ["invalid", "invalid"]
    issues = "\n".join(f"{i.path}: {i.message}" for i in result.issues)
    assert "[redacted aws access key]" in issues and "is not one of" in issues
    assert not leaks(issues) and not any(leaks(a.error or "") for a in result.attempts)
    assert "returning an answer that does not validate" in logged(logs) and not leaks(logged(logs))
    correction = server.requests[1]["body"]["messages"][-1]["content"]  # what the model is told is wrong
    assert "$.severity" in correction and not leaks(correction)


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_provider_errors_quote_no_secret(triage, logs, kind):
    def refuse(**kwargs):
        raise ConnectionError(f"proxy reset the connection while sending {SAMPLES[kind]} upstream")

    with pytest.raises(ModelCallError) as exhausted:
        triage.run(REPORT, "openai/gpt-4o", fallbacks=["o3"], policy=FAST, complete=refuse, api_key="sk-x")

    def forbid(**kwargs):
        raise PermissionError(f"{SAMPLES[kind]} may not call this model")

    with pytest.raises(ModelCallError) as hard:
        triage.run(REPORT, "openai/gpt-4o", policy=FAST, complete=forbid, api_key="sk-x")
    assert exhausted.value.kind == "exhausted" and hard.value.kind == "hard"
    for error in (exhausted.value, hard.value):
        assert "[redacted" in str(error) and not leaks(str(error))
        assert not any(leaks(p.format()) for p in error.problems)
        assert all(a.error and not leaks(a.error) for a in error.attempts)
    assert "retrying" in logged(logs) and not leaks(logged(logs))


def test_a_key_sent_to_the_provider_is_not_in_its_error(triage, logs):
    with FaultServer([("status", 401)]) as server:
        with pytest.raises(ModelCallError) as caught:
            triage.run(REPORT, "openai/gpt-4o", policy=FAST, api_base=server.url, api_key=SAMPLES["openai key"])
    assert server.requests and not leaks(str(caught.value)) and not leaks(logged(logs))
    assert not any(leaks(a.error or "") for a in caught.value.attempts)


@pytest.mark.parametrize("name", ROSETTA_LOGGERS)  # every logger the source names is listed there (issue 57)
def test_every_rosetta_logger_redacts_at_every_level(logs, name):
    log = logging.getLogger(name)
    log.debug("using %s", SAMPLES["jwt"])
    log.info("key=%s", SAMPLES["google api key"], extra={"rosetta_event": "x"})
    log.warning(f"inline {SAMPLES['private key']}")
    log.debug("%s %s", SAMPLES["aws access key"], "clean")
    log.info("the template stays when there is nothing to redact: %s", 42)
    records = [r for r in logs.records if r.name == name]
    assert len(records) == 5 and not leaks(logged(logs))
    assert records[1].rosetta_event == "x" and records[3].getMessage() == "[redacted aws access key] clean"
    assert records[4].args == (42,)


def test_other_loggers_are_left_alone(caplog):
    caplog.set_level(logging.DEBUG, logger="myapp")
    logging.getLogger("myapp").debug("key %s", SAMPLES["aws access key"])
    assert caplog.records[-1].getMessage() == "key " + SAMPLES["aws access key"]


# -- files the runtime writes ----------------------------------------------------------------------

def advisory_run(tree, server, record: str, **options):
    agent = load("advisory-extractor", project=tree)
    text = f"CVE-2024-12345: the vendor's CI printed {EVERY} into public build logs."
    leaky = json.dumps({"advisory_id": "CVE-2024-12345", "title": f"Leaked {SAMPLES['openai key']}"})
    server.script[:] = [("ok", leaky)]
    return agent.run({"advisory": text}, "openai/gpt-4o", record_dir=tree / record, policy=FAST,
                     validation_retries=0, api_base=server.url, api_key="sk-test-not-a-real-key", **options)


def test_record_dir_transcripts_carry_no_secret_unless_raw_ones_are_asked_for(tree, logs):
    with FaultServer() as server:
        advisory_run(tree, server, "redacted")
        advisory_run(tree, server, "raw", raw_transcripts=True)
    assert EVERY in server.requests[0]["body"]["messages"][-1]["content"]  # the model itself was sent the inputs
    files = sorted((tree / "redacted").iterdir())
    assert [f.name for f in files] == ["conversation.json", "turn-001-conversation.json", "turn-001-prompt.md",
                                      "turn-001-response.md"]
    for file in files:
        assert not leaks(file.read_text()), file.name
    saved = json.loads((tree / "redacted" / "conversation.json").read_text())
    assert "[redacted private key]" in saved["messages"][-2]["content"]  # redacted string by string, still JSON
    assert not leaks(logged(logs))
    raw = (tree / "raw" / "turn-001-prompt.md").read_text()
    assert all(secret in raw for secret in SAMPLES.values())
    assert EVERY in json.loads((tree / "raw" / "conversation.json").read_text())["turns"][0]["message"]["advisory"]
