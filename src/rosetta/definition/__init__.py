"""Agent definitions: the portable schema, the four on-disk formats, and the loader."""

from rosetta.definition.loader import (
    LoadResult,
    discover_definitions,
    load_definition,
    load_directory,
    load_many,
)
from rosetta.definition.models import (
    AgentDefinition,
    AgentFormat,
    AgentSpec,
    BodyFormat,
    RCCFRole,
    Section,
    frontmatter_json_schema,
)

__all__ = [
    "AgentDefinition", "AgentFormat", "AgentSpec", "BodyFormat", "LoadResult", "RCCFRole", "Section",
    "discover_definitions", "frontmatter_json_schema", "load_definition", "load_directory", "load_many",
]
