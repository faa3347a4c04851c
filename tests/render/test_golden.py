"""Golden prompts: every bundled agent rendered for one model of each adapter, stored as readable
text under tests/render/golden/ so a reviewer sees exactly what each provider receives.

Regenerate after an intended change with ``ROSETTA_UPDATE_GOLDEN=1 ./dev test -k golden`` and
review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import REPO
from rosetta.definition import discover_definitions, load_definition
from rosetta.errors import RenderError
from rosetta.render import render
from rosetta.signature import lower

GOLDEN = Path(__file__).parent / "golden"
MODELS = {"anthropic": "sonnet", "openai": "openai/gpt-4o", "google": "gemini/2.5-pro",
          "open-source": "ollama/llama3.1"}
AGENTS = sorted(discover_definitions(REPO / "signatures"))


def snapshot(path: Path, model: str) -> str:
    signature = lower(load_definition(path))
    try:
        prompt = render(signature, model)
    except RenderError as error:
        return f"# {signature.name} on {model}: cannot render\n{error}\n"
    header = [
        f"# {signature.name} on {prompt.model} (adapter {prompt.adapter}, class {prompt.model_class})",
        f"# system placement: {prompt.system_placement.value}; structured output: "
        f"{prompt.structured_output.value if prompt.structured_output else 'none (free text)'}",
        f"# tokens (estimate): {json.dumps(prompt.tokens)}",
    ]
    header += [f"# warning: {w}" for w in prompt.warnings] + [f"# dropped: {d}" for d in prompt.dropped]
    params = {**prompt.generation, **prompt.request_params}
    if prompt.tools:
        params["tools (provider envelope)"] = prompt.tools
    return ("\n".join(header) + "\n\n" + prompt.render_for_display()
            + "\n=== REQUEST PARAMETERS ===\n" + json.dumps(params, indent=2) + "\n")


@pytest.mark.parametrize("adapter", sorted(MODELS))
@pytest.mark.parametrize("path", AGENTS, ids=[p.name for p in AGENTS])
def test_rendered_prompt_matches_golden(path, adapter):
    expected_file = GOLDEN / f"{path.name.split('.')[0]}.{adapter}.txt"
    actual = snapshot(path, MODELS[adapter])
    if os.environ.get("ROSETTA_UPDATE_GOLDEN"):
        expected_file.write_text(actual)
    assert expected_file.exists(), f"missing golden file {expected_file.name}; run with ROSETTA_UPDATE_GOLDEN=1"
    assert actual == expected_file.read_text(), f"{expected_file.name} changed; review and regenerate"
