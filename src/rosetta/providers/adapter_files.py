"""Where adapter files are and what they hash to, without validating them: the runtime checks an
artifact's ``adapter_sha256`` against these digests on start-up paths that must not import pydantic.
:func:`rosetta.providers.adapter.load_adapters` reads the same files in the same order."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path

BUNDLED = ("anthropic", "openai", "google", "open-source")
"""The adapters rosetta ships, in load order."""

_NAME_LINE = re.compile(r"^name:[ \t]*['\"]?([^'\"#\s]+)", re.MULTILINE)


def adapter_paths(extra_dirs: Iterable[str | Path] = ()) -> Iterator[Path]:
    """The bundled adapter files, then every ``*.y*ml`` of each extra directory (later ones win).
    The caller checks that each directory exists (see ``load_adapters``)."""
    bundled = resources.files("rosetta.providers") / "adapters"
    for name in BUNDLED:
        with resources.as_file(bundled / f"{name}.yaml") as path:
            yield path
    for directory in extra_dirs:
        yield from sorted(Path(directory).glob("*.y*ml"))


def adapter_digest(text: str) -> str:
    """sha256 of an adapter file's text (as read by ``read_text``), the provenance artifacts record."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def adapter_digests(extra_dirs: Iterable[str | Path] = ()) -> dict[str, str]:
    """adapter name → digest of the file that defines it now (an unreadable file is left out)."""
    from rosetta.definition.frontmatter import read_text
    from rosetta.errors import RosettaError

    digests: dict[str, str] = {}
    for path in adapter_paths(extra_dirs):
        try:
            text = read_text(path)
        except RosettaError:
            continue
        match = _NAME_LINE.search(text)
        if match:
            digests[match.group(1)] = adapter_digest(text)
    return digests
