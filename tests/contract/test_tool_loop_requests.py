"""Issue 82: every request of a tool loop (the first, and the one carrying the tools' results back)
is a body the vendor's own API types accept, on OpenAI, Anthropic and Gemini, plain and streamed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from test_vendor_requests import VENDORS, _problems
from vendor_recorder import VendorRecorder

import rosetta

ANSWER = json.dumps({"verdict": "ok", "reason": "every column it reads exists"})
MODELS = {"openai": ("openai/gpt-4o", "openai"), "anthropic": ("anthropic/claude-sonnet-4-5", "anthropic"),
          "google": ("gemini/gemini-2.5-pro", "gemini")}


def _both(results: list[str]) -> list[tuple[str, Any]] | None:
    return [("describe_table", {"table": "users"}), ("row_count", {"table": "users"})] if not results else None


@pytest.mark.parametrize("adapter", sorted(MODELS))
@pytest.mark.parametrize("streamed", [False, True], ids=["run", "stream"])
def test_every_step_of_a_tool_loop_is_a_valid_vendor_request(tmp_path: Path, adapter: str, streamed: bool) -> None:
    assert adapter in VENDORS
    (tmp_path / "signatures").mkdir()
    shutil.copy(REPO / "tests" / "fixtures" / "tools" / "sql-review.md", tmp_path / "signatures")
    agent = rosetta.load("sql-review", project=tmp_path)
    model, provider = MODELS[adapter]
    tools = {"describe_table": lambda table: {"id": "integer"}, "row_count": lambda table: 3}
    with VendorRecorder(ANSWER, tools=_both) as server:
        options = {"model": model, "api_base": server.base_for(provider), "api_key": "sk-test-not-real",
                   "fallbacks": [], "tools": tools}
        if streamed and adapter == "openai":  # the recorder streams tool calls in OpenAI's shape
            result = agent.stream({"query": "SELECT id FROM users"}, **options).result()
        else:
            result = agent.run({"query": "SELECT id FROM users"}, **options)
        requests = list(server.requests)
    assert result.valid and [call.get("result") for call in result.tool_calls] == [{"id": "integer"}, 3]
    assert len(requests) == 2
    assert not _problems(requests, adapter, f"sql-review@{model}")
