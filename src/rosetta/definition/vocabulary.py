"""The enumerated values of the portable schema (ADR-003): the known values of each field that has
a closed (or, for descriptive fields, a suggested) set, and the on-disk formats definitions come in."""

from __future__ import annotations

from enum import StrEnum


class CognitiveMode(StrEnum):
    """How the agent approaches problems (the known values; others are kept as written)."""

    DIVERGENT = "divergent"
    CONVERGENT = "convergent"
    INTEGRATIVE = "integrative"
    SYSTEMATIC = "systematic"
    STRATEGIC = "strategic"
    FORENSIC = "forensic"


class Feature(StrEnum):
    """Provider features an agent can depend on."""

    TOOL_USE = "tool_use"
    STRUCTURED_OUTPUT = "structured_output"
    VISION = "vision"
    STREAMING = "streaming"


class FallbackBehavior(StrEnum):
    """What to do when the model's answer fails validation."""

    WARN_AND_RETRY = "warn_and_retry"
    WARN_AND_HALT = "warn_and_halt"
    ESCALATE_TO_USER = "escalate_to_user"


class OutputLevel(StrEnum):
    """Audience levels: L0 executive, L1 lead, L2 practitioner (the known values; others are kept)."""

    L0 = "L0"
    L1 = "L1"
    L2 = "L2"


class ReasoningStrategy(StrEnum):
    """Who decides about chain-of-thought instructions."""

    ADAPTIVE = "adaptive"
    EXPLICIT_COT = "explicit_cot"
    NONE = "none"


class BodyFormat(StrEnum):
    """How the body below the frontmatter is structured."""

    XML = "xml"
    MARKDOWN = "markdown"
    RCCF = "rccf"


class RCCFRole(StrEnum):
    """The part of an RCCF prompt (Role, Context, Constraints, Format) a body section plays."""

    ROLE = "role"
    CONTEXT = "context"
    CONSTRAINTS = "constraints"
    FORMAT = "format"
    OTHER = "other"


class AgentFormat(StrEnum):
    """The on-disk shape a definition was read from."""

    PORTABLE = "portable"
    CLAUDE_CODE = "claude_code"
    PAIR = "pair"
    LEGACY_XML = "legacy_xml"
