"""Lowering: definition → provider-neutral Signature, and the DSPy interop."""

from __future__ import annotations

import json

import pytest

from conftest import REPO
from rosetta.definition import load_definition
from rosetta.errors import DefinitionError
from rosetta.signature import lower


def test_agent_without_inputs_gets_a_single_request_input(write):
    signature = lower(load_definition(write("x.md", "---\nname: x\n---\nYou help.\n")))
    assert [(f.name, f.type, f.required) for f in signature.inputs] == [("request", "string", True)]
    assert signature.output_schema is None and signature.output_model is None


def test_bundled_triage_lowers_to_typed_fields():
    signature = lower(load_definition(REPO / "signatures" / "vuln-triage.md"))
    assert [f.name for f in signature.inputs] == ["report"]
    assert signature.role == "Vulnerability Triage Analyst" and signature.forbidden_actions
    assert signature.demo_range == (1, 4) and len(signature.source_sha256) == 64
    answer = signature.output_model.model_validate({"severity": "high", "rationale": "auth bypass"})
    assert answer.severity == "high"


def test_tool_level_required_is_folded_into_parameters(write):
    signature = lower(load_definition(write("t.md", """\
        ---
        name: t
        tools:
          - name: lookup
            parameters: {type: object, properties: {id: {type: string}}}
            required: [id]
        ---
        body
        """)))
    assert signature.tools[0].parameters["required"] == ["id"]


def _with_examples(write, lines: list[str]):
    write("examples.jsonl", "\n".join(lines) + "\n")
    return write("d.md", """\
        ---
        name: d
        inputs: {report: {type: string}}
        output: {schema: {type: object, properties: {label: {type: string}}, required: [label]}}
        portability:
          few_shot: {enabled: true, examples_ref: examples.jsonl, count_range: {min: 1, max: 2}}
        ---
        body
        """)


def test_demos_load_from_examples_ref(write):
    path = _with_examples(write, [json.dumps({"id": "a", "inputs": {"report": "r1"}, "output": {"label": "x"}}),
                                  json.dumps({"inputs": {"report": "r2"}, "output": {"label": "y"}})])
    demos = lower(load_definition(path)).demos
    assert [d.id for d in demos] == ["a", "examples-2"] and demos[1].output == {"label": "y"}


@pytest.mark.parametrize("line, message", [
    ("{not json", "invalid JSON"),
    ('{"inputs": "r"}', "'inputs' (an object) and 'output'"),
    ('{"inputs": {"rep": "r"}, "output": 1}', "undeclared inputs"),
])
def test_bad_example_rows_name_file_and_line(write, line, message):
    path = _with_examples(write, ['{"inputs": {"report": "ok"}, "output": {"label": "x"}}', line])
    with pytest.raises(DefinitionError) as caught:
        lower(load_definition(path))
    problem = caught.value.problems[0]
    assert message in problem.message and problem.location.line == 2
    assert problem.location.file.endswith("examples.jsonl")


@pytest.mark.parametrize("agent", ["vuln-triage", "advisory-extractor", "log-summarizer-open", "security-advisor"])
def test_to_dspy_is_a_real_signature_dspy_can_format(agent):
    import dspy

    signature = lower(load_definition(REPO / "signatures" / f"{agent}.md"))
    dspy_signature = signature.to_dspy()
    assert issubclass(dspy_signature, dspy.Signature)
    assert list(dspy_signature.input_fields) == [f.name for f in signature.inputs]
    properties = (signature.output_schema or {}).get("properties")
    expected = list(properties) if properties else ["answer"]  # one typed field per top-level property
    assert list(dspy_signature.output_fields) == expected
    inputs = {f.name: f"sample {f.name}" for f in signature.inputs}
    for adapter in (dspy.ChatAdapter(), dspy.JSONAdapter()):
        messages = adapter.format(dspy_signature, demos=[], inputs=inputs)
        text = "\n".join(m["content"] for m in messages)
        assert all(value in text for value in inputs.values())
        assert all(name in text for name in expected)
    if properties:
        model_fields = {(f.alias or n): f for n, f in signature.output_model.model_fields.items()}
        assert all(dspy_signature.output_fields[n].annotation == model_fields[n].annotation for n in expected)
    instructions = dspy_signature.instructions
    assert signature.role in instructions and all(a in instructions for a in signature.forbidden_actions)


def test_dspy_examples_and_predictions_round_trip_rosetta_outputs():
    signature = lower(load_definition(REPO / "signatures" / "vuln-triage.md"))
    output = {"severity": "high", "rationale": "Unauthenticated SQL injection dumps the users table."}
    example = signature.dspy_example({"report": "SQLi in login"}, output)
    assert example.inputs().toDict() == {"report": "SQLi in login"} and example.severity == "high"
    assert signature.output_from_dspy(example) == output
    program = signature.to_dspy_program()
    assert len(program.demos) == len(signature.demos)
    assert all(signature.output_from_dspy(d) == demo.output for d, demo in zip(program.demos, signature.demos,
                                                                              strict=True))


