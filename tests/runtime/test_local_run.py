"""Bundled agents end to end on the embedded model: render → invoke → parse → validate, no mocks.

Gemma 3 270M is a small base model, so what it says is rarely right; these tests check what
rosetta promises about it: a completion-style prompt without chat-template tokens, answers that
always validate against the agent's schema (constrained decoding), exact repeats at temperature 0,
and the same answers from concurrent ``arun`` calls as from sequential ``run`` calls.
"""

from __future__ import annotations

import asyncio

import jsonschema
import pytest
from conftest import REPO

import rosetta
from rosetta.local.provider import completion_prompt
from rosetta.store.artifact import read_header

REPORTS = [
    "SQL injection in the login form of the customer portal: the `username` field is concatenated into "
    "the query, and an unauthenticated attacker dumped the users table (PoC request attached).",
    "The footer of the marketing site shows the copyright year 2023 instead of 2024. No other impact.",
    "Stored XSS in the comment editor: a logged-in user can embed <script> in a comment, which runs "
    "for every moderator who opens the review queue.",
    "Remote code execution in the image upload API through a crafted TIFF file; exploitation in the "
    "wild was reported by two customers this morning. No authentication is required.",
]
ADVISORIES = [
    "GHSA-7f8x-2q3m-9v4c / CVE-2024-31337: Path traversal in fastzip. fastzip (PyPI) versions >= 1.2.0, "
    "< 1.4.3 allow a crafted archive to write files outside the target directory (CWE-22). Fixed in 1.4.3. "
    "CVSS 7.5 CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:H/A:N.",
    "CVE-2023-44487 (HTTP/2 Rapid Reset). The Go module golang.org/x/net before 0.17.0 lets a remote client "
    "exhaust server resources by opening and cancelling streams quickly. Upgrade to 0.17.0. CWE-400.",
    "Security bulletin for left-pad (npm), CVE-2025-10001: versions up to and including 2.1.0 crash on "
    "inputs longer than 2^31 characters. No fix has been released yet.",
]


@pytest.fixture(scope="module")
def agents() -> dict[str, rosetta.Agent]:
    return {name: rosetta.load(name, project=REPO) for name in ("vuln-triage", "advisory-extractor")}


def test_the_prompt_is_plain_completion_text_ending_where_the_answer_begins(agents, local_model):
    prompt = agents["vuln-triage"].prompt_for(local_model)
    messages = prompt.to_litellm({"report": REPORTS[0]})["messages"]
    text = completion_prompt(messages)  # exactly what llama.cpp evaluates
    assert len(messages) == 1 and text == messages[0]["content"]
    assert text.endswith(f"{REPORTS[0]}\nAnswer:")
    assert not any(token in text for token in ("<start_of_turn>", "<end_of_turn>", "<bos>", "[INST]", "<|im_start|>"))


@pytest.mark.parametrize("name, field, texts", [
    ("vuln-triage", "report", REPORTS), ("advisory-extractor", "advisory", ADVISORIES)])
def test_bundled_agents_answer_valid_typed_output_on_the_local_model(agents, local_model, name, field, texts):
    agent = agents[name]
    schema = agent.spec.output.schema_
    for text in texts:
        result = agent.run({field: text}, model=local_model)
        assert result.valid and [a.outcome for a in result.attempts] == ["ok"], result.attempts
        jsonschema.validate(result.data, schema)  # the agent's own schema, not the grammar's subset
        # the typed output holds exactly the answer: an explicit null (no fixed version) stays, absent keys stay out
        assert result.output.model_dump(mode="json", exclude_unset=True) == result.data
        assert result.model == local_model
        assert result.usage["prompt_tokens"] > 200 and result.usage["completion_tokens"] > 0
    if name == "vuln-triage":  # compiled for local/ by `./dev main`: the artifact answers, not a fallback
        artifact = REPO / "compiled" / "vuln-triage" / "local" / "gemma-3-270m.yaml"
        assert result.artifact == read_header(artifact.read_text(encoding="utf-8")).content_sha256


def test_repeated_calls_at_temperature_zero_give_identical_answers(agents, local_model):
    agent = agents["vuln-triage"]
    first = [agent.run({"report": r}, model=local_model).raw for r in REPORTS[:2]]
    again = [agent.run({"report": r}, model=local_model).raw for r in reversed(REPORTS[:2])][::-1]
    assert first == again


def test_concurrent_arun_answers_like_sequential_run(agents, local_model):
    agent = agents["vuln-triage"]
    reports = REPORTS[:2]  # four calls in flight at once, two of each report
    sequential = [agent.run({"report": r}, model=local_model).raw for r in reports]

    async def gathered() -> list[str]:
        results = await asyncio.gather(*(agent.arun({"report": r}, model=local_model) for r in reports * 2))
        return [r.raw for r in results]

    assert asyncio.run(gathered()) == sequential * 2


def test_stream_yields_the_answer_text_then_the_result(agents, local_model):
    agent = agents["vuln-triage"]
    stream = agent.stream({"report": REPORTS[2]}, model=local_model)
    chunks, result = list(stream), stream.result()
    assert len(chunks) > 1 and all(isinstance(c, str) for c in chunks)
    assert "".join(chunks) == result.raw and result.valid
    assert result.raw == agent.run({"report": REPORTS[2]}, model=local_model).raw
