"""Project directories for the runtime, read without pydantic-settings.

``rosetta.load("triage")`` sits on application start-up paths, where importing pydantic-settings
(~300 ms) is too slow. This reads the same sources with the same precedence as
:func:`rosetta.config.load_settings` — ``[tool.rosetta]`` < ``ROSETTA_*`` < arguments — for the
few keys the runtime needs; ``tests/runtime/test_project.py`` checks that both agree.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from rosetta.errors import ConfigError


@dataclass(frozen=True)
class ProjectDirs:
    """Absolute directories and runtime strictness of one project."""

    root: Path
    signatures_dir: Path
    compiled_dir: Path
    strict: bool


def project_dirs(start: str | os.PathLike[str] | None = None, **overrides: object) -> ProjectDirs:
    """The runtime's view of the project containing ``start`` (default: the working directory)."""
    origin = Path(start or Path.cwd()).resolve()
    pyproject = next((d / "pyproject.toml" for d in (origin, *origin.parents) if (d / "pyproject.toml").is_file()),
                     None)
    table: dict[str, object] = {}
    if pyproject is not None:
        try:
            table = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("rosetta", {})
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError.at(f"invalid TOML: {exc}", file=pyproject) from None
    root = Path(str(overrides.get("root") or os.environ.get("ROSETTA_ROOT") or
                    (pyproject.parent if pyproject else origin))).resolve()

    def setting(key: str, default: str) -> str:
        value = overrides.get(key)
        if value is None:
            value = os.environ.get("ROSETTA_" + key.upper())
        if value is None:
            value = table.get(key, default)
        return str(value)

    def directory(key: str, default: str) -> Path:
        path = Path(setting(key, default)).expanduser()
        return path if path.is_absolute() else root / path

    strict = setting("strict", "false").strip().lower() in ("1", "true", "yes", "on")
    return ProjectDirs(root, directory("signatures_dir", "signatures"), directory("compiled_dir", "compiled"), strict)
