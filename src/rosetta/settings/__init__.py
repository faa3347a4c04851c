"""Project settings, read in one place: ``[tool.rosetta]`` in the nearest ``pyproject.toml``,
overridden by ``ROSETTA_*`` environment variables, overridden by arguments (CLI flags, or the
keywords of ``rosetta.load``).

The CLI, ``rosetta.load`` and the runtime all call :func:`load_settings`, so one precedence, one
set of defaults and one set of error messages hold everywhere. It imports no pydantic: loading an
agent sits on application start-up paths. Relative directories are resolved against the project
root (the directory of that ``pyproject.toml``), not the working directory, so ``rosetta`` behaves
the same from any sub-directory. An unknown key is an error naming its line and the nearest valid
key; a bad value names where it came from (the argument, ``$ROSETTA_<KEY>``, or its line).

Its parts: :mod:`rosetta.settings.model` declares what is configured (:class:`Settings` and the
tables in it) and :class:`ProjectState`, which owns ``<root>/.rosetta/``, what rosetta keeps between
runs; :mod:`rosetta.settings.reading` reads the sources and parses each value.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rosetta.settings.model import (
    ENV_PREFIX,
    JSON_EXAMPLES,
    KEYS,
    PROJECT,
    HealthPolicy,
    Limit,
    ProjectState,
    Settings,
)
from rosetta.settings.reading import (
    Reader,
    absolute,
    find_pyproject,
    parse_flag,
    parse_mapping,
    parse_path,
    parse_positive_int,
    parse_role,
    parse_texts,
    read_tool_table,
    warn_unknown_env,
)

__all__ = ["ENV_PREFIX", "JSON_EXAMPLES", "KEYS", "PROJECT", "HealthPolicy", "Limit", "ProjectState", "Settings",
           "load_settings", "user_cache_dir"]


def _default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rosetta"


def user_cache_dir() -> Path:
    """The user's cache folder, which no project setting can name: ``$ROSETTA_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/rosetta`` (``~/.cache/rosetta``). It holds what a project must not ship or
    reach: the keys that sign each project's cache, and the local models' weights by default."""
    given = os.environ.get(ENV_PREFIX + "CACHE_DIR", "").strip()
    return Path(given).expanduser().resolve() if given else _default_cache_dir()


def load_settings(start: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Settings for the project containing ``start`` (default: the working directory).

    ``overrides`` (CLI flags, ``rosetta.load`` keywords) win over ``ROSETTA_*`` variables, which win
    over ``[tool.rosetta]``; ``None`` overrides are ignored, so options can pass their defaults through.
    """
    unknown = sorted(set(overrides) - set(KEYS))
    if unknown:
        raise TypeError(f"load_settings() got unknown setting(s) {', '.join(unknown)}")
    origin = Path(start or Path.cwd()).expanduser().resolve()
    pyproject = find_pyproject(origin)
    text = pyproject.read_text(encoding="utf-8") if pyproject else ""
    table = read_tool_table(pyproject, text) if pyproject else {}
    warn_unknown_env()
    read = Reader(table, {k: v for k, v in overrides.items() if v is not None}, pyproject, text)
    # the root: an argument, else $ROSETTA_ROOT, else the pyproject.toml's folder (a `root` key in
    # that file is refused by read_tool_table: it would be relative to itself)
    given = read.overrides.get("root") or os.environ.get(ENV_PREFIX + "ROOT")
    root = (parse_path(given) if given else pyproject.parent if pyproject else origin).resolve()

    def directory(key: str, default: Path | str) -> Path:
        path = absolute(read.value(key, lambda v, _: parse_path(v), Path(default)), root)
        return read.confined(key, path, root) if read.source(key) in (None, PROJECT) else path

    return Settings(
        root=root,
        signatures_dir=directory("signatures_dir", "signatures"),
        compiled_dir=directory("compiled_dir", "compiled"),
        datasets_dir=directory("datasets_dir", "datasets"),
        cache_dir=directory("cache_dir", "") if read.source("cache_dir") == PROJECT else user_cache_dir(),
        default_models=tuple(read.value("default_models", parse_texts, ())),
        adapter_dirs=tuple(read.confined("adapter_dirs", absolute(parse_path(p), root), root)
                           if read.source("adapter_dirs") == PROJECT else absolute(parse_path(p), root)
                           for p in read.value("adapter_dirs", parse_texts, ())),
        unlisted_models=tuple(read.value("unlisted_models", parse_texts, ("*",))),
        strict=read.value("strict", parse_flag, False),
        section_roles=read.table("section_roles", parse_role),
        local_models={name: absolute(path, root)  # read only, through the weights' checks: a shared folder is fine
                      for name, path in read.table("local_models", lambda value, _: parse_path(value)).items()},
        local_threads=read.value("local_threads", parse_positive_int, None),
        models=read.table("models", lambda entry, _: entry),  # each entry's shape: the catalog's to judge
        rate_limits=read.table("rate_limits", lambda value, name: Limit.from_mapping(parse_mapping(value, name),
                                                                                     f"rate_limits.{name}")),
        health=read.whole("health", HealthPolicy.from_mapping),
    )
