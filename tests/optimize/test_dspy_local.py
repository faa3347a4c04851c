"""DSPy interop on the embedded model, no mocks: a DSPy optimizer (BootstrapFewShot) compiles the
agent's ``to_dspy_program()`` against ``local/gemma-3-270m``, its program answers with typed
per-property output fields, and ``rosetta.from_dspy`` brings what it chose back as a version of the
agent's artifact that rosetta's runtime answers with."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import REPO

import rosetta
from rosetta.signature import lower
from rosetta.store.artifact import read_artifact

LABELS = {"abbreviation", "description", "entity", "human", "location", "number"}


def test_a_dspy_optimizer_on_the_embedded_model_round_trips_through_rosetta(tmp_path: Path, local_model: str):
    import dspy

    from rosetta.local.provider import register

    project = tmp_path / "project"
    (project / "signatures").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    shutil.copy(REPO / "signatures" / "question-type.md", project / "signatures")
    signature = lower(rosetta.load_definition(project / "signatures" / "question-type.md"))
    rows = [json.loads(line) for line in (REPO / "datasets" / "question-type" / "train.jsonl").read_text().splitlines()]
    train = [signature.dspy_example(row["inputs"], row["output"]) for row in rows[:4]]

    def same_label(example, prediction, trace=None):
        return signature.output_from_dspy(prediction) == signature.output_from_dspy(example)

    register()
    lm = dspy.LM(local_model, temperature=0, max_tokens=30, cache=False)
    # a base model writes no [[ ## field ## ]] markers: the JSON adapter (a schema the grammar enforces) from the start
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        optimizer = dspy.BootstrapFewShot(metric=same_label, max_bootstrapped_demos=1, max_labeled_demos=2,
                                          max_rounds=1)
        compiled = optimizer.compile(signature.to_dspy_program(), trainset=train)
        prediction = compiled(question="What is the capital of France?")
    assert list(compiled.signature.output_fields) == ["label"]
    assert signature.output_from_dspy(prediction)["label"] in LABELS  # typed, parsed, one of the enum's values

    version = rosetta.from_dspy(compiled, "question-type", local_model, project=project)
    artifact = read_artifact(version)
    chosen = [signature.output_from_dspy(demo) for demo in compiled.predictors()[0].demos]
    assert artifact.provenance.optimizer["name"] == "dspy-import" and chosen
    assert artifact.prompt.demo_ids == tuple(f"dspy:{n}" for n in range(len(chosen)))
    agent = rosetta.load("question-type", project=project)
    result = agent.run_prompt(artifact.prompt, {"question": "Who wrote Hamlet?"})
    assert result.valid and result.data["label"] in LABELS
