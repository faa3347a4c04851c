"""The one way rosetta imports litellm for calls: offline (see :mod:`rosetta.third_party`),
with the embedded ``local/`` provider registered."""

from __future__ import annotations

from types import ModuleType


def import_litellm() -> ModuleType:
    """litellm, offline, with ``local/`` models served in-process (cheap to register: llama.cpp
    loads on the first local call)."""
    from rosetta.local.provider import install
    from rosetta import third_party

    module = third_party.import_litellm()
    install(module)
    return module
