"""Rendering is bounded (issue 52): schema processing and budget trimming take time linear in the
definition, and what cannot be rendered is a located error, never a traceback or a hang."""

from __future__ import annotations

import random
import re
import time

import pytest
from pydantic import ValidationError

from rosetta.definition import load_definition
from rosetta.definition.document import Section
from rosetta.definition.models import GenerationParams
from rosetta.errors import Problem, RenderError
from rosetta.parts import Demo
from rosetta.render import render
from rosetta.render.schemas import MAX_INLINED_VALUES, inline_refs
from rosetta.schema_types import SchemaTypeError, model_from_schema
from rosetta.signature import Signature, lower

MODELS = {"anthropic": "sonnet", "openai": "openai/gpt-4o", "google": "gemini/2.5-pro",
          "open-source": "ollama/llama3.1"}


def doubling(levels: int) -> dict:
    """Each definition refers to the next twice: 2**levels copies once inlined."""
    defs = {f"L{i}": {"type": "object", "properties": {"a": {"$ref": f"#/$defs/L{i + 1}"},
                                                       "b": {"$ref": f"#/$defs/L{i + 1}"}}} for i in range(levels)}
    defs[f"L{levels}"] = {"type": "string"}
    return {"type": "object", "properties": {"root": {"$ref": "#/$defs/L0"}}, "required": ["root"], "$defs": defs}


def chain(length: int) -> dict:
    defs = {f"L{i}": {"$ref": f"#/$defs/L{i + 1}"} for i in range(length)}
    defs[f"L{length}"] = {"type": "object", "properties": {"x": {"type": "string"}}}
    return {"type": "object", "properties": {"root": {"$ref": "#/$defs/L0"}}, "$defs": defs}


def signature(schema: dict | None = None, **fields) -> Signature:
    return Signature(name="bounded", output_schema=schema, **fields)


@pytest.mark.parametrize("adapter", ["anthropic", "google", "open-source"])
def test_a_ref_bomb_is_refused_at_once_where_refs_are_inlined(adapter):
    start = time.perf_counter()
    with pytest.raises(RenderError) as caught:
        render(signature(doubling(40)), MODELS[adapter])
    assert time.perf_counter() - start < 2.0  # was minutes: 2**40 copies
    (problem,) = caught.value.problems
    assert problem.field == "output.schema"
    assert re.search(r"would make [\d,]{17,} values", problem.message) and "'L0' alone" in problem.message


def test_a_ref_bomb_renders_where_definitions_are_kept():
    prompt = render(signature(doubling(40)), MODELS["openai"])  # strict mode keeps $defs: nothing multiplies
    assert prompt.tokens["schema"] < 3000


def test_a_small_doubling_and_a_long_chain():
    schema, _ = inline_refs(doubling(10), "m")  # 2**11 values: under the limit, inlined as before
    assert schema["properties"]["root"]["properties"]["a"]["properties"]["b"]["type"] == "object"
    assert "$defs" not in schema
    with pytest.raises(RenderError, match="chain more than 64 deep"):
        inline_refs(chain(3000), "m")
    assert 2 ** 15 > MAX_INLINED_VALUES
    with pytest.raises(RenderError, match="would make"):
        inline_refs(doubling(15), "m")


def test_ordinary_refs_inline_as_before():
    schema = {"type": "object", "$defs": {"Tag": {"type": "string", "enum": ["a", "b"]}},
              "properties": {"tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}},
                             "main": {"$ref": "#/$defs/Tag", "description": "The main one."}}}
    assert inline_refs(schema, "m")[0] == {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        "main": {"type": "string", "enum": ["a", "b"], "description": "The main one."}}}


MISSHAPEN = [
    ({"type": "object", "properties": ["a", "b"]}, "properties", "output.schema.properties"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": [["a"]]}, "required",
     "output.schema.required"),
    ({"type": "object", "properties": {"a": {"anyOf": 5}}}, "anyOf", "output.schema.properties.a.anyOf"),
    ({"type": "object", "properties": {"a": {"type": "string", "enum": 7}}}, "enum", "output.schema.properties.a.enum"),
    ({"type": ["object", 5]}, "type", "output.schema.type"),
    ({"type": "object", "$defs": {"a": "text"}, "properties": {"p": {"$ref": "#/$defs/a"}}}, None, None),
]


@pytest.mark.parametrize("adapter", sorted(MODELS))
@pytest.mark.parametrize(("schema", "keyword", "field"), MISSHAPEN)
def test_a_misshapen_output_schema_is_a_located_render_error(adapter, schema, keyword, field):
    try:
        render(signature(schema), MODELS[adapter])
    except RenderError as error:
        (problem,) = error.problems
        assert problem.field.startswith("output.schema")
        if keyword is not None:
            assert problem.field == field and f"keyword {keyword!r}" in problem.message
    else:
        assert keyword is None and adapter == "openai"  # strict mode sends $defs as they are


def test_misshapen_tool_parameters_are_refused_under_the_tool():
    from rosetta.parts import ToolSpec

    tool = ToolSpec(name="lookup", description="", parameters={"type": "object", "properties": [1]})
    with pytest.raises(RenderError) as caught:
        render(signature(tools=(tool,)), MODELS["google"])
    assert caught.value.problems[0].field == "tools[0].parameters.properties"
    assert caught.value.problems[0].message.startswith("tools[0].parameters schema keyword 'properties'")


@pytest.mark.parametrize(("schema", "says"), [
    (doubling(40), "nests more than 64 levels"),
    (chain(3000), "nests more than 64 levels"),
    ({"type": "object", "properties": {"r": {"$ref": "#/$defs/L0"}}, "$defs": {
        **{f"L{i}": {"allOf": [{"$ref": f"#/$defs/L{i + 1}"}, {"$ref": f"#/$defs/L{i + 1}"}]} for i in range(30)},
        "L30": {"type": "object", "properties": {"x": {"type": "integer"}}}}}, "more than 20,000 parts"),
    ({"type": "object", "properties": {"p": {"type": "string", "pattern": "(" * 2000 + ")" * 2000}}}, "nests groups"),
    ({"type": "object", "properties": {"a": {}}, "required": [["a"]]}, "required must be a list of property names"),
    ({"type": "object", "allOf": [5, True]}, "must be an object or a boolean"),
])
def test_typing_a_hostile_schema_is_a_located_error_at_once(schema, says):
    start = time.perf_counter()
    with pytest.raises(SchemaTypeError, match=says):
        model_from_schema(schema)
    assert time.perf_counter() - start < 2.0


def test_a_typed_pattern_is_searched_with_a_time_limit():
    model = model_from_schema({"type": "object", "properties": {"code": {"type": "string", "pattern": "^(a|aa)+$"}}})
    assert model.model_validate({"code": "aaa"}).code == "aaa"
    start = time.perf_counter()
    with pytest.raises(ValidationError, match="could not be checked against the pattern"):
        model.model_validate({"code": "a" * 60 + "!"})
    assert time.perf_counter() - start < 10.0
    with pytest.raises(ValidationError, match="should match the pattern"):
        model.model_validate({"code": "b"})


def test_thirty_two_thousand_sections_render_in_well_under_a_second(write):
    body = "".join(f"## Section {i}\nLine {i} of context.\n" for i in range(32000))
    signature_ = lower(load_definition(write("many.md", "---\nname: many\n---\n" + body, dedent=False)))
    for model in MODELS.values():
        start = time.perf_counter()
        prompt = render(signature_, model)
        assert time.perf_counter() - start < 2.0  # 0.15–0.4 s on two idle cores; was hours (a render per drop)
    assert len(prompt.dropped) > 20000 and prompt.dropped[0] == "section 'Section 31999'"


def _one_at_a_time(compose, sections, demos, budget, signature, model, generation, delimiter):
    """The trimming before issue 52: recompose after every single drop (quadratic), as the reference."""
    dropped = []
    while True:
        system, demo_messages, tokens = compose(sections, demos)
        if tokens["total"] <= budget:
            return system, demo_messages, tokens, demos, dropped
        if demos:
            dropped.append(f"demo {demos[-1].id}")
            demos = demos[:-1]
            continue
        optional = [s for s in sections if s.role.value in ("other", "context")]
        if not optional:
            raise RenderError(Problem(f"needs about {tokens['total']:,} prompt tokens",
                                      field="portability.minimum_context_window"))
        dropped.append(f"section {optional[-1].title or optional[-1].key!r}")
        sections = tuple(s for s in sections if s is not optional[-1])


def test_trimming_in_one_pass_drops_exactly_what_one_at_a_time_did(monkeypatch):
    import importlib

    module = importlib.import_module("rosetta.render.renderer")
    rng = random.Random(52)
    roles = ["role", "context", "constraints", "format", "other"]
    cases = []
    for _ in range(150):
        sections = tuple(Section(key=f"s{i}", title=rng.choice(["", f"Part {i}", "Context", "Role"]),
                                 role=rng.choice(roles), content=("word " * rng.randint(0, 60)).strip(), line=i + 1)
                         for i in range(rng.randint(1, 15)))
        demos = tuple(Demo(id=f"d{i}", inputs={"request": "x" * rng.randint(1, 300)}, output="y" * rng.randint(1, 300))
                      for i in range(rng.randint(0, 5)))
        budget = {"default": GenerationParams(max_input_tokens=rng.randint(20, 1500))}
        cases.append((Signature(name="t", instructions=sections, demos=demos, demo_range=(0, 5) if demos else (0, 0),
                                generation_params=budget), rng.choice(list(MODELS.values()))))

    def outcomes() -> list:
        found = []
        for case, model in cases:
            try:
                prompt = render(case, model)
                found.append((prompt.system, prompt.dropped, prompt.tokens, prompt.demos))
            except RenderError:
                found.append("refused")
        return found

    fast = outcomes()
    monkeypatch.setattr(module, "_fit_budget", _one_at_a_time)
    reference = outcomes()
    assert fast == reference
    assert sum(1 for f in fast if f != "refused" and f[1]) > 30  # many cases trimmed something


def test_cli_render_errors_name_the_file_and_line(write, project, cli):
    schema = "\n".join(f"      L{i}: {{type: object, properties: {{a: {{$ref: '#/$defs/L{i + 1}'}}, "
                       f"b: {{$ref: '#/$defs/L{i + 1}'}}}}}}" for i in range(40))
    path = write("bomb.md", "---\nname: bomb\noutput:\n  schema:\n    type: object\n    properties:\n"
                 "      root: {$ref: '#/$defs/L0'}\n    $defs:\n" + schema + "\n      L40: {type: string}\n---\n"
                 "## Role\nYou answer.\n", dedent=False)
    result = cli("-C", project, "render", path, "--model", "sonnet")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"{path}:4:3: output.schema: output schema keyword '$ref'" in result.output
