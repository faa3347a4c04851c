"""Body → named sections, each tagged with its RCCF role, so renderers can reorder and re-delimit
a prompt without losing a word of it.

Three body formats: markdown headings, XML tags (optionally wrapped in one ``<agent>`` element),
and RCCF labels (``ROLE:`` on its own line). Which heading plays which role is a small table,
:data:`SECTION_ROLES`, that a definition can override (``portability.section_roles``).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping

from typing import TYPE_CHECKING

from rosetta.definition.vocabulary import BodyFormat, RCCFRole

if TYPE_CHECKING:
    from rosetta.definition.document import Section

R = RCCFRole
SECTION_ROLES: dict[str, RCCFRole] = {
    # role: who the agent is
    "role": R.ROLE, "identity": R.ROLE, "persona": R.ROLE, "purpose": R.ROLE, "mission": R.ROLE,
    "about": R.ROLE, "who_you_are": R.ROLE, "expertise": R.ROLE, "agent": R.ROLE, "overview": R.ROLE,
    # context: what it knows and how it works
    "context": R.CONTEXT, "background": R.CONTEXT, "domain": R.CONTEXT, "knowledge": R.CONTEXT,
    "scope": R.CONTEXT, "methodology": R.CONTEXT, "method": R.CONTEXT, "process": R.CONTEXT,
    "procedure": R.CONTEXT, "workflow": R.CONTEXT, "capabilities": R.CONTEXT, "task": R.CONTEXT,
    "instructions": R.CONTEXT, "approach": R.CONTEXT, "rubric": R.CONTEXT, "checklist": R.CONTEXT,
    "tools": R.CONTEXT, "inputs": R.CONTEXT, "input": R.CONTEXT,
    # constraints: what it must and must not do
    "constraints": R.CONSTRAINTS, "constraint": R.CONSTRAINTS, "rules": R.CONSTRAINTS,
    "guardrails": R.CONSTRAINTS, "restrictions": R.CONSTRAINTS, "limitations": R.CONSTRAINTS,
    "boundaries": R.CONSTRAINTS, "forbidden": R.CONSTRAINTS, "forbidden_actions": R.CONSTRAINTS,
    "safety": R.CONSTRAINTS, "guidelines": R.CONSTRAINTS, "principles": R.CONSTRAINTS,
    "policy": R.CONSTRAINTS, "requirements": R.CONSTRAINTS,
    # format: what the answer looks like
    "format": R.FORMAT, "output": R.FORMAT, "output_format": R.FORMAT, "response_format": R.FORMAT,
    "response": R.FORMAT, "deliverables": R.FORMAT, "deliverable": R.FORMAT, "schema": R.FORMAT,
    "answer": R.FORMAT, "report": R.FORMAT,
}
"""Normalized heading (or a word of it) → RCCF role. Exact names win over single words."""

_ATX_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)")
_XML_OPEN = re.compile(r"<([A-Za-z_][\w.-]*)(?:[ \t][^<>]*)?>[ \t]*")
_XML_TAG = re.compile(r"<(/)?([A-Za-z_][\w.-]*)(?(1)\s*|(?:[ \t][^<>]*)?)>")
"""An opening tag (attributes allowed) or a closing one, of any name."""
_RCCF_LABEL = re.compile(r"^([A-Z][A-Z0-9 _/&-]{1,40}):[ \t]*(.*)$")
_RCCF_CORE = {"ROLE", "CONTEXT", "CONSTRAINTS", "FORMAT"}
_WRAPPERS = {"agent", "system", "prompt", "instructions", "system_prompt"}


def normalize_key(title: str) -> str:
    """``"Output Format"`` → ``"output_format"``."""
    return re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")


def role_for(title: str, overrides: Mapping[str, RCCFRole] = {}) -> RCCFRole:
    """The RCCF role of a section title: overrides, then exact table entry, then first known word."""
    key = normalize_key(title)
    normalized_overrides = {normalize_key(k): v for k, v in overrides.items()}
    if key in normalized_overrides:
        return RCCFRole(normalized_overrides[key])
    if key in SECTION_ROLES:
        return SECTION_ROLES[key]
    for word in key.split("_"):
        if word in SECTION_ROLES:
            return SECTION_ROLES[word]
    return RCCFRole.OTHER


def detect_body_format(body: str) -> BodyFormat:
    """Guess the body format: one or more top-level XML elements, RCCF labels, else markdown."""
    stripped = body.strip()
    if stripped and _xml_elements(body):
        return BodyFormat.XML
    labels = {m.group(1) for m in (_RCCF_LABEL.match(line) for line in lines_outside_fences(body)) if m}
    if len(labels & _RCCF_CORE) >= 2:
        return BodyFormat.RCCF
    return BodyFormat.MARKDOWN


def split_sections(
    body: str,
    body_format: BodyFormat,
    *,
    first_line: int = 1,
    overrides: Mapping[str, RCCFRole] = {},
) -> tuple[Section, ...]:
    """Split ``body`` into sections; ``first_line`` is the file line where the body starts."""
    if body_format is BodyFormat.XML:
        raw = _split_xml(body)
    elif body_format is BodyFormat.RCCF:
        raw = _split_rccf(body)
    else:
        raw = _split_markdown(body)
    from rosetta.definition.document import Section  # pydantic: only where sections are built

    sections = []
    for index, (title, content, line, level) in enumerate(raw):
        if not title and not content.strip():
            continue
        role = role_for(title, overrides) if title else RCCFRole.ROLE
        if role is RCCFRole.OTHER and index == 0 and level == 1:
            role = RCCFRole.ROLE  # a document title opens the prompt: it introduces the agent
        sections.append(
            Section(
                key=normalize_key(title) or "preamble",
                title=title,
                role=role,
                content=_trim_blank_lines(content),
                line=first_line + line,
                level=level,
            )
        )
    return tuple(sections)


# -- splitters: each returns (title, content, 0-based line, level) tuples --------------------


def lines_outside_fences(body: str) -> list[str]:
    """Lines of ``body`` with fenced code blocks blanked out (same count, same numbering)."""
    result, fence = [], None
    for line in body.split("\n"):
        match = _FENCE.match(line)
        if fence:
            if match and match.group(1) == fence:
                fence = None
            result.append("")
        elif match:
            fence = match.group(1)
            result.append("")
        else:
            result.append(line)
    return result


def _split_markdown(body: str) -> list[tuple[str, str, int, int]]:
    lines = body.split("\n")
    visible = lines_outside_fences(body)
    headings = [(i, len(m.group(1)), m.group(2)) for i, line in enumerate(visible) if (m := _ATX_HEADING.match(line))]
    if not headings:
        return [("", body, 0, 0)]
    levels = sorted({level for _, level, _ in headings})
    split_level = next((lv for lv in levels if sum(1 for h in headings if h[1] == lv) >= 2), levels[0])
    cuts = [h for h in headings if h[1] <= split_level]
    parts = [("", "\n".join(lines[: cuts[0][0]]), 0, 0)]
    for n, (line, level, title) in enumerate(cuts):
        end = cuts[n + 1][0] if n + 1 < len(cuts) else len(lines)
        parts.append((title, "\n".join(lines[line + 1 : end]), line, level))
    return parts


def _xml_elements(body: str) -> list[tuple[str, str, int]] | None:
    """Top-level ``<tag>…</tag>`` elements as (tag, inner text, 0-based line), or None when the
    body is anything other than a sequence of elements."""
    elements: list[tuple[str, str, int]] = []
    position = line = counted = 0  # `line` is the number of newlines before `counted`
    while True:
        while position < len(body) and body[position] in " \t\n":
            position += 1
        if position >= len(body):
            break
        match = _XML_OPEN.match(body, position)
        if not match:
            return None
        tag = match.group(1)
        close = _find_close(body, tag, match.end())
        if close is None:
            return None
        line += body.count("\n", counted, match.end())  # counted once: linear in the body
        counted = match.end()
        elements.append((tag, body[match.end() : close], line))
        position = close + len(f"</{tag}>")
    return elements or None


def _find_close(body: str, tag: str, start: int) -> int | None:
    """Index of the ``</tag>`` matching an open tag that ends at ``start`` (same-name nesting).
    One expression for every tag name: compiling one per tag costs more than the scan itself."""
    depth = 1
    for match in _XML_TAG.finditer(body, start):
        if match.group(2) == tag:
            depth += -1 if match.group(1) else 1
            if depth == 0:
                return match.start()
    return None


def _split_xml(body: str) -> list[tuple[str, str, int, int]]:
    elements = _xml_elements(body)
    if not elements:
        return _split_markdown(body)
    if len(elements) == 1 and elements[0][0].lower() in _WRAPPERS:
        tag, inner, line = elements[0]
        children = _xml_elements(inner)
        if children:
            return [(t, textwrap.dedent(text), line + child_line, 0) for t, text, child_line in children]
        return [(tag, textwrap.dedent(inner), line, 0)]
    return [(tag, textwrap.dedent(text), line, 0) for tag, text, line in elements]


def _split_rccf(body: str) -> list[tuple[str, str, int, int]]:
    lines = body.split("\n")
    visible = lines_outside_fences(body)
    parts: list[tuple[str, list[str], int]] = [("", [], 0)]
    for index, line in enumerate(lines):
        match = _RCCF_LABEL.match(visible[index])
        if match:
            label, rest = match.group(1).strip(), match.group(2)
            parts.append((label, [rest] if rest else [], index))
        else:
            parts[-1][1].append(line)
    return [(title, "\n".join(content), line, 0) for title, content, line in parts]


def _trim_blank_lines(text: str) -> str:
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    end = next((i for i in range(len(lines), start, -1) if lines[i - 1].strip()), start)
    return "\n".join(lines[start:end])
