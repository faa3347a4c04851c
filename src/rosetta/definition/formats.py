"""Readers for the four on-disk agent formats, each producing one :class:`RawDefinition`.

1. portable single file — ``name.md``: frontmatter with the portable schema + body;
2. Claude Code subagent — ``name.md`` with ``tools: "Read, Grep"`` and ``model: sonnet``, merged
   with an optional ``name.governance.yaml`` sidecar that carries the governance fields;
3. canonical pair — ``name.agent.yaml`` (metadata) + ``name.prompt.md`` (body);
4. legacy XML — a portable-style file without ``portability`` whose body is XML elements.

Readers only parse and merge; typing the result is the loader's job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rosetta.definition.frontmatter import read_text, split_frontmatter
from rosetta.definition.vocabulary import AgentFormat, BodyFormat
from rosetta.definition.sections import detect_body_format
from rosetta.definition.yaml_source import FieldPath, SourceMap, format_path, parse_yaml
from rosetta.errors import DefinitionError

PAIR_SUFFIXES = (".agent.yaml", ".agent.yml")
PROMPT_SUFFIX = ".prompt.md"
SIDECAR_SUFFIXES = (".governance.yaml", ".governance.yml")
MARKDOWN_SUFFIXES = (".md", ".markdown")
CLAUDE_CODE_KEYS = {"mcpServers", "permissionMode", "color"}
"""Frontmatter keys only Claude Code subagents use (they mark a file as one)."""
CLAUDE_CODE_FIELDS = frozenset({
    "tools", "disallowedTools", "model", "permissionMode", "maxTurns", "skills", "mcpServers", "hooks", "memory",
    "background", "isolation", "color", "effort", "initialPrompt", "disabled",
})
"""Every frontmatter key Claude Code reads in a subagent: kept for Claude Code, never reported as unknown."""


@dataclass
class RawDefinition:
    """A definition merged from its files but not yet checked against the schema."""

    format: AgentFormat
    path: Path
    files: list[Path]
    data: dict[str, Any]
    body: str
    body_path: Path
    body_line: int
    detected_body_format: BodyFormat
    locations: dict[FieldPath, tuple[str, int, int]] = field(default_factory=dict)

    def add_locations(self, source_map: SourceMap, prefix: FieldPath = ()) -> None:
        for path, (line, column) in source_map.positions.items():
            self.locations.setdefault((*prefix, *path), (source_map.file, line, column))


def stem_of(path: Path) -> str:
    """Agent stem of any of our file names: ``triage.agent.yaml`` → ``triage``."""
    name = path.name
    for suffix in (*PAIR_SUFFIXES, PROMPT_SUFFIX, *SIDECAR_SUFFIXES, *MARKDOWN_SUFFIXES):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def sidecar_for(markdown: Path, name: object = None) -> Path | None:
    """The governance sidecar next to a Claude Code subagent, by file stem or agent name."""
    # the frontmatter name is untrusted text: use it only when it is a plain file name
    stems = [stem_of(markdown)]
    if isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", name) is not None:
        stems.append(name)
    for stem in stems:
        for suffix in SIDECAR_SUFFIXES:
            candidate = markdown.with_name(stem + suffix)
            if candidate.is_file():
                return candidate
    return None


def read_definition(path: Path) -> RawDefinition:
    """Read any supported format, chosen from the file name and content."""
    name = path.name
    if name.endswith(PAIR_SUFFIXES):
        return read_pair(path)
    if name.endswith(PROMPT_SUFFIX):
        for suffix in PAIR_SUFFIXES:
            metadata = path.with_name(stem_of(path) + suffix)
            if metadata.is_file():
                return read_pair(metadata)
    if name.endswith(SIDECAR_SUFFIXES):
        markdown = path.with_name(stem_of(path) + ".md")
        raise DefinitionError.at(
            "this is a governance sidecar, not an agent", file=path,
            hint=f"load the subagent it belongs to ({markdown.name})",
        )
    return read_markdown(path)


def _mapping(value: Any, source_map: SourceMap, what: str) -> dict[str, Any]:
    if value is None:
        raise DefinitionError.at(
            f"{what} is empty", file=source_map.file, line=2 if what == "frontmatter" else 1,
            expected="a mapping with at least 'name'", hint="add 'name: my-agent' and the other fields",
        )
    if not isinstance(value, dict):
        kind = "a list" if isinstance(value, list) else f"a single {type(value).__name__} value"
        raise DefinitionError.at(
            f"{what} is {kind}", file=source_map.file, line=source_map.locate(()).line,
            expected="a mapping of 'key: value' lines", hint="write fields as 'name: my-agent', one per line",
        )
    return value


def read_markdown(path: Path) -> RawDefinition:
    """A single markdown file: portable, Claude Code subagent (plus sidecar), or legacy XML."""
    document = split_frontmatter(read_text(path), path)
    value, source_map = parse_yaml(document.frontmatter or "", file=str(path), first_line=document.frontmatter_line)
    source_map.positions.setdefault((), (document.frontmatter_line, 1))
    data = _mapping(value, source_map, "frontmatter")
    detected = detect_body_format(document.body)
    sidecar = sidecar_for(path, data.get("name"))
    tools = data.get("tools")
    is_claude_code = (
        sidecar is not None
        or isinstance(tools, str)
        or (isinstance(tools, list) and tools and all(isinstance(t, str) for t in tools))
        or bool(CLAUDE_CODE_KEYS & data.keys())
    )
    if is_claude_code:
        fmt = AgentFormat.CLAUDE_CODE
    elif "portability" not in data and detected is BodyFormat.XML:
        fmt = AgentFormat.LEGACY_XML
    else:
        fmt = AgentFormat.PORTABLE
    raw = RawDefinition(fmt, path, [path], data, document.body, path, document.body_line, detected)
    raw.add_locations(source_map)
    _import_tool_names(raw)
    if is_claude_code:
        if sidecar is not None:
            _merge_sidecar(raw, sidecar)
    return raw


def _import_tool_names(raw: RawDefinition) -> None:
    """Tools named, not defined, are host tools: they become ``capabilities.allowed_tools``. Claude
    Code writes ``tools: "Read, Grep"`` or a list of names; OpenCode a mapping of name to whether the
    agent may use it (``{read: true, write: false}``)."""
    tools = raw.data.get("tools")
    if isinstance(tools, str):
        names = [t.strip() for t in tools.split(",") if t.strip()]
    elif isinstance(tools, list) and all(isinstance(t, str) for t in tools):
        names = list(tools)
    elif isinstance(tools, dict) and tools and all(isinstance(v, bool) for v in tools.values()):
        names = [str(name) for name, allowed in tools.items() if allowed]
    else:
        return
    del raw.data["tools"]
    capabilities = raw.data.setdefault("capabilities", {})
    if not isinstance(capabilities, dict):
        return  # the schema check reports the bad capabilities value
    allowed = capabilities.setdefault("allowed_tools", [])
    if isinstance(allowed, list):
        allowed.extend(n for n in names if n not in allowed)
    where = raw.locations.get(("tools",))
    if where:
        raw.locations.setdefault(("capabilities",), where)
        raw.locations.setdefault(("capabilities", "allowed_tools"), where)


def _merge_sidecar(raw: RawDefinition, sidecar: Path) -> None:
    value, source_map = parse_yaml(read_text(sidecar), file=str(sidecar))
    source_map.positions.setdefault((), (1, 1))
    data = _mapping(value, source_map, "governance sidecar")
    raw.files.append(sidecar)
    _deep_merge(raw.data, data, (), raw, source_map)
    raw.add_locations(source_map)


def _deep_merge(target: dict[str, Any], extra: dict[str, Any], path: FieldPath, raw: RawDefinition,
                source_map: SourceMap) -> None:
    """Merge sidecar values in; lists are unioned, conflicting scalars are an error naming both places."""
    for key, value in extra.items():
        here = (*path, key)
        if key not in target:
            target[key] = value
        elif isinstance(target[key], dict) and isinstance(value, dict):
            _deep_merge(target[key], value, here, raw, source_map)
        elif isinstance(target[key], list) and isinstance(value, list):
            target[key].extend(v for v in value if v not in target[key])
        elif target[key] != value:
            first = raw.locations.get(here, (str(raw.path), None, None))
            where = source_map.locate(here)
            raise DefinitionError.at(
                f"conflicts with the value in {first[0]}" + (f" line {first[1]}" if first[1] else ""),
                file=where.file, line=where.line, column=where.column, field=format_path(here),
                hint="define the field in one file only",
            )


def read_pair(metadata: Path) -> RawDefinition:
    """``name.agent.yaml`` + ``name.prompt.md``."""
    value, source_map = parse_yaml(read_text(metadata), file=str(metadata))
    source_map.positions.setdefault((), (1, 1))
    data = _mapping(value, source_map, "agent metadata")
    prompt = metadata.with_name(stem_of(metadata) + PROMPT_SUFFIX)
    if not prompt.is_file():
        raise DefinitionError.at(
            f"the body file {prompt.name} is missing", file=metadata,
            hint=f"create {prompt.name} next to {metadata.name} with the prompt text",
        )
    body = read_text(prompt)
    detected = detect_body_format(body)
    raw = RawDefinition(AgentFormat.PAIR, metadata, [metadata, prompt], data, body, prompt, 1, detected)
    raw.add_locations(source_map)
    return raw
