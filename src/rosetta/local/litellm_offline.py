"""The one way rosetta imports litellm for calls: offline (see :mod:`rosetta.providers.model_map`),
with the embedded ``local/`` provider registered."""

from __future__ import annotations

from types import ModuleType


def import_litellm() -> ModuleType:
    """litellm, offline, with ``local/`` models served in-process (cheap to register: llama.cpp
    loads on the first local call)."""
    from rosetta.local.provider import install
    from rosetta.providers.model_map import offline_litellm

    module = offline_litellm()
    install(module)
    return module
