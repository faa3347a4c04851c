"""One exception hierarchy for everything a user can get wrong.

Every error carries one or more :class:`Problem` records that name the file, line, column and
field, what was expected and how to fix it. The CLI prints them and maps the class to an exit
code; library users can read ``error.problems`` instead of parsing messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self


@dataclass(frozen=True, slots=True)
class Location:
    """A place in a source file; every part is optional because not every source has lines."""

    file: str | None = None
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        parts = [self.file or "<input>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the input, said the way a reviewer would say it."""

    message: str
    location: Location = field(default_factory=Location)
    field: str | None = None
    expected: str | None = None
    hint: str | None = None

    def format(self) -> str:
        """``file:line:col: field: message (expected ...)`` plus an indented hint line."""
        located = self.location.file is not None or self.location.line is not None
        head = f"{self.location}: " if located else ""
        if self.field:
            head += f"{self.field}: "
        text = head + self.message
        if self.expected:
            text += f" (expected {self.expected})"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class RosettaError(Exception):
    """Base of every error rosetta raises on purpose; never a bug, always something to fix."""

    exit_code = 2

    def __init__(self, problems: Problem | list[Problem] | str) -> None:
        if isinstance(problems, str):
            problems = [Problem(problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: list[Problem] = list(problems)
        super().__init__("\n".join(p.format() for p in self.problems))

    def __reduce__(self) -> tuple[Any, ...]:
        # keep the structured problems when errors cross process boundaries (parallel lint)
        return (self.__class__, (self.problems,))

    @classmethod
    def at(
        cls,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        column: int | None = None,
        field: str | None = None,
        expected: str | None = None,
        hint: str | None = None,
    ) -> Self:
        """Build an error with a single problem at a known place."""
        location = Location(None if file is None else str(file), line, column)
        return cls(Problem(message, location, field, expected, hint))


class DefinitionError(RosettaError):
    """An agent definition (or one of its sidecars) could not be read or does not fit the schema."""


class ConfigError(RosettaError):
    """The project configuration (``[tool.rosetta]`` or ``ROSETTA_*``) is invalid."""


class UsageError(RosettaError):
    """The command or function was called with arguments that cannot work."""


class RenderError(RosettaError):
    """An agent cannot be rendered for a model (inexpressible schema, missing capability, too big)."""


class RolloutError(RosettaError):
    """A rollout file, version id or experiment setting cannot be used as given."""
