"""A seeded mutator of agent definitions, shared by ``tests/definition/test_fuzz.py`` and
``bench/fuzz_definitions.py``.

Every case starts from a real definition (``signatures/``, ``tests/fixtures/corpus*``) with its
sidecar, prompt and examples files, gets one to three mutations (of its YAML structure, field
types, sizes and depths, regular expressions, ``$ref`` graphs, sections, bytes and file references)
and is written to its own folder of a throwaway project. :func:`run_case` then does what a user's
tools do with it, in-process: load, lint, lower, and render for one model of each adapter.
The same seed gives the same cases, byte for byte.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
SEED_DIRS = (REPO / "signatures", REPO / "tests" / "fixtures" / "corpus", REPO / "tests" / "fixtures" / "corpus-broken")
MODELS = {"anthropic": "sonnet", "openai": "openai/gpt-4o", "gemini": "gemini/2.5-pro", "open": "ollama/llama3.1"}
"""One model per adapter (anthropic, openai, google, open-source), as the golden prompts use."""
STAGES = ("load", "lint", "lower", "types", *(f"render:{name}" for name in MODELS))

HOSTILE_REGEXES = (
    r"^(a+)+$", r"(a*)*b", r"(a|a)*c", r"(.*a)*!", r"^(\w+\s?)+$", r"(x|y|xy)*z", r"^([a-z0-9.]{1,64}\.)+$",
    r"(((((((((((a)))))))))))", "(" * 200 + "a" + ")" * 200, "(" * 5000 + ")" * 5000, "(?:" * 300 + "x" + ")" * 300,
    r"(?", r"[a-", r"a{99999999999}", r"a{2,1}", r"(?P<n>a)(?P=m)", r"\p{L}+", r"(?<=a+)b", "x" * 20000, r"\\",
    r"(?i)(?s)(?m).*", r"[" + "a-z" * 2000 + "]", r"(a{1,30}){1,30}$", "",
)
"""Expressions that backtrack, nest deeply, do not compile, or are merely odd."""
PATH_ATTACKS = (
    "../../etc/passwd", "../../../../../../../../etc/hostname", "/etc/passwd", "~/.ssh/id_rsa", "C:\\Windows\\win.ini",
    "\\\\server\\share\\x", "x" * 5000, "a/" * 2000 + "b", "ex\x00amples.jsonl", "", "   ", ".", "..", "/dev/zero",
    "/proc/self/environ", "escape-link.jsonl", "a-folder", "missing.jsonl", "examples.jsonl",
)
"""File references that leave the project, name nothing usable, or are fine (the last)."""


@dataclass
class Case:
    """One generated definition: where it was written and what was done to it."""

    number: int
    seed: str
    mutations: list[str]
    path: Path


@dataclass
class _Document:
    """The parts of a definition a mutation may change, written out by :meth:`write`."""

    meta_name: str  # the file holding the metadata (the .md itself, or the .agent.yaml)
    body_name: str | None  # the .prompt.md of a pair, None when the body follows the frontmatter
    yaml_text: str
    data: Any  # the parsed metadata, None when the seed's YAML does not parse
    body: str
    files: dict[str, bytes]  # every other file of the case, by name relative to its folder
    dirty: bool = False  # data changed: dump it instead of yaml_text
    byte_edits: list[Callable[[bytes], bytes]] = field(default_factory=list)
    links: dict[str, str] = field(default_factory=dict)  # symlinks to create: name -> target
    folders: list[str] = field(default_factory=list)

    def mapping(self) -> dict:
        """The metadata as a mapping to edit (a fresh one when the seed's is unusable)."""
        if not isinstance(self.data, dict):
            self.data = {"name": "fuzzed"}
        self.dirty = True
        return self.data

    def write(self, folder: Path) -> Path:
        folder.mkdir(parents=True)
        for name in self.folders:
            (folder / name).mkdir(exist_ok=True)
        for name, content in self.files.items():
            (folder / name).write_bytes(content)
        for name, target in self.links.items():
            os.symlink(target, folder / name)
        text = _dump(self.data) if self.dirty else self.yaml_text
        if self.body_name is None:
            main = ("---\n" + text + ("" if text.endswith("\n") else "\n") + "---\n" + self.body).encode()
        else:
            main = text.encode()
            (folder / self.body_name).write_bytes(self.body.encode())
        for edit in self.byte_edits:
            main = edit(main)
        (folder / self.meta_name).write_bytes(main)
        return folder / self.meta_name


def _dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_DUMPER, sort_keys=False, allow_unicode=True, width=1 << 30)


_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# -- seeds -----------------------------------------------------------------------------------


def seed_files() -> list[Path]:
    """Every definition to start from: markdown agents and ``.agent.yaml`` pairs, in a stable order."""
    found = []
    for directory in SEED_DIRS:
        for path in sorted(directory.rglob("*")):
            name = path.name
            if name.endswith(".agent.yaml") or (name.endswith(".md") and not name.endswith(".prompt.md")
                                                and name != "README.md"):
                found.append(path)
    return found


@functools.cache
def _parsed_seed(path: Path) -> _Document:
    stem = path.name.split(".")[0]
    files = {p.name: p.read_bytes() for p in sorted(path.parent.iterdir())
             if p.is_file() and p.name.startswith(stem + ".") and p != path}
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.name.endswith(".agent.yaml"):
        body_name = stem + ".prompt.md"
        body = files.pop(body_name, b"").decode("utf-8", errors="replace")
        yaml_text = text
    else:
        body_name = None
        lines = text.split("\n")
        close = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
        if lines[0].rstrip() == "---" and close is not None:
            yaml_text, body = "\n".join(lines[1:close]) + "\n", "\n".join(lines[close + 1:])
        else:
            yaml_text, body = "", text
    try:
        data = yaml.load(yaml_text, Loader=_LOADER)
    except yaml.YAMLError:
        data = None
    return _Document(path.name, body_name, yaml_text, data, body, files)


def _load_seed(path: Path) -> _Document:
    """A fresh, editable copy of the seed at ``path`` (each is read and parsed once)."""
    return copy.deepcopy(_parsed_seed(path))


# -- hostile values --------------------------------------------------------------------------


def _deep(rng: random.Random, depth: int) -> Any:
    value: Any = rng.choice(["x", 1, None])
    for _ in range(depth):
        value = [value] if rng.random() < 0.5 else {"k": value}
    return value


def _hostile_value(rng: random.Random) -> Any:
    choice = rng.randrange(16)
    return [
        None, True, 0, -(10 ** 30), 1.5, float("inf"), "", "x" * rng.choice((200, 5000, 60000)),
        [], {}, _deep(rng, rng.choice((5, 30, 60, 90))), date(2024, 1, 1), "\x00\u202e\U0001F600\u0301",
        {"type": "object", "properties": []}, ["a", 5, None, [1]], {"nested": {"deeper": {"$ref": "#/$defs/x"}}},
    ][choice]


def _paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every path into a nest of dicts and lists, parents first."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _set(data: Any, path: tuple, value: Any) -> None:
    for part in path[:-1]:
        data = data[part]
    data[path[-1]] = value


def _ensure(data: dict, *path: str) -> dict:
    """The mapping at ``path`` inside ``data``, created (or replaced when not a mapping) on the way."""
    for part in path:
        if not isinstance(data.get(part), dict):
            data[part] = {}
        data = data[part]
    return data


# -- mutations: each edits the document and returns a label --------------------------------


def set_random_value(rng: random.Random, doc: _Document) -> str:
    data = doc.mapping()
    path = rng.choice([p for p in _paths(data) if p])
    value = _hostile_value(rng)
    _set(data, path, value)
    return f"value {'.'.join(map(str, path))[:60]} = {type(value).__name__}"


def delete_field(rng: random.Random, doc: _Document) -> str:
    data = doc.mapping()
    path = rng.choice([p for p in _paths(data) if p])
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    del parent[path[-1]]
    return f"delete {'.'.join(map(str, path))[:60]}"


WRONG_TYPES: tuple[tuple[tuple[str, ...], Any], ...] = (
    (("name",), 5), (("name",), "bad name/../x"), (("tools",), "Read, Write"), (("tools",), [5, None]),
    (("tools",), [{"name": "t", "parameters": []}]), (("tools",), [{"name": "t", "parameters": {"properties": 5}}]),
    (("output",), []), (("output", "schema"), "text"), (("output", "schema"), [1, 2]), (("output", "schema"), True),
    (("output", "schema"), {"type": 5}), (("output", "schema"), {"type": "object", "properties": []}),
    (("output", "schema"), {"type": "object", "properties": {"a": 5}, "required": "a"}),
    (("output", "schema"), {"type": "object", "properties": {"a": {"type": "string"}}, "required": [["a"]]}),
    (("output", "schema"), {"anyOf": {}}), (("output", "schema"), {"type": "object", "enum": 3}),
    (("output", "schema"), {"type": "object", "properties": {"a": {"anyOf": 5}}}),
    (("output", "schema"), {"type": "object", "properties": {"a": {"type": "string", "enum": 7}}}),
    (("output", "schema"), {"type": ["object", 5, None]}), (("output", "schema"), {"items": [], "type": "array"}),
    (("output", "schema"), {"type": "object", "properties": {"d": {"default": date(2024, 1, 1)}}}),
    (("output", "schema"), {"$defs": [], "$ref": "#/$defs/a"}), (("output", "schema"), {"$ref": 5}),
    (("output", "schema"), {"$defs": {"a": "x"}, "type": "object", "properties": {"p": {"$ref": "#/$defs/a"}}}),
    (("output", "schema"), {"type": "object", "properties": {"p": {"$ref": "#/$defs/missing"}}}),
    (("output", "schema"), {"type": "object", "properties": {"p": {"type": "string", "pattern": 5}}}),
    (("output", "schema"), {"type": "object", "properties": {"p": {"type": "string", "minLength": "x"}}}),
    (("output", "schema"), {"type": "object", "allOf": [{"type": "string"}, {"type": "integer"}]}),
    (("output", "schema"), {"type": "object", "additionalProperties": {"type": "string"}}),
    (("output", "required"), "yes"), (("output", "levels"), "L0"), (("portability",), "yes"),
    (("portability", "few_shot"), {"enabled": True, "count_range": {"min": 5, "max": 1}}),
    (("portability", "few_shot"), {"enabled": True, "count_range": {"min": 10 ** 9, "max": 10 ** 10}}),
    (("portability", "minimum_context_window"), 10 ** 12), (("portability", "minimum_context_window"), -5),
    (("portability", "section_roles"), {"": "role", "x" * 300: "constraints"}),
    (("portability", "model_preferences"), ["", "x" * 3000, "a/b/c", 5]), (("model",), "\x00"),
    (("inputs",), {"bad name": {}}), (("inputs",), {"x": 5}), (("inputs",), ["request"]),
    (("inputs",), {f"in_{i}": {"type": "string"} for i in range(300)}),
    (("guardrails", "input_validation"), "x"), (("guardrails", "input_validation"), [5, None, []]),
    (("guardrails", "input_validation"), [{"pattern": 5}, {"reject": ["a"]}]),
    (("guardrails", "output_filtering"), [{"no": "secrets"}]), (("capabilities", "required_features"), "vision"),
    (("generation_params",), {"default": {"max_input_tokens": 1}}), (("generation_params",), {"default": 5}),
    (("generation_params",), {"default": {"max_output_tokens": 10 ** 9, "stop": ["\x00"] * 100}}),
    (("evaluation",), {"rubric": [{"criterion": ""}], "fields": {"a": "heavy"}}),
    (("identity",), "Analyst"), (("identity", "expertise"), "everything"), (("version",), [1, 0]),
)
"""Known fields given a value of the wrong type or shape."""


def wrong_type(rng: random.Random, doc: _Document) -> str:
    path, value = rng.choice(WRONG_TYPES)
    data = doc.mapping()
    parent = _ensure(data, *path[:-1])
    parent[path[-1]] = value
    return f"wrong {'.'.join(path)}"


def hostile_regex(rng: random.Random, doc: _Document) -> str:
    data = doc.mapping()
    expression = rng.choice(HOSTILE_REGEXES)
    where = rng.randrange(4)
    if where == 0:
        _ensure(data, "guardrails")["input_validation"] = [{"request_format": expression}]
        data.pop("inputs", None)
    elif where == 1:
        rule = {"field": "topic", rng.choice(("pattern", "reject")): expression}
        _ensure(data, "guardrails")["input_validation"] = [rule]
        data["inputs"] = {"topic": {"type": "string"}}
    elif where == 2:
        code = {"type": "string", "pattern": expression}
        _ensure(data, "output")["schema"] = {"type": "object", "properties": {"code": code}, "required": ["code"]}
    else:
        _ensure(data, "output")["schema"] = {"type": "object", "patternProperties": {expression: {"type": "string"}}}
    place = ("input rule", "field rule", "schema pattern", "patternProperties")[where]
    return f"regex #{HOSTILE_REGEXES.index(expression)} in {place}"


def ref_bomb(rng: random.Random, doc: _Document) -> str:
    kind = rng.randrange(5)
    if kind == 0:  # each level refers to the next twice: 2**levels copies once inlined
        levels = rng.choice((8, 20, 40))
        defs = {f"L{i}": {"type": "object", "properties": {"a": {"$ref": f"#/$defs/L{i + 1}"},
                                                           "b": {"$ref": f"#/$defs/L{i + 1}"}}} for i in range(levels)}
        defs[f"L{levels}"] = {"type": "string"}
        label = f"$ref doubling x{levels}"
    elif kind == 1:  # a long chain of references
        levels = rng.choice((50, 500, 3000))
        defs = {f"L{i}": {"$ref": f"#/$defs/L{i + 1}"} for i in range(levels)}
        defs[f"L{levels}"] = {"type": "object", "properties": {"x": {"type": "string"}}}
        label = f"$ref chain x{levels}"
    elif kind == 2:  # a chain that nests one level per reference
        levels = rng.choice((30, 100))
        defs = {f"L{i}": {"type": "object", "properties": {"n": {"$ref": f"#/$defs/L{i + 1}"}}} for i in range(levels)}
        defs[f"L{levels}"] = {"type": "string"}
        label = f"$ref nesting x{levels}"
    elif kind == 3:
        defs = {"A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
                "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}}
        label = "$ref cycle"
    else:
        defs = {f"L{i}": {"anyOf": [{"$ref": f"#/$defs/L{i + 1}"}, {"$ref": f"#/$defs/L{i + 1}"}]} for i in range(30)}
        defs["L30"] = {"type": "integer"}
        label = "$ref doubling anyOf x30"
    schema = {"type": "object", "properties": {"root": {"$ref": "#/$defs/L0" if "L0" in defs else "#/$defs/A"}},
              "required": ["root"], "$defs": defs}
    data = doc.mapping()
    if rng.random() < 0.7:
        _ensure(data, "output")["schema"] = schema
    else:
        data["tools"] = [{"name": "lookup", "description": "Looks up.", "parameters": schema}]
        label += " in tool parameters"
    return label


def many_sections(rng: random.Random, doc: _Document) -> str:
    count = rng.choice((2000, 8000, 32000)) if rng.random() < 0.1 else rng.choice((50, 300))
    style = rng.randrange(4)
    if style == 0:
        doc.body = "".join(f"## Section {i}\nLine {i} of context.\n" for i in range(count))
    elif style == 1:
        doc.body = "".join(f"# S{i}\n" for i in range(count))  # one-line sections
    elif style == 2:
        doc.body = "".join(f"<part_{i}>text {i}</part_{i}>\n" for i in range(count))
    else:
        labels = ("ROLE", "CONTEXT", "CONSTRAINTS", "FORMAT")
        doc.body = "".join(f"{labels[i % 4]}: line {i}\n" for i in range(count))
    return f"{count} sections ({('markdown', 'headings only', 'xml', 'rccf')[style]})"


def big_body(rng: random.Random, doc: _Document) -> str:
    kind = rng.randrange(4)
    large = rng.random() < 0.1  # megabyte bodies are the slowest cases: kept rare
    if kind == 0:
        doc.body = "word " * (200000 if large else 20000)
    elif kind == 1:
        doc.body = "\n" * (300000 if large else 10000) + "Text."
    elif kind == 2:
        doc.body = "<agent>" * 3000 + "x" + "</agent>" * 3000
    else:
        doc.body = "```\n" * 5001 + "## Role\nYou " + "think step by step " * 2000
    return f"big body #{kind}"


def bad_bytes(rng: random.Random, doc: _Document) -> str:
    kind = rng.randrange(6)

    def edit(data: bytes) -> bytes:
        cut = rng.randrange(len(data) + 1)
        return [
            data[:cut] + b"\xff\xfe\xc3" + data[cut:],
            data[:cut] + b"\x00" + data[cut:],
            b"\xff\xfe" + data,  # a UTF-16 mark on UTF-8 text
            data.decode("utf-8", "replace").encode("latin-1", "replace"),
            b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n"),
            data[:cut],
        ][kind]

    doc.byte_edits.append(edit)
    return f"bytes #{kind}"


def file_reference(rng: random.Random, doc: _Document) -> str:
    reference = rng.choice(PATH_ATTACKS)
    data = doc.mapping()
    if rng.random() < 0.6:
        few_shot = _ensure(data, "portability", "few_shot")
        few_shot.update(enabled=True, examples_ref=reference)
        where = "examples_ref"
    else:
        _ensure(data, "output")["template"] = reference
        where = "output.template"
    if reference == "escape-link.jsonl":
        doc.links[reference] = "/etc/hostname"
    elif reference == "a-folder":
        doc.folders.append(reference)
    elif reference == "examples.jsonl":
        doc.files[reference] = _examples_content(rng)
    return f"{where} = {reference[:40]!r}"


def _examples_content(rng: random.Random) -> bytes:
    kind = rng.randrange(8)
    good = b'{"id": "a", "inputs": {"request": "x"}, "output": {"label": "a"}}\n'
    return [
        good * 3,
        b'{"inputs": {"request": "\xff\xfe"}, "output": 1}\n',
        b'{"inputs": {"request": "x"}, "output": ' + b"[" * 5000 + b"]" * 5000 + b"}\n",
        b'{"inputs": {"request": "x"}, "output": ' + b"[" * 100 + b"]" * 100 + b"}\n",
        b"[1, 2]\nnull\n",
        b'{"inputs": {"nope": 1}, "output": 1}\n',
        b"\x00" * 100,
        good + b'{"inputs": {"request": "' + b"y" * 500000 + b'"}, "output": "z"}\n',
    ][kind]


HOSTILE_YAML = (
    "name: deep\nx: " + "[" * 3000 + "]" * 3000 + "\n",
    "name: deep\nx: " + "{a: " * 200 + "1" + "}" * 200 + "\n",
    "name: bomb\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
    "name: tagged\nx: !!python/object/apply:os.system ['true']\n",
    "name: dup\nname: dup\n",
    "name: tabs\nidentity:\n\trole: x\n",
    "name: docs\n---\nname: two\n",
    "name: many\n" + "".join(f"k{i}: {i}\n" for i in range(20000)),
    "name: big\nx: '" + "y" * 1_200_000 + "'\n",
    "name: &a x\nself: &s [*s]\n",
    "[1, 2, 3]\n",
    "'just text'\n",
    "name: ok\n<<: {identity: {role: merged}}\n",
    "name: key\n? [a, b]\n: c\n",
    "name: \"\\ud800\"\n",
    "name: ok\nversion: 2024-01-01\ndescription: !!binary aGVsbG8=\n",
)
"""YAML text that nests, expands, tags, repeats or mis-indents."""


def hostile_yaml(rng: random.Random, doc: _Document) -> str:
    index = rng.randrange(len(HOSTILE_YAML))
    doc.yaml_text, doc.data, doc.dirty = HOSTILE_YAML[index], None, False
    return f"yaml #{index}"


def edit_lines(rng: random.Random, doc: _Document) -> str:
    kind = rng.randrange(4)

    def edit(data: bytes) -> bytes:
        lines = data.split(b"\n")
        at = rng.randrange(len(lines))
        if kind == 0:
            del lines[at]
        elif kind == 1:
            lines.insert(at, lines[rng.randrange(len(lines))])
        elif kind == 2:
            other = rng.randrange(len(lines))
            lines[at], lines[other] = lines[other], lines[at]
        else:
            lines[at] = lines[at][: rng.randrange(len(lines[at]) + 1)] + b": ["
        return b"\n".join(lines)

    doc.byte_edits.append(edit)
    return f"lines #{kind}"


def many_tools(rng: random.Random, doc: _Document) -> str:
    count = rng.choice((1, 50, 500))
    parameters = rng.choice((
        {"type": "object", "properties": {"q": {"type": "string", "pattern": r"^(a+)+$"}},
         "required": ["q", "missing"]},
        {"type": "object", "properties": {"q": {"type": ["string", "null", "integer"]}}, "oneOf": [{}]},
        {"type": "string"},
        {"properties": {"deep": _deep(rng, 40)}},
    ))
    description = "d" * rng.choice((1, 3000))
    doc.mapping()["tools"] = [{"name": f"tool_{i}", "description": description, "parameters": parameters}
                              for i in range(count)]
    return f"{count} tools"


def budget(rng: random.Random, doc: _Document) -> str:
    data = doc.mapping()
    tokens = rng.choice((1, 50, 400, 2000))
    data["generation_params"] = {"default": {"max_input_tokens": tokens}}
    if rng.random() < 0.5:
        doc.body = "".join(f"## Context {i}\n{'detail ' * 40}\n" for i in range(rng.choice((10, 300))))
    return f"max_input_tokens {tokens}"


def sidecar(rng: random.Random, doc: _Document) -> str:
    name = doc.meta_name.split(".")[0] + ".governance.yaml"
    doc.files[name] = rng.choice((
        b"identity: {role: [1, 2]}\n", b"name: other-name\n",
        b"guardrails:\n  input_validation:\n    - x: '^(a|a)*$'\n",
        b"\xff\xfe\x00\x00", b"- a list\n", b"x: " + b"[" * 2000 + b"]" * 2000 + b"\n", b"",
    ))
    return f"sidecar {name}"


ODD_SCHEMAS: tuple[dict, ...] = (
    {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(2000)}},
    {"type": "object", "properties": {"": {}, "$ref": {"type": "string"}, "ü\u202e": {"type": ["string", "null"]},
                                      "a.b/c~d": {"const": "x"}}, "required": ["", "$ref"]},
    {"type": "object", "properties": {"e": {"enum": [f"v{i}" for i in range(10000)]}}},
    {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}}, {"type": "null"}]},
    {"type": "object", "properties": {"x": {"not": {"type": "string"}, "if": {"minimum": 1}, "then": {}, "else": {}}}},
    {"type": "object", "properties": {"t": {"type": "array", "prefixItems": [{"type": "string"}], "items": False}}},
    {"type": "object", "properties": {"n": {"anyOf": [{"anyOf": [{"anyOf": [{"type": "string"}]}]}]}}},
    {"type": "object", "additionalProperties": True, "properties": {"a": {"type": "object"}}, "minProperties": 1},
    {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string", "format": "date"}}}},
    {"type": "object", "properties": {"a": {"type": "string", "pattern": "^[a-z]{1,64}(-[a-z]{1,64})*$"}},
     "allOf": [{"required": ["a"]}]},
    {"$defs": {"P": {"type": "object", "properties": {"next": {"$ref": "#/$defs/P"}}}}, "$ref": "#/$defs/P"},
    {"type": "object", "properties": {"d": {"$ref": "#/definitions/D"}}, "definitions": {"D": {"type": "integer"}}},
)
"""Schemas that are valid but unusual: huge, oddly named, recursive, combined, constrained."""


def odd_schema(rng: random.Random, doc: _Document) -> str:
    index = rng.randrange(len(ODD_SCHEMAS))
    schema = copy.deepcopy(ODD_SCHEMAS[index])
    data = doc.mapping()
    if rng.random() < 0.75:
        _ensure(data, "output")["schema"] = schema
    else:
        data["tools"] = [{"name": "odd", "description": "Odd parameters.", "parameters": schema}]
    return f"odd schema #{index}"


def demos(rng: random.Random, doc: _Document) -> str:
    count, size = rng.choice((1, 5, 60)), rng.choice((10, 2000, 40000))
    rows = [json.dumps({"id": f"d{i}", "inputs": {"request": f"question {i} " + "x" * rng.randrange(size)},
                        "output": {"label": "a" * rng.randrange(size)}}) for i in range(count)]
    doc.files["demos.jsonl"] = ("\n".join(rows) + "\n").encode()
    data = doc.mapping()
    data.pop("inputs", None)
    _ensure(data, "portability", "few_shot").update(enabled=True, examples_ref="demos.jsonl",
                                                   count_range={"min": 0, "max": count})
    if rng.random() < 0.5:
        data["generation_params"] = {"default": {"max_input_tokens": rng.choice((300, 3000, 30000))}}
    return f"{count} demos of up to {size} characters"


MUTATIONS: tuple[Callable[[random.Random, _Document], str], ...] = (
    set_random_value, set_random_value, delete_field, wrong_type, wrong_type, wrong_type, hostile_regex, hostile_regex,
    ref_bomb, many_sections, big_body, bad_bytes, file_reference, file_reference, hostile_yaml, edit_lines, many_tools,
    budget, sidecar, odd_schema, odd_schema, demos,
)
"""Weighted by repetition: field values and types, regexes and file references come up most."""


def generate(root: Path, count: int, seed: int = 52) -> Iterator[Case]:
    """``count`` mutated definitions written under ``root`` (a folder with a pyproject.toml, the
    project root every reference must stay inside), the same for the same ``seed``."""
    rng = random.Random(seed)
    seeds = seed_files()
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text('[project]\nname = "fuzzed"\nversion = "0"\n')
    for number in range(count):
        source = seeds[number % len(seeds)]
        doc = _load_seed(source)
        labels = []
        for mutate in rng.sample(MUTATIONS, rng.choice((1, 1, 2, 3))):
            try:
                labels.append(mutate(rng, doc))
            except (IndexError, ValueError):  # nothing of that kind to mutate (e.g. an empty mapping)
                continue
        path = doc.write(root / f"case-{number:05d}" / source.parent.name)
        yield Case(number, str(source.relative_to(REPO)), labels, path)


# -- running ---------------------------------------------------------------------------------


def run_case(case: Case) -> list[tuple[str, float]]:
    """Load, lint, lower, type the output (``Signature.output_model``) and render ``case`` for every
    model in :data:`MODELS`, stopping at a refusal (a :class:`~rosetta.errors.RosettaError`) where a
    later stage has nothing to work on.
    Returns (stage, seconds) per stage run; any other exception propagates."""
    from rosetta.definition.loader import load_definition
    from rosetta.errors import RosettaError
    from rosetta.lint.engine import lint_definition
    from rosetta.render.renderer import render
    from rosetta.signature import lower

    timings: list[tuple[str, float]] = []

    def stage(name: str, work: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        try:
            return work()
        except RosettaError:
            return None
        finally:
            timings.append((name, time.perf_counter() - start))

    definition = stage("load", lambda: load_definition(case.path))
    if definition is None:
        return timings
    stage("lint", lambda: lint_definition(definition))
    signature = stage("lower", lambda: lower(definition))
    if signature is None:
        return timings
    stage("types", lambda: signature.output_model)
    for name, model in MODELS.items():
        stage(f"render:{name}", lambda model=model: render(signature, model))
    return timings


CLI_EXIT_CODES = {0, 1, 2}
"""What `rosetta validate` and `rosetta render` may exit with (see rosetta.cli)."""


def run_cli(case: Case, root: Path, model: str, runner: Any, audit: Any = None) -> list[str]:
    """``case`` through `rosetta validate` and `rosetta render --model model` in-process (Typer's
    runner, project ``root``): what went wrong, one line per command that raised, printed a
    traceback or exited with another code than :data:`CLI_EXIT_CODES`."""
    import contextlib

    from rosetta.cli import app

    problems = []
    for args in (["validate", str(case.path)], ["render", str(case.path), "--model", model]):
        with audit if audit is not None else contextlib.nullcontext():
            result = runner.invoke(app, ["-C", str(root), *args])
        crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
        if crashed or "Traceback (most recent call last)" in result.output or result.exit_code not in CLI_EXIT_CODES:
            problems.append(f"rosetta {args[0]} exited {result.exit_code}: {result.exception!r} {result.output[-300:]}")
    return problems


class FileAudit:
    """Records every file opened while active (``sys.addaudithook``) outside the allowed folders:
    the project, and the interpreter's and rosetta's own files."""

    _hooked = False
    _active: FileAudit | None = None

    def __init__(self, project: Path) -> None:
        import rosetta

        roots = {project, Path(rosetta.__file__).parent, Path(sys.prefix), Path(sys.base_prefix),
                 Path(sys.exec_prefix), Path(yaml.__file__).parents[1]}
        self.allowed = tuple(sorted({str(Path(r).resolve()) + os.sep for r in roots}))
        self.outside: list[str] = []

    def __enter__(self) -> FileAudit:
        if not FileAudit._hooked:
            sys.addaudithook(FileAudit._hook)
            FileAudit._hooked = True
        FileAudit._active = self
        return self

    def __exit__(self, *exc: object) -> None:
        FileAudit._active = None

    @staticmethod
    def _hook(event: str, args: tuple) -> None:
        audit = FileAudit._active
        if audit is None or event != "open" or not isinstance(args[0], (str, bytes, os.PathLike)):
            return
        path = os.path.realpath(os.fsdecode(args[0]))
        if not (path + os.sep).startswith(audit.allowed) and path != os.devnull:
            audit.outside.append(path)


# -- the fuzz loop (the test's, run whole or in shards) ----------------------------------------

CASE_LIMIT_S = 5.0
"""Most CPU time one definition may take through load, lint, lower, typing and four renders (CPU, not
wall time: other processes on a busy machine do not count against it)."""
MEMORY_LIMIT_MB = 500
"""Most resident memory a process fuzzing definitions may reach (so no single case reaches more)."""
HANG_S = 60
"""A case still running after this long is stopped and reported as hung."""


class Hung(Exception):
    """Raised by the alarm in a case that runs past :data:`HANG_S`."""


def _alarm(signum: int, frame: object) -> None:
    raise Hung(f"still running after {HANG_S} s")


def fuzz(root: Path, count: int, seed: int, cli_every: int) -> tuple[list[str], FileAudit]:
    """Run ``count`` cases in-process, and every ``cli_every``-th through `validate` and `render`;
    return what went wrong, one line per failure, and the file audit."""
    import signal

    from typer.testing import CliRunner

    failures: list[str] = []
    runner = CliRunner()
    audit = FileAudit(root)
    models = list(MODELS.values())
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for case in generate(root, count, seed):
            what = f"case {case.number} of seed {seed} ({case.seed}; {'; '.join(case.mutations)})"
            start = time.process_time()
            signal.alarm(HANG_S)
            try:
                with audit:
                    run_case(case)
            except Exception as error:  # run_case lets every RosettaError through as a refusal
                failures.append(f"{what}: {type(error).__name__}: {str(error)[:300]}")
            finally:
                signal.alarm(0)
            elapsed = time.process_time() - start
            if elapsed > CASE_LIMIT_S:
                failures.append(f"{what}: took {elapsed:.1f} s of CPU")
            if case.number % cli_every:
                continue
            model = models[case.number // cli_every % len(models)]
            signal.alarm(2 * HANG_S)
            try:
                failures += [f"{what}: {problem}" for problem in run_cli(case, root, model, runner, audit)]
            finally:
                signal.alarm(0)
    finally:
        signal.signal(signal.SIGALRM, previous)
    return failures, audit


@dataclass(frozen=True)
class Shard:
    """What one process's share of a fuzz run found."""

    seed: int
    cases: int
    cli_runs: int  # rosetta commands run: `validate` and `render` for every ``cli_every``-th case
    failures: list[str]
    outside: list[str]  # files read outside the project
    peak_mb: float  # the process's peak resident memory


def fuzz_shard(root: Path, count: int, seed: int, cli_every: int) -> Shard:
    """:func:`fuzz` in a process of its own (the peak memory it reports is then this shard's alone)."""
    import tempfile

    tempfile.gettempdir()  # a fresh process probes the temp folder on first use: the audit is about definitions
    failures, audit = fuzz(root, count, seed, cli_every)
    return Shard(seed, count, 2 * len(range(0, count, cli_every)), failures, sorted(set(audit.outside)), peak_memory_mb())


def peak_memory_mb() -> float:
    """This process's peak resident memory in MB: Linux's ``VmHWM``, which starts afresh with each
    program (``ru_maxrss`` survives ``exec``, so a spawned worker would report its parent's peak)."""
    import resource

    try:
        status = Path("/proc/self/status").read_text()
        return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration, ValueError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux; an upper bound
