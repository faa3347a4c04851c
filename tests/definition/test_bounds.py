"""Definitions are bounded (issue 52): each input that used to raise a traceback or take minutes is
now a located error or a result in linear time."""

from __future__ import annotations

import time

import pytest

from rosetta.definition import load_definition
from rosetta.definition.patterns import (
    MAX_GROUP_DEPTH,
    PatternError,
    PatternTimeout,
    compile_pattern,
    group_depth,
    search,
)
from rosetta.errors import DefinitionError
from rosetta.signature import lower

RULE = """\
---
name: guarded
inputs:
  code: {{type: string}}
guardrails:
  input_validation:
    - code_format: "{pattern}"
---
## Role
You check codes.
"""


def test_group_depth_skips_escapes_and_character_classes():
    assert group_depth(r"(a(b)c)") == 2
    assert group_depth(r"\((a)\)") == 1
    assert group_depth(r"[(][()]x(y)") == 1
    assert group_depth(r"[]()](z)") == 1  # a ']' first in a class is a literal
    assert group_depth("(" * 70 + ")" * 70) == 70


@pytest.mark.parametrize("depth", [MAX_GROUP_DEPTH + 1, 200, 4000])
def test_an_input_rule_nested_too_deeply_is_a_located_load_error(write, depth):
    path = write("guarded.md", RULE.format(pattern="(" * depth + "a" + ")" * depth), dedent=False)
    with pytest.raises(DefinitionError) as caught:
        load_definition(path)
    (problem,) = caught.value.problems
    assert (problem.location.line, problem.field) == (7, "guardrails.input_validation[0]")
    assert f"nests groups {depth} deep; the limit is {MAX_GROUP_DEPTH}" in problem.message
    assert len(problem.message) < 300  # the expression is shown cut short


@pytest.mark.parametrize(("pattern", "says"), [
    ("a{99999999999}", "repeats something at least 99,999,999,999 times"),
    ("x{0,99999999999}", "not a valid regular expression"),
    ("(?", "not a valid regular expression"),
    ("x" * 10_001, "characters long; the limit is 10,000"),
])
def test_an_unusable_input_rule_is_a_located_load_error(write, pattern, says):
    path = write("guarded.md", RULE.format(pattern=pattern), dedent=False)
    with pytest.raises(DefinitionError, match=says) as caught:
        load_definition(path)
    assert caught.value.problems[0].location.line == 7


def test_a_backtracking_search_stops_at_its_timeout():
    # `regex` cuts short some backtracking that `re` does not (^(a+)+$ on "aaa…!"), not this
    compile_pattern(r"^(a|aa)+$")  # compiled once, outside the measurement
    start = time.perf_counter()
    with pytest.raises(PatternTimeout) as caught:
        search(r"^(a|aa)+$", "a" * 60 + "!", timeout=0.1)
    assert time.perf_counter() - start < 5.0  # the check is periodic, and a busy machine stretches it
    assert caught.value.pattern == r"^(a|aa)+$" and caught.value.seconds == 0.1
    assert search(r"^(a|aa)+$", "a" * 60) and not search(r"^(a|aa)+$", "b")
    with pytest.raises(PatternError):
        compile_pattern("(" * (MAX_GROUP_DEPTH + 1))


def test_searches_among_busy_threads_are_not_refused_for_waiting_on_the_gil():
    # CI's 500 concurrent calls refused a 100-character input: `regex` let the GIL go during the
    # search and counted the wait to take it back (behind dozens of threads) against its 0.25 s
    import threading

    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    threads = [threading.Thread(target=spin, daemon=True) for _ in range(50)]
    for thread in threads:
        thread.start()
    try:
        text = "[call 5] SQL injection in the login form lets an unauthenticated attacker bypass authentication."
        assert all(search(r"\S[\s\S]{39,}", text) for _ in range(100))
        with pytest.raises(PatternTimeout):  # a backtracking search is still cut short among them
            search(r"^(a|aa)+$", "a" * 60 + "!")
    finally:
        stop.set()
        for thread in threads:
            thread.join()


REFERENCE = """\
---
name: shots
portability:
  few_shot:
    enabled: true
    examples_ref: {reference}
---
## Role
You answer.
"""


@pytest.mark.parametrize(("reference", "says"), [
    ('"ex\\0amples.jsonl"', "with a NUL character"),
    ("x" * 5000, "5,000 characters"),
    ("x" * 300, "cannot use path"),  # a file name longer than the file system allows
    ("../../etc/passwd", "outside the project root"),
    ("/etc/passwd", "absolute path"),
])
def test_an_unusable_examples_ref_is_a_located_load_error(write, reference, says):
    path = write("shots.md", REFERENCE.format(reference=reference), dedent=False)
    with pytest.raises(DefinitionError, match=says) as caught:
        load_definition(path)
    (problem,) = caught.value.problems
    assert (problem.location.line, problem.field) == (6, "portability.few_shot.examples_ref")


def test_an_examples_ref_through_a_symlink_out_of_the_project_is_refused(write, project):
    (project / "escape.jsonl").symlink_to("/etc/hostname")
    path = write("shots.md", REFERENCE.format(reference="escape.jsonl"), dedent=False)
    with pytest.raises(DefinitionError, match="outside the project root"):
        load_definition(path)


@pytest.mark.parametrize(("content", "line", "says"), [
    (b'{"inputs": {"request": "ok"}, "output": 1}\n{"inputs": {"request": "\xff"}, "output": 1}\n', 2,
     "not valid UTF-8"),
    (b'{"inputs": {"request": "x"}, "output": ' + b"[" * 5000 + b"]" * 5000 + b"}\n", 1, "more than 64 levels"),
    (b'{"inputs": {"request": "x"}, "output": ' + b"[" * 70 + b"]" * 70 + b"}\n", 1, "more than 64 levels"),
    (b"\n\n\x00\n", 3, "NUL character"),
])
def test_unreadable_examples_are_located_errors(write, content, line, says):
    write("examples.jsonl", content)
    definition = load_definition(write("shots.md", REFERENCE.format(reference="examples.jsonl"), dedent=False))
    with pytest.raises(DefinitionError, match=says) as caught:
        lower(definition)
    (problem,) = caught.value.problems
    assert problem.location.file.endswith("examples.jsonl") and problem.location.line == line


def test_dates_in_json_schemas_load_as_text(write):
    path = write("dated.md", """\
        ---
        name: dated
        output:
          schema:
            type: object
            properties:
              since: {type: string, default: 2024-01-01}
        tools:
          - name: lookup
            parameters: {type: object, properties: {day: {type: string, examples: [2024-02-29]}}}
        ---
        ## Role
        You date things.
        """)
    spec = load_definition(path).spec
    assert spec.output.schema_["properties"]["since"]["default"] == "2024-01-01"
    assert spec.tools[0].parameters["properties"]["day"]["examples"] == ["2024-02-29"]


@pytest.mark.parametrize("body", [
    "".join(f"<part_{i}>text {i}</part_{i}>\n" for i in range(32000)),  # was 17 s: a line count per element
    "\n" * 600_000 + "Text.",  # was 30 s: blank lines trimmed one list.pop(0) at a time
])
def test_large_bodies_split_in_linear_time(write, body):
    path = write("big.md", "---\nname: big\n---\n" + body, dedent=False)
    start = time.perf_counter()
    definition = load_definition(path)
    assert time.perf_counter() - start < 8.0  # ~1 s on two idle cores
    assert definition.sections[-1].content.endswith(("text 31999", "Text."))


def test_a_fifo_among_the_definitions_or_as_their_examples_is_refused_not_waited_on(tmp_path):
    """Issue 52: sources are the user's files, symlinks followed, but a FIFO is never opened to wait."""
    import os
    import signal

    fifo = tmp_path / "agent.md"
    os.mkfifo(fifo)
    previous = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("blocked on a FIFO")))
    signal.alarm(10)
    try:
        with pytest.raises(DefinitionError, match="FIFO"):
            load_definition(fifo)
        examples = tmp_path / "x.examples.jsonl"
        os.mkfifo(examples)
        (tmp_path / "x.md").write_text(
            "---\nname: x\nportability:\n  few_shot:\n    enabled: true\n    examples_ref: x.examples.jsonl\n---\n"
            "## Role\nYou sort.\n", encoding="utf-8")
        definition = load_definition(tmp_path / "x.md")  # not a file: passed over at once, never opened
        assert [m.reference for m in definition.source.missing_references] == ["x.examples.jsonl"]
        assert lower(definition).demos == ()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
