"""Rendering: a signature + a model (+ knobs) → the exact prompt that model receives.

Names are imported on first use so that the runtime can load ``rosetta.render.prompt`` (compiled
prompts) without the renderer and the definition schema behind it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.lazy import lazy_exports

_LAZY = {
    "Knobs": "rosetta.render.prompt",
    "Message": "rosetta.render.prompt",
    "RenderedPrompt": "rosetta.render.prompt",
    "estimate_tokens": "rosetta.render.renderer",
    "render": "rosetta.render.renderer",
}
__all__ = list(_LAZY)

if TYPE_CHECKING:
    from rosetta.render.prompt import Knobs, Message, RenderedPrompt
    from rosetta.render.renderer import estimate_tokens, render


__getattr__ = lazy_exports(__name__, _LAZY)
