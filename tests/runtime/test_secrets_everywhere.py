"""Every credential rule, planted in the inputs, the answer, the agent's tool-call arguments and the
model's reasoning text, served by a real HTTP server on 127.0.0.1: none comes out of the Result,
the conversation's exports (``to_json``, ``save``, ``record_dir``) or any log record at DEBUG,
litellm's, openai's and httpx's included; ``on_secret="fail"`` fires on each of those fields. So
does every gitleaks rule's own example, through those channels, a provider's error and litellm's
DEBUG records of a streamed reply. And (issue 53, item 3) an answer holding a lone surrogate is
returned and recorded, not lost."""

from __future__ import annotations

import json
import logging

import pytest
from fault_server import FaultServer
from secret_samples import EXAMPLES, GITLEAKS, core, gitleaks_example, secret_part

from rosetta.runtime.agent import load
from rosetta.runtime.guardrails import GuardrailError
from rosetta.runtime.result import ModelCallError, RetryPolicy
from rosetta.runtime.log_redaction import PROVIDER_DEBUG_LOGS

EVERY = " and ".join(planted for planted, _ in EXAMPLES.values())
ADVISORY = {"advisory": f"CVE-2024-12345: the vendor's CI printed {EVERY} into public build logs."}
FAST = RetryPolicy(attempts=1, timeout=5.0)
CALL_LOGGERS = ("rosetta", "LiteLLM", "openai", "httpx", "httpcore")


class MessageServer(FaultServer):
    """The test server, plus a ("message", {...}) step: the assistant message exactly as given,
    tool calls and reasoning text included."""

    def play(self, handler, step, body):
        if step[0] != "message":
            return super().play(handler, step, body)
        payload = json.dumps({
            "id": "chatcmpl-m", "object": "chat.completion", "created": 0, "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": {"role": "assistant", **step[1]}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 8, "total_tokens": 20}})
        self._send(handler, 200, payload, {})


def leaks(text: str) -> list[str]:
    return [rule for rule, (planted, _) in EXAMPLES.items() if secret_part(rule, planted) in text]


GITLEAKS_EXAMPLES = {rule.id: gitleaks_example(rule.id) for rule in GITLEAKS}
"""Each gitleaks rule's own example (drawn from its regex): (text, what must not leak)."""
GITLEAKS_EVERY = " and ".join(text for text, _ in GITLEAKS_EXAMPLES.values())


def gitleaks_leaks(text: str) -> list[str]:
    """The gitleaks rules whose example's secret is in ``text``: its letters and digits, which no
    escaping (JSON, a Python repr) changes."""
    return [rule_id for rule_id, (_, secret) in GITLEAKS_EXAMPLES.items() if core(secret) in text]


def message(content: str = '{"advisory_id": "CVE-2024-12345", "title": "Leaked build logs"}', *,
            reasoning: str = "The advisory is short.", arguments: object = None) -> tuple:
    calls = [{"id": "call_1", "type": "function",
              "function": {"name": "lookup_advisory", "arguments": json.dumps(arguments or {"id": "CVE-2024-12345"})}}]
    return ("message", {"content": content, "reasoning_content": reasoning, "tool_calls": calls})


@pytest.fixture
def extractor(tree):
    return load("advisory-extractor", project=tree)


@pytest.fixture
def debug_logs(caplog, monkeypatch):
    """Every record at DEBUG, the call libraries' kept during calls (the user opted in)."""
    monkeypatch.setenv(PROVIDER_DEBUG_LOGS, "1")
    for name in CALL_LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    caplog.set_level(logging.DEBUG)
    return caplog


def test_a_key_split_across_streamed_deltas_never_reaches_a_log(extractor, caplog, monkeypatch):
    """Issue 83, item 3: litellm logs every streamed delta at DEBUG, one record each, so no
    per-record rule sees a key split across them whole. Unless the user opts in, the call
    libraries' records below WARNING are dropped while rosetta's calls run."""
    monkeypatch.delenv(PROVIDER_DEBUG_LOGS, raising=False)
    for name in CALL_LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    answer = json.dumps({"advisory_id": "CVE-2024-12345", "title": f"Leaked {EVERY}"})
    cuts = sorted({answer.index(part) + len(part) // 2 for part in (secret_part(rule, planted) for rule, (planted, _)
                                                                    in EXAMPLES.items()) if part in answer})
    deltas = [answer[start:end] for start, end in zip([0, *cuts], [*cuts, len(answer)], strict=True)]
    events = [{"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o",
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": delta} if not n else {"content": delta},
                            "finish_reason": None}]} for n, delta in enumerate(deltas)]
    events.append({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    body = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
    with FaultServer([("body", 200, body, "text/event-stream")]) as server:  # each key cut in half
        stream = extractor.stream(ADVISORY, "openai/gpt-4o", policy=FAST, api_base=server.url, fallbacks=[],
                                  validation_retries=0, api_key="sk-test-not-a-real-key")
        text = "".join(stream)
        stream.result()
    assert "[redacted" in text and not leaks(text)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    pieces = {secret_part(rule, planted)[start:start + 12] for rule, (planted, _) in EXAMPLES.items()
              for start in range(0, max(1, len(secret_part(rule, planted)) - 11), 4)}
    assert not [piece for piece in pieces if len(piece) == 12 and piece in logged]


def test_no_planted_credential_leaves_any_field_export_or_log(extractor, tree, debug_logs):
    answer = json.dumps({"advisory_id": "CVE-2024-12345", "title": f"Leaked {EVERY}"})
    with MessageServer([message(answer, reasoning=f"The logs show {EVERY}.", arguments={"query": EVERY})]) as server:
        chat = extractor.chat("openai/gpt-4o", record_dir=tree / "rec")
        result = chat.send(ADVISORY, policy=FAST, validation_retries=0, api_base=server.url,
                           api_key="sk-test-not-a-real-key")
        saved = chat.save(tree / "saved.json")
    sent = json.dumps(server.requests[0]["body"])
    assert set(leaks(sent)) == set(EXAMPLES)  # the model itself was sent every credential
    assert result.tool_calls and "reasoning_content" in result.state  # the fields under test came back
    fields = {"raw": result.raw, "data": json.dumps(result.data), "output": str(result.output),
              "tool_calls": json.dumps(result.tool_calls), "state": json.dumps(result.state),
              "issues": str(result.issues), "attempts": str(result.attempts), "to_json": chat.to_json(),
              "save": saved.read_text(encoding="utf-8")}
    fields |= {file.name: file.read_text(encoding="utf-8") for file in (tree / "rec").iterdir()}
    for name, text in fields.items():
        assert not leaks(text), (name, leaks(text))
    assert result.raw.count("[redacted") >= len({rule.split("-")[0] for rule in EXAMPLES}) // 2
    assert "[redacted" in fields["tool_calls"] and "[redacted" in fields["state"]
    logged = {record.name.split(".")[0] for record in debug_logs.records}
    assert {"LiteLLM", "openai", "httpcore", "rosetta"} <= logged  # the libraries did log, at DEBUG
    for record in debug_logs.records:
        assert not leaks(record.getMessage() + (record.exc_text or "")), (record.name, record.getMessage()[:200])


def test_no_gitleaks_example_leaves_any_field_export_error_or_log(extractor, tree, debug_logs):
    """Every gitleaks rule's example at once, in the inputs, the answer, the tool-call arguments
    and the reasoning text: none comes out, nor out of a provider's error."""
    import openai._base_client  # noqa: F401  (its logger exists before the call, as after any first call:
    # one a library creates during a call is covered from the next call on, see README)
    answer = json.dumps({"advisory_id": "CVE-2024-12345", "title": f"Leaked {GITLEAKS_EVERY}"})
    inputs = {"advisory": f"CVE-2024-12345: the CI printed {GITLEAKS_EVERY} into its logs."}
    step = message(answer, reasoning=f"The logs show {GITLEAKS_EVERY}.", arguments={"query": GITLEAKS_EVERY})
    with MessageServer([step]) as server:
        chat = extractor.chat("openai/gpt-4o", record_dir=tree / "rec")
        result = chat.send(inputs, policy=FAST, validation_retries=0, api_base=server.url,
                           api_key="sk-test-not-a-real-key")
        saved = chat.save(tree / "saved.json")
    assert len(gitleaks_leaks(json.dumps(server.requests[0]["body"]))) == len(GITLEAKS)  # all were sent
    fields = {"raw": result.raw, "data": json.dumps(result.data), "output": str(result.output),
              "tool_calls": json.dumps(result.tool_calls), "state": json.dumps(result.state),
              "issues": str(result.issues), "attempts": str(result.attempts), "to_json": chat.to_json(),
              "save": saved.read_text(encoding="utf-8")}
    fields |= {file.name: file.read_text(encoding="utf-8") for file in (tree / "rec").iterdir()}

    def refuse(**kwargs):
        raise ConnectionError(f"proxy reset the connection while sending {GITLEAKS_EVERY} upstream")

    with pytest.raises(ModelCallError) as failed:
        extractor.run(inputs, "openai/gpt-4o", policy=FAST, complete=refuse, api_key="sk-x")
    fields |= {"error": str(failed.value), "error attempts": str(failed.value.attempts),
               "error problems": "\n".join(problem.format() for problem in failed.value.problems)}
    for name, text in fields.items():
        assert not gitleaks_leaks(text), (name, gitleaks_leaks(text))
    assert {"LiteLLM", "openai", "httpcore", "rosetta"} <= {record.name.split(".")[0] for record in debug_logs.records}
    for record in debug_logs.records:
        shown = record.getMessage() + (record.exc_text or "")
        assert not gitleaks_leaks(shown), (record.name, gitleaks_leaks(shown))


def test_no_gitleaks_example_leaves_a_streamed_reply_or_its_debug_records(extractor, debug_logs):
    """A streamed reply, one delta per example: litellm's DEBUG record of each delta holds a
    whole credential, as a Python repr of a JSON string; with the user's opt-in
    (``ROSETTA_PROVIDER_DEBUG_LOGS=1``) every record is kept, and none shows one."""
    head = '{"advisory_id": "CVE-2024-12345", "title": "Leaked '
    deltas = [head, *(json.dumps(text + " and ")[1:-1] for text, _ in GITLEAKS_EXAMPLES.values()), '"}']
    events = [{"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o",
               "choices": [{"index": 0, "delta": {"content": delta, **({} if n else {"role": "assistant"})},
                            "finish_reason": None}]} for n, delta in enumerate(deltas)]
    events.append({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    body = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
    with FaultServer([("body", 200, body, "text/event-stream")]) as server:
        stream = extractor.stream(ADVISORY, "openai/gpt-4o", policy=FAST, api_base=server.url, fallbacks=[],
                                  validation_retries=0, api_key="sk-test-not-a-real-key")
        text = "".join(stream)
        result = stream.result()
    assert len(gitleaks_leaks("".join(deltas))) == len(GITLEAKS)  # the reply held every one
    for name, shown in {"stream": text, "raw": result.raw, "data": json.dumps(result.data)}.items():
        assert not gitleaks_leaks(shown), (name, gitleaks_leaks(shown))
    delta_records = [record for record in debug_logs.records if "delta" in record.getMessage()]
    assert len(delta_records) >= len(GITLEAKS)  # litellm logged each delta
    for record in debug_logs.records:
        assert not gitleaks_leaks(record.getMessage()), (record.name, gitleaks_leaks(record.getMessage()))


def test_the_call_libraries_are_redacted_only_while_a_call_runs(extractor, debug_logs):
    key = EXAMPLES["gcp-client-email"][0]  # litellm masks some keys itself (AKIA..., sk-...), not this one
    names = ("LiteLLM", "openai._base_client", "httpcore.http11", "httpx")

    def log_each() -> list[str]:
        for name in names:
            logging.getLogger(name).debug("key %s", key)
        return [record.getMessage() for record in debug_logs.records[-len(names):]]

    from rosetta.runtime.log_redaction import redacting_logs

    with redacting_logs():
        assert log_each() == ["key [redacted gcp service account]"] * len(names)
    with MessageServer([message()]) as server:
        extractor.run(ADVISORY, "openai/gpt-4o", policy=FAST, api_base=server.url, api_key="sk-test-not-a-real-key")
    assert log_each() == [f"key {key}"] * len(names)  # outside calls, other libraries' logs are theirs


@pytest.mark.parametrize("where", ["tool call", "reasoning", "escaped in the answer"])
def test_on_secret_fail_covers_every_field(extractor, where, debug_logs):
    key = EXAMPLES["gitleaks:github-pat"][0]
    escaped = key[:4] + "\\u00" + format(ord(key[4]), "02x") + key[5:]  # a JSON escape splits the key in `raw`
    step = {"tool call": message(arguments={"query": key}), "reasoning": message(reasoning=f"I saw {key}."),
            "escaped in the answer": message(json.dumps({"advisory_id": "CVE-2024-12345", "title": "x"})
                                             .replace('"x"', f'"{escaped}"'))}[where]
    with MessageServer([step]) as server:
        with pytest.raises(GuardrailError, match="github token") as caught:
            extractor.run(ADVISORY, "openai/gpt-4o", policy=FAST, on_secret="fail", api_base=server.url,
                          api_key="sk-test-not-a-real-key")
        assert not leaks(str(caught.value))
        redacted = extractor.run(ADVISORY, "openai/gpt-4o", policy=FAST, api_base=server.url,
                                 api_key="sk-test-not-a-real-key")
    for text in (redacted.raw, json.dumps(redacted.data), json.dumps(redacted.tool_calls), json.dumps(redacted.state)):
        assert not leaks(text)
    # (a message holding tool calls and an invalid answer is a request for tools: its text stays in raw)
    assert "[redacted github token]" in json.dumps([redacted.raw, redacted.data, redacted.tool_calls, redacted.state])
    assert not any(leaks(record.getMessage()) for record in debug_logs.records)


# -- issue 53, item 3: an answer UTF-8 cannot encode is still returned and recorded ---------------

VALID = ('{"advisory_id": "CVE-2024-12345", "title": "TITLE", "affected": [{"package": "demo", "ecosystem": "pypi", '
         '"vulnerable_range": "< 1.2.0", "fixed_version": "1.2.0"}]}')


@pytest.mark.parametrize("answer", [
    VALID.replace("TITLE", "\\ud800 broken"),  # a JSON escape in the answer text
    VALID.replace("TITLE", "\ud800 broken"),  # the character itself, sent escaped on the wire
], ids=["escaped", "raw"])
def test_an_answer_with_a_lone_surrogate_is_returned_and_recorded_exactly(extractor, tree, answer):
    with FaultServer([("ok", answer)]) as server:
        chat = extractor.chat("openai/gpt-4o", record_dir=tree / "rec")
        result = chat.send(ADVISORY, policy=FAST, api_base=server.url, api_key="sk-test-not-a-real-key")
        saved = chat.save(tree / "saved.json")
    # the schema takes it, the typed output (pydantic) cannot hold it: the answer comes back untyped,
    # with an issue naming the field
    assert [(issue.path, "unicode" in issue.message) for issue in result.issues] == [("$.title", True)]
    assert [attempt.outcome for attempt in result.attempts] == ["invalid"]
    assert result.data["title"] == "\ud800 broken" and result.output == result.data and result.raw == answer
    recorded = json.loads((tree / "rec" / "turn-001-conversation.json").read_text(encoding="utf-8"))
    assert recorded["turns"][0]["data"]["title"] == "\ud800 broken" and recorded["turns"][0]["raw"] == answer
    assert json.loads((tree / "rec" / "conversation.json").read_text(encoding="utf-8")) == recorded
    assert "\\ud800 broken" in (tree / "rec" / "turn-001-response.md").read_text(encoding="utf-8")
    resumed = extractor.chat(resume=saved)
    assert resumed.messages[-1]["content"] == answer and resumed.turns[0]["data"]["title"] == "\ud800 broken"


def test_a_lone_surrogate_in_a_string_without_limits_is_an_issue_not_a_typed_output_that_cannot_dump(extractor):
    """Issue 83, item 8: ``vulnerable_range`` has no length or pattern, so pydantic took the
    surrogate and ``result.output.model_dump_json()`` raised; now the answer is untyped, with an issue."""
    answer = VALID.replace('"< 1.2.0"', '"< 1.2.0 \\ud800"')
    with FaultServer([("ok", answer)]) as server:
        result = extractor.run(ADVISORY, "openai/gpt-4o", policy=FAST, validation_retries=0, fallbacks=[],
                               api_base=server.url, api_key="sk-test-not-a-real-key")
    assert not result.valid and [issue.path for issue in result.issues] == ["$.affected[0].vulnerable_range"]
    assert result.output == result.data and result.data["affected"][0]["vulnerable_range"] == "< 1.2.0 \ud800"
    assert "lone surrogate" in result.issues[0].message


def test_a_redacting_filter_on_a_handler_covers_any_logger_at_any_time():
    from rosetta.runtime.log_redaction import RedactingFilter

    written: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: written.append(handler.format(record))
    handler.addFilter(RedactingFilter())
    log = logging.getLogger("myapp.sub")
    log.addHandler(handler)
    try:
        log.warning("calling with %s", EXAMPLES["gitleaks:sendgrid-api-token"][0])
    finally:
        log.removeHandler(handler)
    assert written == ["calling with [redacted sendgrid key]"]


def test_importing_rosetta_leaves_the_processs_logging_set_up_alone():
    """Issue 57: redaction is a filter on rosetta's own loggers, not a replaced record factory."""
    import subprocess
    import sys

    script = ("import logging\nfactory = logging.getLogRecordFactory()\nimport rosetta\n"
              "assert logging.getLogRecordFactory() is factory, 'the record factory was replaced'\n"
              "assert not logging.getLogger('myapp').filters and not logging.getLogger().filters\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_every_logger_rosetta_logs_to_redacts_every_record(caplog):
    """Each logger the source names is one of ROSETTA_LOGGERS, and a credential logged on any of them,
    at any level, reaches no handler."""
    import ast
    from pathlib import Path

    import rosetta  # noqa: F401  (installs the filters)
    from rosetta.runtime.log_redaction import ROSETTA_LOGGERS

    named = set()
    for path in (Path(rosetta.__file__).parent).rglob("*.py"):
        module = ".".join(path.relative_to(Path(rosetta.__file__).parents[1]).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "getLogger" and node.args:
                arg = node.args[0]
                name = module if isinstance(arg, ast.Name) and arg.id == "__name__" else getattr(arg, "value", None)
                if isinstance(name, str) and name.split(".")[0] == "rosetta":
                    named.add(name)
    assert named and named <= set(ROSETTA_LOGGERS), named - set(ROSETTA_LOGGERS)
    planted = EXAMPLES["gitleaks:sendgrid-api-token"][0]
    caplog.set_level(logging.DEBUG)
    for name in ROSETTA_LOGGERS:
        logging.getLogger(name).debug("calling with %s", planted)
    assert len(caplog.records) == len(ROSETTA_LOGGERS)
    assert not leaks(caplog.text) and caplog.text.count("[redacted sendgrid key]") == len(ROSETTA_LOGGERS)
