"""Rendering: a signature + a model (+ knobs) → the exact prompt that model receives."""

from rosetta.render.prompt import Knobs, Message, RenderedPrompt
from rosetta.render.render import estimate_tokens, render

__all__ = ["Knobs", "Message", "RenderedPrompt", "estimate_tokens", "render"]
