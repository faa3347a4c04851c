"""Issue 56: `rosetta evaluate --cross` on the scripted models — every model's prompt on every model,
the diagonal equal to `evaluate --model`, each column's best marked, the matrix kept in
compiled/<agent>/cross.yaml where the runtime's fallback reads it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_optimize import scripted, toy  # noqa: F401  (fixtures: the scripted provider, the toy project)

from rosetta.runtime.agent import load
from rosetta.store.cross import read_cross

MODELS = ("scripted/toy", "scripted/contrast")


def test_the_matrix_scores_every_prompt_on_every_model_and_is_kept_for_the_runtime(toy: Path, cli: Any) -> None:  # noqa: F811
    compiled = cli("-C", toy, "compile", toy / "signatures", "--model", "scripted/toy", "--optimize", "--trials", "12",
                   "--max-calls", "200", "--proposer", "scripted/proposer", "--fixed-demos")
    assert compiled.exit_code == 0, compiled.output
    result = cli("-C", toy, "evaluate", "toy-sorter", "--cross", MODELS[0], "--cross", MODELS[1], "-f", "json",
                 "--plot", toy / "matrix.html")
    assert result.exit_code == 0, result.output
    matrix = json.loads(result.stdout)
    assert matrix["models"] == list(MODELS) and set(matrix["scores"]) == {*MODELS, "uncompiled"}
    alone = json.loads(cli("-C", toy, "evaluate", "toy-sorter", "--model", "scripted/toy", "-f", "json").stdout)
    assert matrix["scores"]["scripted/toy"]["scripted/toy"] == alone["score"] == alone["recorded"]
    assert matrix["prompts"]["scripted/toy"].endswith("toy.yaml")
    for column in MODELS:
        top = max(row[column] for row in matrix["scores"].values())
        assert matrix["best"][column] == [r for r, row in matrix["scores"].items() if row[column] == top]
    kept = read_cross(toy / "compiled", "toy-sorter")
    artifact = load("toy-sorter", project=toy).explain("scripted/toy")
    assert kept.scores == matrix["scores"] and kept.prompts["scripted/toy"] == artifact.version
    # scripted models are outside the catalog (no family), so none lends to another: the record changes
    # nothing here (tests/runtime/test_cross_record.py covers lending between catalog models)
    shown = load("toy-sorter", project=toy).explain("scripted/contrast")
    assert shown.kind == "uncompiled" and "cross-model matrix" not in shown.reason
    assert "plotly" in (toy / "matrix.html").read_text(encoding="utf-8")
    table = cli("-C", toy, "evaluate", "toy-sorter", "--cross", MODELS[0], "--cross", MODELS[1])
    assert table.exit_code == 0 and "*" in table.stdout and "uncompiled render" in table.stdout
    said = " ".join(table.output.split())
    assert "recorded in compiled/toy-sorter/cross.yaml for the report" in said and "--split dev" in said


def test_cross_refuses_options_it_cannot_honour(toy: Path, cli: Any) -> None:  # noqa: F811
    for extra, named in ((["--uncompiled"], "--uncompiled"), (["--repeats", "2"], "--repeats")):
        result = cli("-C", toy, "evaluate", "toy-sorter", "--cross", MODELS[0], "--cross", MODELS[1], *extra)
        assert result.exit_code == 2 and named in result.output
    result = cli("-C", toy, "evaluate", "toy-sorter", "--model", MODELS[0], "--plot", toy / "x.html")
    assert result.exit_code == 2 and "--cross" in result.output
