"""PEP 562 lazy exports: a package names what it offers; the module behind a name is imported on
first use. Keeps ``import rosetta`` (and the runtime's imports) from pulling in pydantic & co."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, table: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` resolving ``name`` from ``table[name]`` (a module path) on demand."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later lookups skip this function
        return value

    return __getattr__
