"""A loaded agent definition: what was read from its files besides the frontmatter's fields.

:class:`AgentDefinition` is what the loader returns: the typed spec (:mod:`rosetta.definition.models`),
the body split into RCCF sections (:class:`Section`), and its :class:`DefinitionSource`: where
everything came from, and what was set aside so that the agent loads (:class:`OffListValue`,
:class:`UnreadValue`, :class:`MissingReference`), for lint to report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rosetta.definition.models import AgentSpec
from rosetta.definition.vocabulary import AgentFormat, BodyFormat, RCCFRole


class Section(BaseModel):
    """A named piece of the body, tagged with the RCCF role it plays. ``content`` is verbatim."""

    model_config = ConfigDict(frozen=True)

    key: str
    """Normalized name used for role lookup, e.g. output_format."""
    title: str
    """The heading, tag or label as written; empty for text before the first one."""
    role: RCCFRole
    """Which RCCF part this section belongs to."""
    content: str
    """The text inside the section, without its heading or tags."""
    line: int
    """1-based line in the body file where the section starts."""
    level: int = 0
    """Heading level for markdown (1–6), 0 otherwise."""


@dataclass(frozen=True)
class OffListValue:
    """A value outside a field's known set, and what rosetta does with it instead of refusing the file."""

    path: tuple[str | int, ...]
    value: Any
    known: tuple[str, ...]
    used: str
    """What rosetta does with it, in words: "uses 'warn_and_retry'", "ignores it", or :data:`KEPT_AS_WRITTEN`."""


@dataclass(frozen=True)
class UnreadValue:
    """A known field written in a shape rosetta does not read: set aside so that the agent loads,
    kept as written (compiled artifacts carry it with the extensions), and reported by lint."""

    path: tuple[str | int, ...]
    value: Any
    found: str
    """The shape found, in words: "a mapping", "a list", "'high'"."""
    expected: str
    """The shapes rosetta reads there, in words."""
    used: str
    """What rosetta does instead: "uses 'adaptive'", "ignores it"."""


KEPT_AS_WRITTEN = "keeps it as written"
"""How descriptive values outside their known set are handled: rendered as the author wrote them."""


@dataclass(frozen=True)
class MissingReference:
    """A file a definition names that is in none of the places looked in, or that is not used."""

    path: tuple[str | int, ...]
    reference: str
    tried: tuple[str, ...]
    why: str = ""
    """Why a file that was found is not used (empty: it was found nowhere)."""


TEMPLATE_SUFFIXES = (".md", ".markdown", ".txt", ".rst", ".adoc", ".html", ".tmpl", ".template", ".j2", ".jinja",
                     ".jinja2", ".mustache", ".hbs")
"""What an output template may be: a text document. Its text goes into every prompt, to hosted
models too, so a definition naming ``.env`` or ``id_rsa`` as its template gets nothing rendered."""


class DefinitionSource(BaseModel):
    """Where a definition came from; paths as given to the loader."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    format: AgentFormat
    """Which of the supported formats it was read as."""
    path: str
    """The main file (the .md, or the .agent.yaml of a pair)."""
    files: tuple[str, ...]
    """Every file the definition is built from: those merged into it (main file first), then the files
    it references (``examples_ref``, ``output.template``), so that editing any of them changes its hash."""
    body_path: str
    """The file holding the body."""
    body_line: int
    """Line of ``body_path`` where the body starts."""
    detected_body_format: BodyFormat
    """Body format as detected from the text."""
    raw: dict[str, Any] = Field(default_factory=dict, exclude=True, repr=False)
    """The merged frontmatter exactly as parsed (lint reads it for PV-001)."""
    locations: dict[tuple[str | int, ...], tuple[str, int, int]] = Field(default_factory=dict, exclude=True, repr=False)
    """Field path → (file, line, column) of every frontmatter value."""
    off_list: tuple[OffListValue, ...] = ()
    """Values outside their field's known set, tolerated at load (lint reports them)."""
    unread: tuple[UnreadValue, ...] = ()
    """Known fields in a shape rosetta does not read, set aside at load (lint reports them)."""
    references: dict[str, str] = {}
    """Each referenced file found (field, e.g. ``output.template`` → path), wherever it was found."""
    missing_references: tuple[MissingReference, ...] = ()
    """Referenced files found nowhere (``output.template``): the agent renders without them."""


class AgentDefinition(BaseModel):
    """A loaded agent: its spec, its body split into RCCF sections, and its provenance."""

    model_config = ConfigDict(frozen=True)

    spec: AgentSpec
    """The frontmatter."""
    body: str
    """The prompt body as written (line endings normalized)."""
    sections: tuple[Section, ...]
    """The body split into named sections, in source order."""
    source: DefinitionSource
    """Where it came from."""

    @property
    def name(self) -> str:
        """The agent's name."""
        return self.spec.name

    @property
    def body_format(self) -> BodyFormat:
        """The declared body format, or the detected one when none is declared."""
        return self.spec.portability.body_format or self.source.detected_body_format

    @property
    def portable(self) -> bool:
        """Whether the definition opted into multi-provider use."""
        return self.spec.portability.enabled

    def input_rule_path(self, index: int) -> tuple[str | int, ...]:
        """Where input rule ``index`` is written: at its list index, or under its input's name when
        the rules are written as a mapping."""
        guardrails = self.source.raw.get("guardrails")
        written = guardrails.get("input_validation") if isinstance(guardrails, dict) else None
        rule = self.spec.guardrails.input_validation[index]
        if isinstance(written, dict) and rule.field is not None:
            return ("guardrails", "input_validation", rule.field)
        return ("guardrails", "input_validation", index)

    def locate(self, *path: str | int) -> tuple[str, int | None, int | None]:
        """(file, line, column) of a frontmatter field, or of its nearest located ancestor."""
        for end in range(len(path), -1, -1):
            found = self.source.locations.get(tuple(path[:end]))
            if found:
                return found
        return (self.source.path, None, None)
