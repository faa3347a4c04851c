"""A corpus of agent definitions written the way teams write them in the wild
(``tests/fixtures/corpus``, see its README): every file loads, in all four formats; lint reports no
error and exactly the warnings that the files' ``expect:`` markers announce; every finding points
at the line that holds its field; and fields rosetta does not know survive loading. The files in
``tests/fixtures/corpus-broken`` must keep failing, at the line and column listed here."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import rosetta.lint.checks  # noqa: F401  (registers every rule in RULES)
from rosetta.definition import AgentDefinition, AgentFormat, AgentSpec, load_definition, load_many
from rosetta.definition.formats import CLAUDE_CODE_FIELDS
from rosetta.errors import DefinitionError
from rosetta.lint import RULES, Finding, Severity, lint_definition

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "fixtures" / "corpus"
BROKEN = REPO / "tests" / "fixtures" / "corpus-broken"

MINIMUM_PER_FORMAT = {
    AgentFormat.PORTABLE: 10, AgentFormat.CLAUDE_CODE: 10, AgentFormat.PAIR: 6, AgentFormat.LEGACY_XML: 6,
}

YAML_MARKER = re.compile(r"#\s*expect:\s*(.+?)\s*$")
BODY_MARKER = re.compile(r"<!--\s*expect:\s*(.+?)\s*-->\s*$")
RULE_ID = re.compile(r"^[A-Z]{2}-\d{3}$")

Key = tuple[str, int, str]  # (file relative to the corpus, line, rule id)


@cache
def _results() -> tuple:
    return tuple(load_many([CORPUS]))


def _definitions() -> list[AgentDefinition]:
    definitions = [r.definition for r in _results() if r.definition is not None]
    assert definitions, "no corpus definition loads (see test_corpus_loads_in_every_format)"
    return definitions


def _rel(file: str | Path) -> str:
    return Path(file).resolve().relative_to(CORPUS).as_posix()


@cache
def _lines(file: str) -> tuple[str, ...]:
    return tuple(Path(file).read_text(encoding="utf-8").split("\n"))


@cache
def _findings(definition_path: str) -> tuple[Finding, ...]:
    definition = next(d for d in _definitions() if d.source.path == definition_path)
    return tuple(lint_definition(definition))


def _markers(file: str) -> Iterator[tuple[int, str]]:
    """(line, rule id) of each marker: ``# expect: ...`` on YAML lines (a .yaml file, or the
    frontmatter of a .md file), ``<!-- expect: ... -->`` at the end of a markdown body line."""
    lines = _lines(file)
    yaml_lines: range = range(0)
    if file.endswith((".yaml", ".yml")):
        yaml_lines = range(len(lines))
    elif not file.endswith(".prompt.md") and lines[0].rstrip() == "---":
        end = next(i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "..."))
        yaml_lines = range(1, end)
    for index, line in enumerate(lines):
        match = (YAML_MARKER if index in yaml_lines else BODY_MARKER).search(line)
        if match:
            for rule_id in match.group(1).split(","):
                yield index + 1, rule_id.strip()


def _show(keys: set[Key], messages: dict[Key, str] | None = None) -> str:
    return "\n".join(f"  {file}:{line} {rule_id}" + (f"  {messages[file, line, rule_id]}" if messages else "")
                     for file, line, rule_id in sorted(keys))


def _field_path(field: str) -> tuple[str | int, ...]:
    """``tools[0].parameters`` → ``("tools", 0, "parameters")`` (the inverse of format_path)."""
    return tuple(int(index) if index else name for index, name in re.findall(r"\[(\d+)\]|([^.\[\]]+)", field))


# -- loading ---------------------------------------------------------------------------------


def test_corpus_loads_in_every_format():
    results = _results()
    failures = [f"{_rel(r.path)}:\n{r.error}" for r in results if r.error is not None]
    assert not failures, f"{len(failures)} of {len(results)} corpus files do not load:\n\n" + "\n\n".join(failures)
    counts = Counter(r.definition.source.format for r in results)
    assert len(results) >= 55, f"only {len(results)} definitions in the corpus"
    short = {fmt.value: (counts[fmt], least) for fmt, least in MINIMUM_PER_FORMAT.items() if counts[fmt] < least}
    assert not short, f"too few definitions per format (found, wanted): {short}"


def test_markers_name_known_rules():
    bad = [f"{_rel(file)}:{line} {rule_id!r}" for d in _definitions() for file in d.source.files
           for line, rule_id in _markers(file) if not RULE_ID.match(rule_id) or rule_id not in RULES]
    assert not bad, "markers naming no registered rule:\n" + "\n".join(bad)


# -- lint ------------------------------------------------------------------------------------


def test_lint_reports_no_errors_but_retired_models():
    """The corpus was written for the models of its day: a preference for a model its vendor has
    since retired is the one error (RS-005), and it names the replacement."""
    errors, retired = [], []
    for definition in _definitions():
        for f in _findings(definition.source.path):
            if f.severity is Severity.ERROR:
                found = f"{_rel(f.file)}:{f.line} {f.id} [{f.field}] {f.message}"
                (retired if f.id == "RS-005" else errors).append(found)
    assert not errors, f"{len(errors)} error findings in the corpus:\n" + "\n".join(errors)
    assert retired and all("was retired on" in e and "; use anthropic/claude-" in e for e in retired), retired


def test_warnings_are_exactly_the_marked_lines():
    expected: set[Key] = set()
    reported: dict[Key, str] = {}
    for definition in _definitions():
        expected |= {(_rel(file), line, rule_id)
                     for file in definition.source.files for line, rule_id in _markers(file)}
        for finding in _findings(definition.source.path):
            if finding.severity is Severity.WARNING:
                reported[_rel(finding.file), finding.line, finding.id] = f"[{finding.field}] {finding.message}"
    missing, unexpected = expected - set(reported), set(reported) - expected
    assert not missing and not unexpected, (
        f"{len(missing)} marked line(s) without their warning:\n{_show(missing)}\n"
        f"{len(unexpected)} warning(s) on lines without a marker:\n{_show(unexpected, reported)}")
    assert len(expected) >= 25


def test_findings_point_at_the_line_of_their_field():
    """Every finding has a line; a finding about a field sits on the line that names it (the last
    name in its path), or, for a list item, on the item's ``- ...`` line. PV findings about a
    field that is missing point at its parent and are skipped."""
    wrong = []
    for definition in _definitions():
        for finding in _findings(definition.source.path):
            where = f"{_rel(finding.file)}:{finding.line} {finding.id} [{finding.field}]"
            if finding.line is None:
                wrong.append(f"{where}: no line")
                continue
            lines = _lines(finding.file)
            if not 1 <= finding.line <= len(lines):
                wrong.append(f"{where}: the file has {len(lines)} lines")
                continue
            if finding.field is None:
                continue
            path = _field_path(finding.field)
            if finding.id.startswith("PV-") and path not in definition.source.locations:
                continue  # about a missing field (PV-007/PV-008/PV-009/PV-010 point at the parent)
            text = lines[finding.line - 1]
            name = next(str(part) for part in reversed(path) if isinstance(part, str))
            list_item = isinstance(path[-1], int) and text.lstrip().startswith("- ")
            if name not in text and not list_item:
                wrong.append(f"{where}: {name!r} is not on that line: {text.strip()!r}")
    assert not wrong, "findings not located at their field:\n" + "\n".join(wrong)


def test_examples_files_use_declared_inputs():
    """Rows of an examples_ref file are {"id", "inputs", "output"}, with the agent's declared input
    names (``request`` when it declares none) and every required input given."""
    wrong, files = [], 0
    for definition in _definitions():
        reference = definition.spec.portability.few_shot.examples_ref
        if reference is None:
            continue
        files += 1
        spec = definition.spec
        declared = set(spec.inputs) or {"request"}
        required = {name for name, given in spec.inputs.items() if given.required} or {"request"}
        path = Path(definition.source.path).parent / reference
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            row = json.loads(line)
            inputs = row.get("inputs", {})
            if set(row) != {"id", "inputs", "output"} or not required <= set(inputs) <= declared:
                wrong.append(f"{_rel(path)}:{number}: keys {sorted(row)}, inputs {sorted(inputs)}, "
                             f"declared {sorted(declared)}")
    assert not wrong, "examples rows that do not fit their agent:\n" + "\n".join(wrong)
    assert files >= 3


# -- round trip of unknown fields ------------------------------------------------------------


def _known(model: type[BaseModel]) -> dict[str, str]:
    """Field alias (as written in YAML, every alias a field accepts) → attribute name."""
    known = {info.alias or name: name for name, info in model.model_fields.items()}
    for name, info in model.model_fields.items():
        choices = getattr(info.validation_alias, "choices", ())
        known.update({choice: name for choice in choices if isinstance(choice, str)})
    return known


def _unknown_fields(value: BaseModel, raw: dict, path: tuple = ()) -> Iterator[tuple[tuple, BaseModel, Any]]:
    """(path, the loaded object that should keep it, value as written) of every key in ``raw``
    that the schema does not know; input rules and JSON Schemas are not walked."""
    known = _known(type(value))
    for key, written in raw.items():
        here = (*path, key)
        if key not in known:
            yield here, value, written
            continue
        if here == ("guardrails", "input_validation"):
            continue
        loaded = getattr(value, known[key])
        if isinstance(loaded, BaseModel) and isinstance(written, dict):
            yield from _unknown_fields(loaded, written, here)
        elif isinstance(loaded, list) and isinstance(written, list):
            for index, (item, item_written) in enumerate(zip(loaded, written, strict=False)):
                if isinstance(item, BaseModel) and isinstance(item_written, dict):
                    yield from _unknown_fields(item, item_written, (*here, index))
        elif isinstance(loaded, dict) and isinstance(written, dict):
            for name, item in loaded.items():
                if isinstance(item, BaseModel) and isinstance(written.get(name), dict):
                    yield from _unknown_fields(item, written[name], (*here, name))


_ABSENT = object()


def test_unknown_fields_survive_loading():
    """Top-level unknown sections are in ``spec.extensions``; nested ones in the ``model_extra`` of
    the section that holds them (e.g. ``spec.identity.model_extra["belbin_role"]``), as written."""
    lost, seen = [], 0
    for definition in _definitions():
        claude_code = definition.source.format is AgentFormat.CLAUDE_CODE
        for path, owner, written in _unknown_fields(definition.spec, definition.source.raw):
            if claude_code and len(path) == 1 and path[0] in CLAUDE_CODE_FIELDS:
                continue  # Claude Code's own keys: read by Claude Code, rosetta need not keep them
            if len(path) == 1:
                kept = definition.spec.extensions.get(path[0], _ABSENT)
            else:
                kept = (owner.model_extra or {}).get(path[-1], _ABSENT)
            seen += 1
            if kept is _ABSENT or kept != written:
                lost.append(f"{_rel(definition.source.path)}: {'.'.join(map(str, path))} = {written!r}, loaded as "
                            + ("nothing" if kept is _ABSENT else repr(kept)))
    assert not lost, "unknown fields not kept on the loaded spec:\n" + "\n".join(lost)
    assert seen >= 20, f"the corpus should exercise unknown fields; found {seen}"


def test_governance_sidecar_extensions_are_kept():
    """The brief's example: a jerry-style sidecar with identity fields the schema does not have."""
    (result,) = [r for r in _results() if r.path.name == "red-exfil-specialist.md"]
    assert result.definition is not None, str(result.error)
    definition = result.definition
    spec: AgentSpec = definition.spec
    assert definition.source.format is AgentFormat.CLAUDE_CODE and len(definition.source.files) == 2
    assert spec.identity.model_extra["belbin_role"] == "Specialist"
    assert spec.identity.model_extra["nasa_processes"] == ["NPR-7123"]
    assert spec.identity.role == "Data Exfiltration Specialist"
    assert spec.extensions["tool_tier"] == "T4"
    assert spec.extensions["constitution"]["reference"] == "docs/governance/CONSTITUTION.md"
    assert spec.extensions["validation"]["file_must_exist"] is True
    assert spec.output.required and spec.output.schema_ is None
    assert spec.output.location == "output/{engagement-id}/report.md"


# -- files that must keep failing ------------------------------------------------------------


BROKEN_AT = {
    "invalid-yaml.md": (4, 72),          # flow sequence closed by '}'
    "key-after-list-item.md": (7, 3),    # `model:` indented under the `tools:` list
    "unquoted-colon.md": (3, 22),        # description: Use when: the user asks ...
    "tab-indented.md": (5, 1),           # tab before `role:`
    "unclosed-quote.md": (3, 14),        # the opening quote that is never closed
    "empty-body.md": (6, 1),             # nothing after the closing '---' (line 6)
    "duplicate-key.md": (6, 1),          # the second `model:`
}
"""file → (line, column) of the first problem reported."""


def test_every_broken_file_is_listed():
    assert sorted(p.name for p in BROKEN.iterdir() if p.suffix == ".md") == sorted(BROKEN_AT)


@pytest.mark.parametrize("name", sorted(BROKEN_AT))
def test_broken_file_fails_at_the_right_place(name):
    path = BROKEN / name
    with pytest.raises(DefinitionError) as caught:
        load_definition(path)
    problem = caught.value.problems[0]
    assert Path(problem.location.file).name == name, caught.value
    assert (problem.location.line, problem.location.column) == BROKEN_AT[name], caught.value
