"""Issue 54: a provider this environment has no key for is known before the call. The run moves to
the next model of the chain at once (no request, no retry, no wait), the error names the variable
to set, and a chain with no key at all ends saying each one. Cloud hosts that find credentials
beyond the environment are called, and their SDK's "no credentials" is the same kind of failure.
Providers are real HTTP servers on 127.0.0.1 (tests/fault_server.py) that count what reaches them;
the environment is emptied of every credential first, so the machine's own never count."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import make_project
from fault_server import FaultServer

from rosetta.local.litellm_offline import import_litellm
from rosetta.providers.credentials import MissingCredentials, check_credentials, credential_variables
from rosetta.runtime.agent import load
from rosetta.runtime.drive import drive
from rosetta.runtime.invoke import classify, plan
from rosetta.runtime.result import ModelCallError, RetryPolicy

GOOD = json.dumps({"severity": "high", "rationale": "Unauthenticated SQL injection in the login form."})
REPORT = {"report": "SQL injection in the login form lets an unauthenticated attacker bypass authentication."}
SLOW = RetryPolicy(attempts=4, base=3.0, multiplier=1.0, cap=3.0, timeout=5.0)
"""Retrying a missing key would wait 9 s per model: a run that waits at all is plain to see."""
CLAUDE, GPT = "anthropic/claude-sonnet-5-5", "openai/gpt-4o"
DEEPSEEK = "deepseek/deepseek-chat"
"""litellm sends a DeepSeek request with no key at all: without the check, it reaches the server."""
BEDROCK, VERTEX = "bedrock/anthropic.claude-3-haiku-20240307-v1:0", "vertex_ai/gemini-2.5-pro"
PLANTED = "sk-ant-PLANTED-0123456789abcdef"
DECLARED = f"""
[tool.rosetta.models."{DEEPSEEK}"]
adapter = "open-source"
class = "open"
context_window = 131072
max_output_tokens = 8192
family = "deepseek"
"""
"""DeepSeek's model declared (no endpoint of its own), so it renders whatever the unlisted-model gate says."""


@pytest.fixture(autouse=True)
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No key, token, secret, cloud profile or endpoint from this machine: only what a test sets."""
    for name in list(os.environ):
        if re.search(r"(^|_)(KEY|TOKEN|SECRET|CREDENTIALS)(_|$)", name) or name.endswith(("_API_BASE", "_PROFILE")) \
                or name.startswith(("AWS_", "AZURE_", "VERTEX", "GOOGLE_", "GCE_", "CLOUDSDK_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # botocore asks no instance role
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "no-gcloud"))
    monkeypatch.setattr("google.auth.compute_engine._metadata._NO_GCE_CHECK", True)  # nor a GCE identity


@pytest.fixture
def agent(tmp_path: Path) -> Any:
    tree = make_project(tmp_path / "project")
    (tree / "pyproject.toml").write_text("[project]\nname = 'demo'\n" + DECLARED, encoding="utf-8")
    agent = load("vuln-triage", project=tree)
    import_litellm()  # imported and every prompt rendered before a run is timed
    for model in (GPT, DEEPSEEK, CLAUDE):
        agent.explain(model)
    return agent


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FaultServer, FaultServer]]:
    """OpenAI and DeepSeek on one server (the keyless providers), Anthropic on another (its key set)."""
    with FaultServer([("ok", GOOD)]) as keyless, FaultServer([("ok", GOOD)]) as fallback:
        monkeypatch.setenv("OPENAI_API_BASE", keyless.url)
        monkeypatch.setenv("DEEPSEEK_API_BASE", keyless.url)
        monkeypatch.setenv("ANTHROPIC_API_BASE", fallback.url.removesuffix("/v1"))
        yield keyless, fallback


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every retry the runtime plans to wait before (RetryPolicy.delay is asked once per retry)."""
    planned: list[int] = []
    real = RetryPolicy.delay

    def recorded(self: RetryPolicy, retry: int, retry_after: float | None) -> float:
        planned.append(retry)
        return real(self, retry, retry_after)

    monkeypatch.setattr(RetryPolicy, "delay", recorded)
    return planned


def _run(agent: Any, how: str, chain: list[str], **options: Any) -> Any:
    first, *rest = chain
    if how == "arun":
        return asyncio.run(agent.arun(REPORT, first, fallbacks=rest, policy=SLOW, **options))
    if how == "stream":
        return agent.stream(REPORT, first, fallbacks=rest, policy=SLOW, **options).result()
    return agent.run(REPORT, first, fallbacks=rest, policy=SLOW, **options)


@pytest.mark.parametrize("how", ["run", "arun", "stream"])
@pytest.mark.parametrize("keyless, variable", [(GPT, "OPENAI_API_KEY"), (DEEPSEEK, "DEEPSEEK_API_KEY")])
def test_a_model_without_its_key_is_skipped_at_once_and_the_next_one_answers(
        agent, servers, waits, monkeypatch, caplog, how, keyless, variable):
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED)
    unreached, fallback = servers
    caplog.set_level(logging.INFO, logger="rosetta.runtime")
    began = time.monotonic()
    result = _run(agent, how, [keyless, CLAUDE])
    took = time.monotonic() - began
    assert result.model == CLAUDE and result.valid
    assert not unreached.requests and len(fallback.requests) == 1  # nothing sent without its key
    assert not waits and took < SLOW.base  # neither retried nor waited for
    skipped, answered = result.attempts
    assert (skipped.model, skipped.outcome, skipped.latency_s) == (keyless, "credentials", 0.0)
    assert f"${variable} is not set" in skipped.error and answered.outcome == "ok"
    assert f"${variable} is not set" in caplog.text and PLANTED not in caplog.text  # names, never values


def test_with_no_key_anywhere_the_error_names_every_variable_and_how_to_set_it(agent, servers, waits):
    unreached, fallback = servers
    began = time.monotonic()
    with pytest.raises(ModelCallError) as caught:
        agent.run(REPORT, GPT, fallbacks=[DEEPSEEK, CLAUDE], policy=SLOW)
    error = caught.value
    assert time.monotonic() - began < SLOW.base and not waits
    assert not unreached.requests and not fallback.requests
    assert error.kind == "credentials" and error.missing == ("OPENAI_API_KEY", "DEEPSEEK_API_KEY", "ANTHROPIC_API_KEY")
    headline = error.problems[0]
    assert headline.message == ("vuln-triage: no model of the chain has credentials here "
                                "($OPENAI_API_KEY, $DEEPSEEK_API_KEY, $ANTHROPIC_API_KEY not set)")
    assert "export OPENAI_API_KEY / DEEPSEEK_API_KEY / ANTHROPIC_API_KEY" in headline.hint
    assert "rosetta doctor" in headline.hint
    for problem, (model, variable) in zip(error.problems[1:], [(GPT, "OPENAI_API_KEY"), (DEEPSEEK, "DEEPSEEK_API_KEY"),
                                                                (CLAUDE, "ANTHROPIC_API_KEY")], strict=True):
        assert problem.message.startswith(f"{model}: no credentials for ") and f"${variable} is not set" in \
            problem.message
        assert f"export {variable}=<key>" in problem.hint and "rosetta doctor" in problem.hint
    assert [a.outcome for a in error.attempts] == ["credentials"] * 3
    assert "refused the request" not in str(error)


def test_a_failure_after_a_skipped_model_still_says_which_key_was_missing(agent, servers, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED)
    unreached, fallback = servers
    fallback.script = [("status", 400)]  # the request itself refused: the run ends there
    with pytest.raises(ModelCallError) as caught:
        agent.run(REPORT, GPT, fallbacks=[CLAUDE], policy=SLOW)
    assert caught.value.kind == "hard" and not unreached.requests and len(fallback.requests) == 1
    assert "export OPENAI_API_KEY=<key>" in caught.value.problems[0].hint
    assert PLANTED not in str(caught.value)


def test_a_key_passed_with_the_run_or_declared_with_the_model_counts_as_present(agent, servers, tmp_path):
    unreached, _ = servers
    result = agent.run(REPORT, DEEPSEEK, fallbacks=[], policy=SLOW, api_key="sk-test-not-a-real-key")
    assert result.model == DEEPSEEK and len(unreached.requests) == 1
    assert unreached.requests[0]["authorization"] == "Bearer sk-test-not-a-real-key"
    # a declared endpoint that names no key variable needs none; the embedded provider's mock needs none either
    tree = make_project(tmp_path / "declared")
    (tree / "pyproject.toml").write_text(f'[project]\nname = "demo"\n[tool.rosetta.models."openai/own-server"]\n'
                                         f'api_base = "{unreached.url}"\nadapter = "openai"\nclass = "mid"\n'
                                         'context_window = 128000\nmax_output_tokens = 4096\n', encoding="utf-8")
    own = load("vuln-triage", project=tree).run(REPORT, "openai/own-server", fallbacks=[], policy=SLOW)
    assert own.model == "openai/own-server" and len(unreached.requests) == 2
    mocked = agent.run(REPORT, GPT, fallbacks=[], policy=SLOW, extra={"mock_response": GOOD})
    assert mocked.valid and len(unreached.requests) == 2


def test_a_declared_models_unset_key_moves_on_like_a_vendors(agent, tmp_path, servers):
    """The declaration's own check ($MY_KEY is not set, the fix naming its table) is the one made;
    like a vendor's missing key it sends nothing and the next model of the chain is tried."""
    unreached, _ = servers
    tree = make_project(tmp_path / "declared")
    (tree / "pyproject.toml").write_text(f'[project]\nname = "demo"\n[tool.rosetta.models."openai/own-server"]\n'
                                         f'api_base = "{unreached.url}"\napi_key_env = "MY_KEY"\nadapter = "openai"\n'
                                         'class = "mid"\ncontext_window = 128000\nmax_output_tokens = 4096\n',
                                         encoding="utf-8")
    with pytest.raises(ModelCallError) as caught:
        load("vuln-triage", project=tree).run(REPORT, "openai/own-server", fallbacks=[], policy=SLOW)
    assert caught.value.kind == "credentials" and caught.value.missing == ("MY_KEY",)
    assert "$MY_KEY is not set" in str(caught.value) and 'tool.rosetta.models."openai/own-server"' in str(caught.value)
    assert not unreached.requests
    answered = load("vuln-triage", project=tree).run(REPORT, "openai/own-server", fallbacks=[CLAUDE], policy=SLOW,
                                                     extra={"mock_response": GOOD})
    assert answered.model == CLAUDE and not unreached.requests


@pytest.mark.parametrize("model, said", [(BEDROCK, "Unable to locate credentials"),
                                         (VERTEX, "default credentials were not found")])
def test_a_cloud_sdk_that_finds_no_credentials_is_not_retried(agent, waits, model, said):
    """Bedrock and Vertex AI take credentials from profiles, roles and ADC files too, so a missing
    variable is no reason to refuse them; their SDK's own error, under litellm's wrapper, is."""
    assert not check_credentials(model).refused
    prompt = agent.explain(CLAUDE).prompt
    steps = plan(prompt, REPORT, artifact="test", policy=SLOW, params={"model": model})
    with pytest.raises(ModelCallError) as caught:
        drive(steps, complete=import_litellm().completion)
    assert caught.value.kind == "credentials" and not waits
    assert [a.outcome for a in caught.value.attempts] == ["credentials"] and said in caught.value.attempts[0].error
    assert "rosetta doctor" in caught.value.problems[0].hint


def test_the_sdk_errors_are_classified_from_the_cause_chain():
    import botocore.exceptions
    import google.auth.exceptions

    litellm = import_litellm()
    for cause, wrapper in ((botocore.exceptions.NoCredentialsError(), litellm.AuthenticationError),
                           (google.auth.exceptions.DefaultCredentialsError("none"), litellm.APIConnectionError)):
        try:
            try:
                raise cause
            except Exception as error:  # litellm re-raises inside except: the SDK's error is the context
                raise wrapper(message=str(error), llm_provider="x", model="m")  # noqa: B904
        except Exception as wrapped:  # noqa: BLE001
            assert classify(wrapped) == "credentials", type(cause)
    assert classify(MissingCredentials("openai", ("OPENAI_API_KEY",))) == "credentials"
    assert classify(litellm.APIConnectionError(message="refused", llm_provider="x", model="m")) == "transient"
    assert classify(litellm.AuthenticationError(message="bad key", llm_provider="x", model="m")) == "denied"


@pytest.mark.parametrize("model, missing", [
    (GPT, ("OPENAI_API_KEY",)), (CLAUDE, ("ANTHROPIC_API_KEY",)),
    ("gemini/gemini-2.5-pro", ("GOOGLE_API_KEY", "GEMINI_API_KEY")),
    ("groq/llama-3.1-8b-instant", ("GROQ_API_KEY",)), ("openrouter/openai/gpt-4o", ("OPENROUTER_API_KEY",)),
    ("mistral/mistral-large-latest", ("MISTRAL_API_KEY",)),
    ("together_ai/meta-llama/Llama-3-8b", ("TOGETHERAI_API_KEY",)),
    (DEEPSEEK, ("DEEPSEEK_API_KEY",)), ("xai/grok-3", ("XAI_API_KEY",)),
    ("fireworks_ai/accounts/fireworks/models/llama-v3-8b", ("FIREWORKS_AI_API_KEY",)),
])
def test_a_key_based_host_is_refused_naming_its_variables(model, missing):
    found = check_credentials(model)
    assert found.refused and found.missing == missing
    assert credential_variables(model) == missing  # what metering reads, asked without this environment
    assert not check_credentials(model, {"model": model, "api_key": "k"}).refused
    assert not check_credentials(model, {"model": model, "mock_response": "hi"}).refused


@pytest.mark.parametrize("model, ambient, unset", [
    (BEDROCK, True, ()), ("sagemaker/endpoint", True, ()), (VERTEX, True, ("VERTEXAI_PROJECT", "VERTEXAI_LOCATION")),
    ("azure/my-deployment", True, ("AZURE_API_BASE", "AZURE_API_VERSION")),
    ("ollama_chat/llama3.1", False, ("OLLAMA_API_BASE",)), ("local/gemma-3-270m", False, ()),
])
def test_hosts_with_other_credential_sources_and_keyless_ones_are_never_refused(model, ambient, unset):
    found = check_credentials(model)
    assert not found.refused and found.ambient is ambient and found.unset == unset


def test_a_set_key_is_present_and_never_shown(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-PLANTED-value-0123456789")
    found = check_credentials(GPT)
    assert not found.refused and not found.missing and "PLANTED" not in repr(found)


def test_doctor_reports_what_the_runtime_checks(tmp_path, cli, monkeypatch):
    """One answer for both: doctor says which key is missing (a run moves on), which host finds its
    credentials elsewhere, and which are set, naming variables and never a value."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED)
    cache = tmp_path / "cache"
    cache.write_text("a file where the cache folder should be")  # the local weights are not assembled here
    monkeypatch.setenv("ROSETTA_CACHE_DIR", str(cache))
    tree = make_project(tmp_path / "project")
    (tree / "pyproject.toml").write_text(
        f'[project]\nname = "demo"\n[tool.rosetta.models."{BEDROCK}"]\nadapter = "anthropic"\nclass = "frontier"\n'
        'context_window = 200000\nmax_output_tokens = 4096\n', encoding="utf-8")
    result = cli("--project", tree, "doctor")
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())  # one record per provider (a narrow terminal): its lines join up
    for provider, status in (("openai", "missing OPENAI_API_KEY (a run moves on to the next model)"),
                             ("gemini", "missing GOOGLE_API_KEY, GEMINI_API_KEY"), ("anthropic", "set"),
                             ("bedrock", "not in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY); its "
                                         "SDK may still find them"),
                             ("ollama_chat", "none needed; the default endpoint unless OLLAMA_API_BASE is set")):
        assert re.search(rf" {provider} {re.escape(provider)}/\S+ credentials: {re.escape(status)}", text), \
            (provider, text)
    assert PLANTED not in result.output


def test_doctor_checks_every_provider_the_projects_agents_target(tmp_path, cli, monkeypatch):
    """Issue 80: not only the catalog's vendors — an agent that prefers azure/o3 gets Azure's row,
    naming AZURE_API_KEY and the agent."""
    monkeypatch.delenv("AZURE_API_KEY", raising=False)
    tree = make_project(tmp_path / "project")
    definition = tree / "signatures" / "vuln-triage.md"
    text = definition.read_text(encoding="utf-8")
    definition.write_text(text.replace("model_preferences:\n", "model_preferences:\n    - azure/o3\n", 1),
                          encoding="utf-8")
    result = cli("--project", tree, "doctor")
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert re.search(r" azure azure/o3 credentials: not in the environment \(AZURE_API_KEY\).* targeted by: vuln-triage",
                     text), text
