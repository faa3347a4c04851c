"""The rendered prompt: exactly what will be sent to one model, and how to send it.

A :class:`RenderedPrompt` is plain data (it is what a compiled artifact stores). ``to_litellm``
fills the input placeholders and returns ``litellm.completion`` kwargs; ``render_for_display``
gives the same prompt as one readable block for copy/paste (manual) mode.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from rosetta.errors import Problem, UsageError
from rosetta.providers.adapter import Delimiter, StructuredOutput, SystemPlacement, ToolEnvelope
from rosetta.signature import InputField, ToolSpec

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class Knobs(BaseModel):
    """Renderer choices an optimizer may search over; ``None`` means "the adapter decides"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    delimiter: Delimiter | None = None
    section_order: list[Literal["role", "context", "constraints", "format", "tools"]] | None = None
    reasoning: bool | None = None
    demo_ids: list[str] | None = None
    demo_count: int | None = None
    instructions: str | None = None  # replaces the body's role/context text
    structured_output: StructuredOutput | None = None
    phase: str = "default"  # which generation_params phase to use


class Message(BaseModel):
    """One chat message; user templates may hold ``{input}`` placeholders."""

    model_config = ConfigDict(frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class RenderedPrompt(BaseModel):
    """Everything sent to one model for one agent, plus how it was decided."""

    model_config = ConfigDict(frozen=True)

    agent: str
    model: str
    adapter: str
    model_class: str
    system: str | None
    system_placement: SystemPlacement
    demos: list[Message] = []
    demo_ids: list[str] = []
    user_blocks: list[tuple[str, str]] = []  # (input name, template holding its placeholder)
    inputs: list[InputField] = []
    tool_specs: list[ToolSpec] = []
    tools: list[dict[str, Any]] = []  # the provider's own envelope, for reading
    tool_envelope: ToolEnvelope
    structured_output: StructuredOutput | None = None
    output_schema: dict[str, Any] | None = None  # the agent's schema: answers are validated against it
    provider_schema: dict[str, Any] | None = None  # what the provider is sent
    request_params: dict[str, Any] = {}  # structured-output kwargs for litellm
    generation: dict[str, Any] = {}
    tokens: dict[str, int] = {}
    dropped: list[str] = []
    warnings: list[str] = []
    knobs: Knobs = Knobs()

    # -- sending -----------------------------------------------------------------------------

    def user_message(self, inputs: Mapping[str, Any]) -> str:
        """The final user turn with every placeholder filled; unknown or missing inputs are errors."""
        declared = {field.name: field for field in self.inputs}
        unknown = sorted(set(inputs) - set(declared))
        missing = sorted(name for name, f in declared.items() if f.required and inputs.get(name) in (None, ""))
        if unknown or missing:
            problems = []
            if missing:
                problems.append(Problem(f"missing value for input(s) {', '.join(missing)}", field="inputs",
                                        hint=f"pass {', '.join(f'{m}=...' for m in missing)}"))
            if unknown:
                problems.append(Problem(f"unknown input(s) {', '.join(unknown)}", field="inputs",
                                        hint=f"{self.agent} takes: {', '.join(declared)}"))
            raise UsageError(problems)
        blocks = []
        for name, template in self.user_blocks:
            value = inputs.get(name)
            if value is None:
                continue  # optional input not given: leave its block out
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            blocks.append(_PLACEHOLDER.sub(lambda m, n=name, t=text: t if m.group(1) == n else m.group(0), template))
        return "\n\n".join(blocks)

    def messages(self, inputs: Mapping[str, Any]) -> list[dict[str, str]]:
        """Chat messages for litellm (system placement applied)."""
        messages = [m.model_dump() for m in self.demos] + [{"role": "user", "content": self.user_message(inputs)}]
        if self.system:
            if self.system_placement is SystemPlacement.FIRST_USER_TURN:
                first = messages[0]
                messages[0] = {"role": "user", "content": f"{self.system}\n\n{first['content']}"}
            else:
                messages.insert(0, {"role": "system", "content": self.system})
        return messages

    def to_litellm(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """``litellm.completion`` kwargs: model, messages, tools, structured output, generation params."""
        kwargs: dict[str, Any] = {"model": self.model, "messages": self.messages(inputs), **self.generation}
        tools = [_openai_tool(spec) for spec in self.tool_specs]
        extra = dict(self.request_params)
        if "tools" in extra:
            tools += extra.pop("tools")
        if tools:
            kwargs["tools"] = tools
        kwargs.update(extra)
        return kwargs

    # -- reading -----------------------------------------------------------------------------

    def render_for_display(self, inputs: Mapping[str, Any] | None = None) -> str:
        """One text block for manual (copy/paste) mode: system context, examples, request, output."""
        parts = []
        if self.system:
            parts.append("=== SYSTEM CONTEXT ===\n" + self.system)
        if self.demos:
            lines = [f"[{m.role}]\n{m.content}" for m in self.demos]
            parts.append("=== EXAMPLES ===\n" + "\n\n".join(lines))
        if self.tools:
            parts.append("=== TOOLS ===\n" + json.dumps(self.tools, indent=2))
        request = self.user_message(inputs) if inputs is not None else "\n\n".join(t for _, t in self.user_blocks)
        parts.append("=== REQUEST ===\n" + request)
        if self.output_schema is not None:
            parts.append("=== OUTPUT INSTRUCTIONS ===\nAnswer with one JSON object valid against this schema:\n"
                         + json.dumps(self.output_schema, indent=2))
        return "\n\n".join(parts) + "\n"


def _openai_tool(spec: ToolSpec) -> dict[str, Any]:
    return {"type": "function",
            "function": {"name": spec.name, "description": spec.description, "parameters": spec.parameters}}


def tool_envelope(specs: list[ToolSpec], envelope: ToolEnvelope) -> list[dict[str, Any]]:
    """Tools in the shape the provider's own API uses (litellm translates from the OpenAI shape)."""
    if not specs:
        return []
    if envelope is ToolEnvelope.ANTHROPIC:
        return [{"name": s.name, "description": s.description, "input_schema": s.parameters} for s in specs]
    if envelope is ToolEnvelope.GOOGLE:
        return [{"function_declarations": [
            {"name": s.name, "description": s.description, "parameters": s.parameters} for s in specs]}]
    return [_openai_tool(s) for s in specs]
