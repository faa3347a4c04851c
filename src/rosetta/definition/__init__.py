"""Agent definitions: the portable schema, the four on-disk formats, and the loader.

Names are imported on first use, so light modules of this package (``yaml_source``,
``frontmatter``) can be used by the runtime without pulling in pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.lazy import lazy_exports

_LAZY = {
    "LoadResult": "rosetta.definition.loader",
    "discover_definitions": "rosetta.definition.discovery",
    "load_definition": "rosetta.definition.loader",
    "load_directory": "rosetta.definition.loader",
    "load_many": "rosetta.definition.loader",
    "AgentDefinition": "rosetta.definition.document",
    "AgentFormat": "rosetta.definition.vocabulary",
    "AgentSpec": "rosetta.definition.models",
    "BodyFormat": "rosetta.definition.vocabulary",
    "RCCFRole": "rosetta.definition.vocabulary",
    "Section": "rosetta.definition.document",
    "frontmatter_json_schema": "rosetta.definition.models",
}
__all__ = list(_LAZY)

if TYPE_CHECKING:
    from rosetta.definition.discovery import discover_definitions
    from rosetta.definition.loader import (
        LoadResult,
        load_definition,
        load_directory,
        load_many,
    )
    from rosetta.definition.document import AgentDefinition, Section
    from rosetta.definition.models import AgentSpec, frontmatter_json_schema
    from rosetta.definition.vocabulary import AgentFormat, BodyFormat, RCCFRole


__getattr__ = lazy_exports(__name__, _LAZY)
