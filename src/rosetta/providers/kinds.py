"""The vocabulary adapters are written in: plain enums, importable without pydantic or YAML so
that the runtime can read compiled artifacts cheaply."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

ModelClass = Literal["frontier", "mid", "open"]

ANSWER_CUE = "Answer:"
"""Where a completion-style prompt stops: the base model continues with the answer (the renderer
ends such prompts with it; the local provider adds it to chat messages it turns into one text)."""


class SystemPlacement(StrEnum):
    """Where the system prompt goes."""

    SEPARATE = "separate"  # a dedicated API parameter (Anthropic `system`, Gemini `system_instruction`)
    SYSTEM_MESSAGE = "system_message"  # the first message, role system
    FIRST_USER_TURN = "first_user_turn"  # prepended to the first user message (no system role)
    COMPLETION = "completion"  # base models: one plain text (instructions, examples, request, answer cue)


class Delimiter(StrEnum):
    """How sections are marked in the system text."""

    XML = "xml"  # <constraints>…</constraints>
    MARKDOWN = "markdown"  # ## Constraints
    LABEL = "label"  # CONSTRAINTS:


class ReasoningMode(StrEnum):
    """Whether to add a reasoning instruction for a model class under `adaptive`."""

    OMIT = "omit"
    INJECT = "inject"


class ToolEnvelope(StrEnum):
    """The shape a provider expects tool definitions in."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    GOOGLE = "google"


class StructuredOutput(StrEnum):
    """How the provider is made to answer in the output schema."""

    JSON_SCHEMA_STRICT = "json_schema_strict"  # OpenAI response_format json_schema, strict
    FORCED_TOOL = "forced_tool"  # a tool with the output schema, forced (Claude before native structured output)
    OUTPUT_CONFIG = "output_config"  # Anthropic output_config.format: a JSON schema the answer is decoded to
    RESPONSE_SCHEMA = "response_schema"  # Gemini response_schema + JSON mime type
    JSON_OBJECT = "json_object"  # response_format json_object carrying the schema (llama.cpp server, vLLM): decoding
    # is constrained to it, and the schema is in the prompt too, since the model never sees the request's copy
    PROMPT_SCHEMA = "prompt_schema"  # schema in the prompt (+ JSON mode where offered)


class SchemaTransform(StrEnum):
    """Named output-schema rewrites a provider needs (implemented in rosetta.render.schemas)."""

    INLINE_REFS = "inline_refs"
    CONSTRAINTS_TO_DESCRIPTIONS = "constraints_to_descriptions"
    OPENAI_STRICT = "openai_strict"
    GEMINI_SUBSET = "gemini_subset"
    ANTHROPIC_OUTPUT = "anthropic_output"
