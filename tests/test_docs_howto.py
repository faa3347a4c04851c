"""Issue 86: the how-to pages that call a cloud model work as written (docs/howto/hosts.md, section
by section, and docs/howto/tools.md). Each runs in a fresh project holding the bundled agents —
``toml`` blocks added to its pyproject.toml, ``export`` lines as the environment, ``rosetta``
commands through the CLI, Python blocks in order in one namespace — against
tests/vendor_recorder.py on 127.0.0.1, which answers in each vendor's format (and plays the model's
tool calls), with fake credentials that sign the way each cloud signs (tests/cloud_credentials.py).
The call must reach the route the host's API has, and what the page prints is the recorder's answer.

What differs from a reader's machine, and why: the hosts' public endpoints are the recorder (the
litellm variables for them are set to it, and an exported URL keeps its path but not its host); a
variable the fake cloud set up (keys, the service-account file) keeps its fake value. The other
how-to pages need no provider and run in tests/test_docs_snippets.py."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from cloud_credentials import VERTEX_LOCATION, VERTEX_PROJECT, cloud_env
from conftest import REPO
from documented import run_blocks
from vendor_recorder import VendorRecorder

HOWTO = REPO / "docs" / "howto"
PAGES_WITH_A_PROVIDER = (HOWTO / "hosts.md", HOWTO / "tools.md")
"""The pages this module runs (tests/test_docs_snippets.py runs the others)."""
ANSWER = {"severity": "high", "rationale": "SQL injection in the login form lets anyone log in."}
ROUTES = {
    "Azure OpenAI": "/openai/deployments/prod-gpt4o/chat/completions",
    "Claude on Amazon Bedrock": "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse",
    "Gemini on Vertex AI": f"/v1/projects/{VERTEX_PROJECT}/locations/{VERTEX_LOCATION}/publishers/google/models/"
                           "gemini-2.5-pro:generateContent",
    "OpenRouter": "/v1/chat/completions",
    "Your own server (vLLM, llama.cpp, Ollama, LM Studio)": "/v1/chat/completions",
}
"""Per recipe of hosts.md: the path its call must reach."""
PUBLIC_ENDPOINTS = {"OPENROUTER_API_BASE": "/v1", "AWS_BEDROCK_RUNTIME_ENDPOINT": "", "VERTEXAI_API_BASE": "",
                    "ANTHROPIC_API_BASE": ""}
"""litellm's variables for the hosts' public endpoints (a reader sets none), pointed at the recorder."""


def sections(page: Path) -> dict[str, str]:
    """The page's ``##`` sections by title."""
    parts = re.split(r"^## (.+)$", page.read_text(encoding="utf-8"), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_recipe_with_code_is_checked() -> None:
    with_code = {title for title, text in sections(HOWTO / "hosts.md").items() if "```" in text}
    assert with_code == set(ROUTES)


@pytest.mark.parametrize("title", list(ROUTES))
def test_the_recipe_calls_the_host_as_written(title: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with VendorRecorder(json.dumps(ANSWER)) as recorder:
        printed, _ = _run(sections(HOWTO / "hosts.md")[title], title, recorder, tmp_path, monkeypatch)
        paths = [request.path for request in recorder.requests]
    assert ROUTES[title] in paths, paths
    assert printed.split()[0] == ANSWER["severity"], printed


FINAL = "Incident: jdoe signed in from 203.0.113.7 after failed attempts; INC-1 opened for secops."
CALLS = [("search_logs", {"query": "user:jdoe", "time_range": {"start": "2026-12-01T03:00:00Z",
                                                               "end": "2026-12-01T04:00:00Z"}}),
         ("open_ticket", {"title": "Impossible travel for jdoe", "severity": "sev2", "assignee_team": "secops",
                          "summary": "Two logins from 203.0.113.7 twenty minutes after a Lisbon sign-in."})]


def test_the_tools_page_runs_the_loop_and_answers_the_calls_by_hand(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The model (the recorder) searches the logs, then opens a ticket, then answers: in one run with
    the functions, and again in a conversation that answers each call itself."""
    def model(results: list[str]) -> list[tuple[str, object]] | None:
        return [CALLS[len(results)]] if len(results) < len(CALLS) else None

    with VendorRecorder(FINAL, tools=model) as recorder:
        printed, namespace = _run((HOWTO / "tools.md").read_text(encoding="utf-8"), "tools.md", recorder, tmp_path,
                                  monkeypatch)
    lines = printed.splitlines()
    assert lines[0].startswith("search_logs -> [{'time': '2026-12-01T03:12:09Z'"), printed
    assert lines[1] == "open_ticket -> INC-1", printed
    assert lines.count(FINAL) == 2, printed  # the run's answer, then the conversation's
    assert [ticket["team"] for ticket in namespace["tickets"]] == ["secops", "secops"]
    answered = [request for request in recorder.requests if "tool_result" in json.dumps(request.body)]
    assert len(answered) == 4  # two rounds answered in each of the two ways


def _run(text: str, title: str, recorder: VendorRecorder, tmp_path: Path,
         monkeypatch: pytest.MonkeyPatch) -> tuple[str, dict[str, object]]:
    """Run ``text``'s blocks in a fresh project against ``recorder``: what they printed, and their
    namespace."""
    project = tmp_path / "project"
    shutil.copytree(REPO / "signatures", project / "signatures")
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    monkeypatch.delenv("ROSETTA_TRUSTED_ENDPOINTS", raising=False)
    faked = _variables_set_by(lambda: cloud_env(recorder, monkeypatch, tmp_path))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-not-a-real-key")
    for variable, path in PUBLIC_ENDPOINTS.items():
        monkeypatch.setenv(variable, recorder.root + path)

    def export(name: str, value: str) -> None:
        if name not in faked:  # a key or file the fake cloud set up keeps its fake value
            monkeypatch.setenv(name, _on_recorder(value, recorder) if "://" in value else value)

    shown, namespace = run_blocks(text, title, project, monkeypatch, export=export)
    return "".join(shown), namespace


def _variables_set_by(set_up: Callable[[], object]) -> set[str]:
    """The environment variables ``set_up`` sets."""
    before = dict(os.environ)
    set_up()
    return {name for name, value in os.environ.items() if before.get(name) != value}


def _on_recorder(url: str, recorder: VendorRecorder) -> str:
    """``url`` on the recorder: its path kept, its scheme and host replaced."""
    return recorder.root + urlsplit(url).path.rstrip("/")
