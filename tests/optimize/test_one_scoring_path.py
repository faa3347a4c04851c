"""One scoring path (issue 84): ``evaluate``, the search and the cross-model matrix score a row
through the same :class:`~rosetta.optimize.evaluation.Evaluator`, so the same prompt gets the same
row — score, validity, calls — from each, whatever the model answers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import scripted_model
from scripted_model import write_toy_project

from fault_server import FaultServer
from rosetta.optimize.cache import EvalCache
from rosetta.optimize.context import load_context
from rosetta.optimize.evaluation import Budget, Evaluator
from rosetta.optimize.rescore import evaluate
from rosetta.settings import load_settings


@pytest.fixture(autouse=True)
def scripted() -> None:
    scripted_model.register()


SERVED = "openai/toy-on-a-server"  # a declared model on the fault server: its faults end rows as failures


@pytest.mark.parametrize("model", ["scripted/toy", "scripted/garbage", "scripted/stutter", "scripted/sloppy", SERVED])
def test_evaluate_and_the_search_give_identical_rows(tmp_path: Path, model: str) -> None:
    """Right answers, unparsable ones (each spends its corrections), a first answer corrected on
    some rows, wrong labels, and rows that end in a provider's refusal after retried 503s: every
    row alike on both paths (evaluate counted every attempt of a failed row, the search the
    answered ones)."""
    write_toy_project(tmp_path)
    definition = tmp_path / "signatures" / "toy-sorter.md"
    definition.write_text(definition.read_text().replace("model_preferences: [scripted/toy]",
                                                         f"model_preferences: [{model}]"))
    script = [("status", 503), ("status", 400), ("ok", '{"label": "alpha"}')]
    with FaultServer(list(script)) as server:
        with (tmp_path / "pyproject.toml").open("a") as pyproject:
            pyproject.write(f'\n[tool.rosetta.models."{SERVED}"]\napi_base = "{server.url}"\n')
        _compare(tmp_path, definition, model, replay=lambda: setattr(server, "script", list(script)))


def _compare(root: Path, definition: Path, model: str, replay: Callable[[], None]) -> None:
    settings = load_settings(root)
    report = evaluate(definition, model, settings=settings, uncompiled=True)
    replay()  # the server plays its script again for the search

    context = load_context(definition, model, settings=settings)
    prompt = context.agent.selector.render_uncompiled(context.model)
    examples = context.data.split("test")
    searched = Evaluator(context.agent, context.metric, EvalCache(None), Budget()).race_scores(prompt, examples)

    assert [(row["id"], row["score"], row["calls"]) for row in report.rows] == [
        (example.id, scored.plain, scored.calls) for example, scored in zip(examples, searched, strict=True)]
    assert report.calls == sum(scored.calls for scored in searched)
    assert len(report.rows) == 16 and report.score == sum(scored.plain for scored in searched) / 16
