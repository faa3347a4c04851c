"""Issue 54: for every bundled agent and every current catalog model, the request ``rosetta render
-m M`` shows is the request ``run -m M`` makes — the model's own artifact when it has one, else what
the runtime falls back to, re-fitted to the model. Compared twice: the keyword arguments litellm is
called with, and, for the hosted vendors, the bodies a local recorder receives from litellm."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, sample_inputs
from typer.testing import CliRunner
from vendor_recorder import VendorRecorder

from rosetta.definition import load_many
from rosetta.errors import RosettaError
from rosetta.providers.catalog import load_catalog
from rosetta.providers.credentials import check_credentials
from rosetta.render.prompt import RenderedPrompt

TRANSPORT = {"api_base", "api_key", "timeout", "num_retries", "max_retries", "mock_response", "metadata"}
"""Keyword arguments that say where and how a request goes, not what it says."""

HOSTED = {"anthropic", "openai", "gemini"}
"""Providers the recorder speaks; the others' bodies are compared as keyword arguments only."""

CATALOG = load_catalog()
MODELS = [m.id for m in CATALOG.models if CATALOG.status(m).state != "retired"]
AGENTS = {r.definition.name: Path(r.path).relative_to(REPO) for r in load_many([REPO / "signatures"])
          if r.definition is not None}
"""Each bundled agent's definition, relative to the project."""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of this repository's project: its agents, artifacts, labeled data and settings."""
    root = tmp_path_factory.mktemp("bundled")
    for name in ("signatures", "compiled", "datasets"):
        shutil.copytree(REPO / name, root / name)
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


@pytest.fixture(scope="module")
def recorder():
    with VendorRecorder('{"answer": "recorded"}') as server:
        yield server


def rendered(project: Path, agent: str, model: str) -> RenderedPrompt | str:
    """What ``rosetta render -f json`` shows, or its error when the agent cannot work on the model."""
    from rosetta.cli import app

    shown = CliRunner().invoke(app, ["--project", str(project), "render", str(project / AGENTS[agent]), "-m", model,
                                     "-f", "json"], catch_exceptions=False)
    if shown.exit_code == 2 and "error" in shown.output:
        return shown.output
    assert shown.exit_code == 0, shown.output
    return RenderedPrompt.from_dict(json.loads(shown.stdout))


@pytest.mark.parametrize("model", MODELS)
def test_render_shows_what_run_sends(project: Path, recorder: VendorRecorder, model: str) -> None:
    import rosetta
    from rosetta.local.litellm_offline import import_litellm

    litellm = import_litellm()
    provider = model.split("/", 1)[0]
    where = {"api_base": recorder.base_for(provider), "api_key": "recorded"} if provider in HOSTED else \
        {"api_key": "recorded"} if check_credentials(model).missing else {}  # groq/, mistral/: answered by mock_response
    for agent in sorted(AGENTS):
        inputs = sample_inputs(project / AGENTS[agent], project)
        calls: list[dict[str, Any]] = []

        def capture(**kwargs: Any) -> Any:
            calls.append(kwargs)
            if provider in HOSTED:
                return litellm.completion(**kwargs)
            return litellm.completion(**{**kwargs, "mock_response": '{"answer": "recorded"}'})

        shown = rendered(project, agent, model)
        first = len(recorder.requests)
        if isinstance(shown, str):  # render refuses (e.g. the model's window is too small): so does run
            with pytest.raises(RosettaError) as refused:
                rosetta.load(agent, project=project).run(inputs, model=model, fallbacks=[], complete=capture, **where)
            assert refused.value.problems[0].message in shown and not calls, f"{agent} on {model}"
            continue
        with contextlib.suppress(RosettaError):  # an answer the agent refuses: only the request matters here
            rosetta.load(agent, project=project).run(inputs, model=model, fallbacks=[], complete=capture,
                                                     validation_retries=0, **where)
        assert calls, f"{agent} on {model}: nothing was sent"
        sent = {k: v for k, v in calls[0].items() if k not in TRANSPORT}
        assert sent == shown.to_litellm(inputs), f"{agent} on {model}"
        if provider in HOSTED:
            run_body = recorder.requests[first].body
            litellm.completion(**shown.to_litellm(inputs), **where, num_retries=0)
            assert run_body == recorder.requests[-1].body, f"{agent} on {model}"
