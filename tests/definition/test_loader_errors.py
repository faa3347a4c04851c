"""Schema errors name file, line, field, expectation and a hint; references stay in the project;
and no mutated definition ever escapes as anything but a DefinitionError."""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import PORTABLE
from rosetta.definition import load_definition
from rosetta.errors import DefinitionError


def _problems(path):
    with pytest.raises(DefinitionError) as caught:
        load_definition(path)
    return caught.value.problems


def test_a_known_field_in_another_shape_is_set_aside_with_its_line_and_the_shapes_read(portable):
    """Issue 58: only what rosetta cannot run without refuses a definition; a known field in a shape it
    does not read is kept as written, reported with its line, what was found and what is read there."""
    agent = load_definition(portable("demo", {
        "  enabled: true": "  enabled: sometimes",
        "reasoning_strategy: adaptive": "reasoning_strategy: sometimes",  # off-list: tolerated, lint reports it
        "minimum_context_window: 8000": "minimum_context_window: lots",
        "identity:\n": "identity:\n  belbin_role: Specialist\n",  # unknown: kept, lint reports it
    }))
    enabled, window = agent.source.unread
    assert (enabled.path, enabled.value, enabled.expected) == (("portability", "enabled"), "sometimes", "true or false")
    assert (window.path, window.value, window.expected) == (("portability", "minimum_context_window"), "lots",
                                                            "a whole number")
    assert agent.spec.portability.enabled is False and agent.spec.portability.minimum_context_window is None
    assert agent.locate(*window.path)[1] == 20
    from rosetta.signature import lower

    assert lower(agent).extensions["portability.minimum_context_window"] == "lots"  # carried, as written


def test_what_rosetta_cannot_run_without_is_refused_with_line_field_expected_and_hint(write):
    problems = _problems(write("x.md", "---\nname: 'bad name!'\noutput:\n  required: true\n  schema: [a, b]\n"
                                       "---\nbody\n"))
    name, schema = problems
    assert name.field == "name" and name.location.line == 2 and "invalid characters" in name.message
    assert schema.field == "output.schema" and schema.location.line == 5 and schema.expected


def test_missing_name(write):
    (problem,) = _problems(write("x.md", "---\ndescription: no name\n---\nbody\n"))
    assert problem.field == "name" and "missing" in problem.message and "name:" in problem.hint


def test_a_bad_regex_is_refused_and_a_bad_count_range_set_aside(portable):
    path = portable("demo", {
        "  body_format: markdown": "  body_format: markdown\n  few_shot: {count_range: {min: 4, max: 2}}",
        "output:\n": "guardrails:\n  input_validation:\n    - {field: report, pattern: '(['}\noutput:\n",
    })
    (problem,) = _problems(path)
    assert "invalid regular expression" in problem.message and problem.field == "guardrails.input_validation[0]"
    path.write_text(path.read_text().replace("pattern: '(['", "pattern: 'x'"))
    (unread,) = load_definition(path).source.unread
    assert unread.path == ("portability", "few_shot", "count_range") and "min (4) is greater than max (2)" in unread.expected


def test_provider_params_do_not_fail_the_load(portable):
    agent = load_definition(portable("demo", {"  required: true": "  required: true\n  response_format: json"}))
    assert agent.source.raw["output"]["response_format"] == "json"


@pytest.mark.parametrize("field", ["examples_ref", "template"])
@pytest.mark.parametrize("reference, message", [
    ("../../etc/passwd", "outside the project root"),
    ("/etc/passwd", "absolute path"),
    ("~/secrets.txt", "absolute path"),
    ("", "empty"),
])
def test_references_must_stay_inside_the_project(portable, field, reference, message):
    edit = ({"  body_format: markdown": f"  body_format: markdown\n  few_shot: {{enabled: true, examples_ref: '{reference}'}}"}
            if field == "examples_ref" else {"  required: true": f"  required: true\n  template: '{reference}'"})
    (problem,) = _problems(portable("demo", edit))
    assert message in problem.message and problem.location.line is not None


@pytest.mark.parametrize("field", ["examples_ref", "template"])
def test_a_reference_found_nowhere_is_reported_with_every_path_tried(portable, field):
    few_shot = "  body_format: markdown\n  few_shot: {enabled: true, examples_ref: missing.md}"
    edit = ({"  body_format: markdown": few_shot}
            if field == "examples_ref" else {"  required: true": "  required: true\n  template: missing.md"})
    agent = load_definition(portable("demo", edit))
    (missing,) = agent.source.missing_references
    assert missing.reference == "missing.md" and missing.tried and all(t.endswith("missing.md") for t in missing.tried)


def test_symlink_out_of_the_project_is_refused(portable, project, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside") / "examples.jsonl"
    outside.write_text("{}\n")
    os.symlink(outside, project / "examples.jsonl")
    (problem,) = _problems(portable("demo", {"  body_format: markdown":
                                             "  body_format: markdown\n  few_shot: {examples_ref: examples.jsonl}"}))
    assert "outside the project root" in problem.message


def test_valid_references_load(portable, write):
    write("data/examples.jsonl", "{}\n")
    write("templates/out.md", "# Out\n")
    agent = load_definition(portable("demo", {
        "  body_format: markdown": "  body_format: markdown\n  few_shot: {examples_ref: data/examples.jsonl}",
        "  required: true": "  required: true\n  template: templates/out.md",
    }))
    assert agent.spec.portability.few_shot.examples_ref == "data/examples.jsonl"


# -- property: any mutation either loads or raises DefinitionError -----------------------------

_SNIPPETS = ["---", "\t", ": ", "- ", "&a", "*a", "!!python/object:os.system", "[", "{", "'", '"', "\x00",
             "\ufeff", "\r", "name: other", "  ", "<<: *a", "? ", "...", "%YAML 1.1", "\xe9", "|", ">"]


@st.composite
def mutated_definitions(draw):
    text = PORTABLE.format(name="demo")
    rng = random.Random(draw(st.integers(0, 2**32)))
    for _ in range(draw(st.integers(1, 6))):
        lines = text.split("\n")
        choice = draw(st.integers(0, 4))
        index = rng.randrange(len(lines))
        if choice == 0:
            lines.insert(index, draw(st.sampled_from(_SNIPPETS)) + draw(st.text(max_size=10)))
        elif choice == 1 and len(lines) > 1:
            del lines[index]
        elif choice == 2:
            j = rng.randrange(len(lines))
            lines[index], lines[j] = lines[j], lines[index]
        elif choice == 3:
            position = rng.randrange(len(lines[index]) + 1)
            lines[index] = lines[index][:position] + draw(st.sampled_from(_SNIPPETS)) + lines[index][position:]
        else:
            lines[index] = draw(st.text(max_size=40))
        text = "\n".join(lines)
    encoding = draw(st.sampled_from(["utf-8", "utf-16", "latin-1"]))
    return text.encode(encoding, errors="replace")


@settings(max_examples=int(os.environ.get("ROSETTA_FUZZ_EXAMPLES", 400)), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=mutated_definitions())
def test_mutated_definitions_load_or_raise_definition_error(write, data):
    path = write("demo.md", data)
    try:
        agent = load_definition(path)
    except DefinitionError as error:
        assert error.problems and all(p.message for p in error.problems)
        assert str(error)
    else:
        assert agent.name
