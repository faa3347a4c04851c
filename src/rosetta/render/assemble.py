"""RCCF assembly: the signature's sections grouped into Role, Context, Constraints, Format and Tools,
ordered and delimited the way the adapter (or a knob) says."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from rosetta.definition.document import Section
from rosetta.definition.vocabulary import RCCFRole
from rosetta.parts import InputField
from rosetta.providers.kinds import Delimiter
from rosetta.signature import Signature

BLOCK_TITLES = {"role": "Role", "context": "Context", "constraints": "Constraints", "format": "Format",
                "tools": "Tools"}


_NON_WORD = re.compile(r"[^a-z0-9]+")


@lru_cache(maxsize=4096)
def _tag(title: str) -> str:
    return _NON_WORD.sub("_", title.lower()).strip("_") or "section"


def delimit(title: str, content: str, delimiter: Delimiter, *, level: int = 2) -> str:
    """One titled block in the given delimiter style."""
    content = content.strip("\n")
    if delimiter is Delimiter.XML:
        tag = _tag(title)
        return f"<{tag}>\n{content}\n</{tag}>"
    if delimiter is Delimiter.MARKDOWN:
        return f"{'#' * level} {title}\n{content}"
    return f"{title.upper()}:\n{content}"


def identity_text(signature: Signature) -> str:
    """The Role block's opening, written from the frontmatter's identity and persona."""
    lines = []
    if signature.role:
        lines.append(f"You are a {signature.role}." if not signature.role.lower().startswith(("a ", "an ", "the "))
                     else f"You are {signature.role}.")
    if signature.expertise:
        lines.append("Your expertise: " + "; ".join(signature.expertise) + ".")
    if signature.cognitive_mode:
        lines.append(f"Your approach is {signature.cognitive_mode}.")
    persona = [p for p in (signature.tone and f"tone: {signature.tone}",
                           signature.communication_style and f"style: {signature.communication_style}",
                           signature.audience_level and f"audience: {signature.audience_level}") if p]
    if persona:
        lines.append("Communicate with " + ", ".join(persona) + ".")
    return "\n".join(lines)


def group_sections(sections: Iterable[Section]) -> dict[str, list[Section]]:
    """Body sections by RCCF block; `other` sections travel with Context, in source order."""
    groups: dict[str, list[Section]] = {name: [] for name in BLOCK_TITLES}
    for section in sections:
        role = RCCFRole.CONTEXT if section.role is RCCFRole.OTHER else section.role
        groups[role.value].append(section)
    return groups


def block_content(block: str, sections: list[Section], extra: list[str], delimiter: Delimiter) -> str:
    """A block's body: its sections (sub-titled when they have their own name) then generated text."""
    parts = [section_text(block, section, delimiter) for section in sections]
    parts += [text for text in extra if text]
    return "\n\n".join(p for p in parts if p.strip())


def section_text(block: str, section: Section, delimiter: Delimiter) -> str:
    """One section as its block shows it: sub-titled when it has a name of its own."""
    if section.title and _tag(section.title) not in (block, _tag(BLOCK_TITLES[block])) and section.key != "preamble":
        return delimit(section.title, section.content, delimiter, level=3)
    return section.content


def assemble_system(blocks: dict[str, str], order: list[str], delimiter: Delimiter) -> str:
    """The system text: non-empty blocks in ``order``, each delimited."""
    return "\n\n".join(delimit(BLOCK_TITLES[name], blocks[name], delimiter)
                       for name in order if blocks.get(name, "").strip())


def input_block(field: InputField, delimiter: Delimiter) -> str:
    """The user-message template for one input, with a ``{name}`` placeholder."""
    title = field.name.replace("_", " ").capitalize() if delimiter is not Delimiter.XML else field.name
    return delimit(title, "{" + field.name + "}", delimiter)
