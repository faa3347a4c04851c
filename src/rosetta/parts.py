"""Small value types shared by the signature (what an agent asks) and the rendered prompt (what a
model receives), and the one bound both sides put on plain JSON values (:func:`deeper_than`).

They are plain frozen dataclasses, not pydantic models, so that the runtime can load a compiled
prompt without importing pydantic (~170 ms); everything that comes from users is validated by
pydantic before it becomes one of these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class InputField:
    """One named run-time input."""

    name: str
    type: str = "string"
    description: str = ""
    required: bool = True


@dataclass(frozen=True)
class ToolSpec:
    """A callable tool, provider-neutral (JSON Schema parameters)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Demo:
    """A worked example: inputs and the answer the agent should give."""

    id: str
    inputs: dict[str, Any]
    output: Any


def deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and dicts more than ``limit`` levels, walked without recursion:
    Python's JSON decoder, jsonschema and pydantic recurse once per level (or more), so examples and
    answers nested deeper are refused before any of them sees the value."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if level > limit:
            return True
        stack.extend((child, level + 1) for child in children)
    return False
