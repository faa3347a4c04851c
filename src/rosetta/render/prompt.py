"""The rendered prompt: exactly what will be sent to one model, and how to send it.

A :class:`RenderedPrompt` is plain data (it is what a compiled artifact stores). ``to_litellm``
fills the input placeholders and returns ``litellm.completion`` kwargs; ``render_for_display``
gives the same prompt as one readable block for copy/paste (manual) mode.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from enum import Enum
from typing import Any, Literal

from rosetta.errors import Problem, UsageError
from rosetta.parts import Demo, InputField, ToolSpec
from rosetta.providers.kinds import ANSWER_CUE, Delimiter, StructuredOutput, SystemPlacement, ToolEnvelope
from rosetta.render.nearest import input_text, rank

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


_BLOCKS = ("role", "context", "constraints", "format", "tools")
DEMO_SELECTIONS = ("fixed", "nearest")
"""``fixed``: the same demos for every request; ``nearest``: per request, the ``demo_count`` demos
of ``demo_ids`` whose inputs are most similar to it (see :mod:`rosetta.render.nearest`)."""


RETRIEVAL_ORDERS = ("similar_last", "similar_first")
"""Where the most similar demo goes: next to the request (last, the default) or first."""


@dataclass(frozen=True)
class Retrieval:
    """How per-request demos are chosen from the pool (``demo_selection: nearest``), beyond nearness:
    see :func:`rosetta.render.nearest.rank`. The defaults are plain nearest demos."""

    diversity: float = 0.0  # maximal marginal relevance: 0 ranks by similarity alone, 1 by novelty alone
    balance: str | None = None  # an output field: the neighbours take its labels in turn
    order: str = "similar_last"  # one of RETRIEVAL_ORDERS

    def __post_init__(self) -> None:
        if isinstance(self.diversity, bool) or not isinstance(self.diversity, (int, float)) \
                or not 0.0 <= self.diversity <= 1.0:
            raise UsageError(Problem(f"retrieval.diversity {self.diversity!r} is not a number from 0 to 1",
                                     field="knobs.retrieval.diversity", expected="e.g. 0.3 (0: nearest only)"))
        object.__setattr__(self, "diversity", float(self.diversity))
        if self.balance is not None and (not isinstance(self.balance, str) or not self.balance):
            raise UsageError(Problem(f"retrieval.balance {self.balance!r} is not an output field's name",
                                     field="knobs.retrieval.balance"))
        if self.order not in RETRIEVAL_ORDERS:
            raise UsageError(Problem(f"unknown retrieval.order {self.order!r}", field="knobs.retrieval.order",
                                     expected=" | ".join(RETRIEVAL_ORDERS)))

    @classmethod
    def of(cls, value: Any) -> Retrieval | None:
        """A policy from plain data (YAML, JSON) or itself; None stays None."""
        if value is None or isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise UsageError(Problem(f"retrieval must be a table, not {type(value).__name__}", field="knobs.retrieval",
                                     expected="{diversity: 0.3, balance: label, order: similar_last}"))
        unknown = sorted(set(value) - {f.name for f in fields(cls)})
        if unknown:
            raise UsageError(Problem(f"unknown retrieval setting(s) {', '.join(unknown)}", field="knobs.retrieval",
                                     expected="diversity, balance, order"))
        return cls(**value)


@dataclass(frozen=True)
class Knobs:
    """Renderer choices an optimizer may search over; ``None`` means "the adapter decides"."""

    delimiter: Delimiter | None = None
    section_order: tuple[str, ...] | None = None
    reasoning: bool | None = None
    demo_ids: tuple[str, ...] | None = None
    demo_count: int | None = None
    instructions: str | None = None  # replaces the Role: the identity sentence and Role sections
    structured_output: StructuredOutput | None = None
    phase: str = "default"  # which generation_params phase to use
    demo_selection: str = "fixed"  # one of DEMO_SELECTIONS
    retrieval: Retrieval | None = None  # how "nearest" demos are chosen (None: nearest only)

    def __post_init__(self) -> None:
        # accept plain strings and lists (YAML, JSON, CLI) and check them once, here
        try:
            if self.delimiter is not None:
                object.__setattr__(self, "delimiter", Delimiter(self.delimiter))
            if self.structured_output is not None:
                object.__setattr__(self, "structured_output", StructuredOutput(self.structured_output))
        except ValueError as exc:
            raise UsageError(Problem(str(exc), field="knobs")) from None
        if self.section_order is not None:
            order = tuple(self.section_order)
            unknown = [b for b in order if b not in _BLOCKS]
            if unknown or len(set(order)) != len(order):
                raise UsageError(Problem(f"section_order {list(order)} must name distinct blocks of {_BLOCKS}",
                                         field="knobs.section_order"))
            object.__setattr__(self, "section_order", order)
        if self.demo_ids is not None:
            object.__setattr__(self, "demo_ids", tuple(self.demo_ids))
        if self.demo_count is not None and self.demo_count < 0:
            raise UsageError(Problem("demo_count must not be negative", field="knobs.demo_count"))
        if self.demo_selection not in DEMO_SELECTIONS:
            raise UsageError(Problem(f"unknown demo_selection {self.demo_selection!r}", field="knobs.demo_selection",
                                     expected=" | ".join(DEMO_SELECTIONS)))
        object.__setattr__(self, "retrieval", Retrieval.of(self.retrieval))

    def to_dict(self) -> dict[str, Any]:
        """Plain data (enums as their values, tuples as lists) for artifacts and JSON; the default
        demo selection and retrieval are left out, so artifacts written before they existed keep
        their bytes."""
        return _knobs_plain(self)


@dataclass(frozen=True)
class Message:
    """One chat message; user templates may hold ``{input}`` placeholders."""

    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class CachePrefix:
    """The prompt's stable prefix — tools and system text, and the fixed demos after it — as the
    host's prompt cache sees it: how many tokens (estimated) it holds, the shortest prefix the host
    caches, and whether the request marks where it ends (hosts that cache only up to a mark:
    Anthropic, Bedrock, Vertex AI; hosts that cache on their own, OpenAI and Gemini, get no mark)."""

    after: Literal["system", "demos"]
    tokens: int
    minimum: int
    marked: bool

    @property
    def cached(self) -> bool:
        """Whether the host caches it: long enough (a host that needs a mark gets one exactly then)."""
        return self.tokens >= self.minimum

    def describe(self) -> str:
        """One line for ``rosetta render``: what the host caches of this prompt."""
        prefix = f"the stable prefix (up to the {'fixed demos' if self.after == 'demos' else 'system text'}) is " \
                 f"~{self.tokens:,} tokens"
        if not self.cached:
            return f"prompt cache: {prefix}, under the host's {self.minimum:,}-token minimum: not cached"
        if self.marked:
            return f"prompt cache: {prefix}, marked with cache_control where it ends"
        return (f"prompt cache: {prefix}, first in every request; the host caches a prefix of "
                f"{self.minimum:,}+ tokens on its own")


CACHE_CONTROL = {"type": "ephemeral"}
"""The mark on the last block of the stable prefix (Anthropic's; litellm turns it into Bedrock's cachePoint)."""


@dataclass(frozen=True)
class DemoPool:
    """Demos chosen per request: ``count`` of ``demos`` by their nearness to each request's inputs,
    under the ``policy`` (None: the nearest, the most similar last)."""

    count: int
    demos: tuple[Demo, ...]
    policy: Retrieval | None = None

    def choose(self, inputs: Mapping[str, Any]) -> tuple[Demo, ...]:
        """This request's demos, in the order they are shown."""
        policy = self.policy or Retrieval()
        labels = [str(d.output.get(policy.balance)) if isinstance(d.output, Mapping) else str(d.output)
                  for d in self.demos] if policy.balance else None
        ranked = rank(input_text(inputs), [input_text(d.inputs) for d in self.demos], self.count,
                      diversity=policy.diversity, labels=labels)
        chosen = tuple(self.demos[i] for i in ranked)
        return chosen[::-1] if policy.order == "similar_last" else chosen


def placeholder(name: str) -> str:
    """How a request shown without its inputs marks where input ``name`` goes: ``{{report}}``, which
    cannot be mistaken for the ``<report>`` tags some models' templates wrap an input in."""
    return "{{" + name + "}}"


@dataclass(frozen=True)
class RenderedPrompt:
    """Everything sent to one model for one agent, plus how it was decided."""

    agent: str
    model: str
    adapter: str
    model_class: str
    system: str | None
    system_placement: SystemPlacement
    tool_envelope: ToolEnvelope
    demos: tuple[Message, ...] = ()
    demo_ids: tuple[str, ...] = ()
    demo_pool: DemoPool | None = None  # set: ``demos`` is empty and each request gets its nearest
    user_blocks: tuple[tuple[str, str], ...] = ()  # (input name, template holding its placeholder)
    inputs: tuple[InputField, ...] = ()
    tool_specs: tuple[ToolSpec, ...] = ()
    tools: tuple[dict[str, Any], ...] = ()  # the provider's own envelope, for reading
    structured_output: StructuredOutput | None = None
    output_schema: dict[str, Any] | None = None  # the agent's schema: answers are validated against it
    provider_schema: dict[str, Any] | None = None  # what the provider is sent
    request_params: dict[str, Any] = field(default_factory=dict)  # structured-output kwargs for litellm
    generation: dict[str, Any] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    sampling_params: bool = True  # False: the model rejects temperature / top_p, so none is ever sent
    knobs: Knobs = field(default_factory=Knobs)
    cache_prefix: CachePrefix | None = None  # set where the host caches prompts: its stable prefix, marked or not

    # -- plain data --------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-compatible data in field order (what artifacts store); an absent demo pool and
        accepted sampling parameters are left out, so prompts without them keep the bytes (and cache
        keys) they always had."""
        data: dict[str, Any] = _plain(self)
        data["knobs"] = _knobs_plain(self.knobs)
        if self.demo_pool is None:
            del data["demo_pool"]
        elif self.demo_pool.policy is None:
            del data["demo_pool"]["policy"]
        if self.sampling_params:
            del data["sampling_params"]
        if self.cache_prefix is None:
            del data["cache_prefix"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RenderedPrompt:
        """Rebuild from :meth:`to_dict` output; raises ``ValueError`` on a malformed document."""
        try:
            values = dict(data)
            values["system_placement"] = SystemPlacement(values["system_placement"])
            values["tool_envelope"] = ToolEnvelope(values["tool_envelope"])
            if values.get("structured_output") is not None:
                values["structured_output"] = StructuredOutput(values["structured_output"])
            values["demos"] = tuple(Message(**m) for m in values.get("demos", ()))
            values["demo_ids"] = tuple(values.get("demo_ids", ()))
            if values.get("demo_pool") is not None:
                pool = values["demo_pool"]
                values["demo_pool"] = DemoPool(int(pool["count"]), tuple(Demo(**d) for d in pool["demos"]),
                                               Retrieval.of(pool.get("policy")))
            values["user_blocks"] = tuple((name, template) for name, template in values.get("user_blocks", ()))
            values["inputs"] = tuple(InputField(**f) for f in values.get("inputs", ()))
            values["tool_specs"] = tuple(ToolSpec(**t) for t in values.get("tool_specs", ()))
            values["tools"] = tuple(values.get("tools", ()))
            values["dropped"] = tuple(values.get("dropped", ()))
            values["warnings"] = tuple(values.get("warnings", ()))
            values["knobs"] = Knobs(**values.get("knobs", {}))
            if "cache_breakpoint" in values:  # an artifact of rosetta 0.x before the prefix was recorded everywhere
                mark = values.pop("cache_breakpoint")
                values["cache_prefix"] = {**mark, "minimum": mark["tokens"], "marked": True} if mark else None
            if values.get("cache_prefix") is not None:
                values["cache_prefix"] = CachePrefix(**values["cache_prefix"])
            return cls(**values)
        except (KeyError, TypeError, ValueError, UsageError) as exc:
            raise ValueError(f"not a rendered prompt: {exc}") from None

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
                                        hint="give it in the inputs: {" + ", ".join(f"{m!r}: ..." for m in missing)
                                             + "} (`rosetta run`: " + " ".join(f"-i {m}=..." for m in missing) + ")"))
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
            blocks.append(_PLACEHOLDER.sub(lambda m: text if m.group(1) == name else m.group(0), template))
        return "\n\n".join(blocks)

    def messages(self, inputs: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Chat messages for litellm (system placement applied), the stable prefix's last message
        marked where the host caches only up to a mark (:attr:`cache_prefix`).

        A base model (``completion`` placement) gets one plain text instead: instructions, each
        example as request + ``Answer:`` + answer, then the request, ending where the answer begins.
        """
        demos = self.demos_for(inputs)
        if self.system_placement is SystemPlacement.COMPLETION:
            parts = [self.system] if self.system else []
            pairs = zip(demos[::2], demos[1::2])
            parts += [f"{user.content}\n{ANSWER_CUE} {answer.content}" for user, answer in pairs]
            parts.append(f"{self.user_message(inputs)}\n{ANSWER_CUE}")
            return [{"role": "user", "content": "\n\n".join(parts)}]
        messages: list[dict[str, Any]] = [{"role": m.role, "content": m.content} for m in demos]
        messages.append({"role": "user", "content": self.user_message(inputs)})
        if self.system:
            if self.system_placement is SystemPlacement.FIRST_USER_TURN:
                first = messages[0]
                messages[0] = {"role": "user", "content": f"{self.system}\n\n{first['content']}"}
            else:
                messages.insert(0, {"role": "system", "content": self.system})
        mark = self.cache_prefix
        if mark is not None and mark.marked:
            at = len(self.demos) if mark.after == "demos" else 0  # the system message is first
            messages[at] = {**messages[at], "content": [{"type": "text", "text": messages[at]["content"],
                                                         "cache_control": dict(CACHE_CONTROL)}]}
        return messages

    def demos_for(self, inputs: Mapping[str, Any]) -> tuple[Message, ...]:
        """The demo turns sent with ``inputs``: the fixed ones, or the pool's nearest."""
        if self.demo_pool is None:
            return self.demos
        return tuple(turn for demo in self.demo_pool.choose(inputs) for turn in demo_turns(demo, self.user_blocks))

    def to_litellm(self, inputs: Mapping[str, Any] | None = None, *,
                   messages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """``litellm.completion`` kwargs: model, messages, tools, structured output, generation params.

        ``messages`` (a conversation so far) replaces the messages rendered from ``inputs``.
        """
        if messages is None:
            messages = self.messages(inputs if inputs is not None else {})
        return {"model": self.model, "messages": messages, **self.request_parameters()}

    def request_parameters(self) -> dict[str, Any]:
        """Every request parameter this prompt decides besides model and messages: generation
        parameters, tools, structured output and the adapter's other request parameters."""
        params: dict[str, Any] = dict(self.generation)
        tools = [_openai_tool(spec) for spec in self.tool_specs]
        extra = dict(self.request_params)
        if "tools" in extra:
            tools += extra.pop("tools")
        if tools:
            params["tools"] = tools
        params.update(extra)
        return params

    # -- reading -----------------------------------------------------------------------------

    def request_text(self, inputs: Mapping[str, Any] | None = None) -> str:
        """Exactly the request litellm is sent for ``inputs`` (``{{name}}`` placeholders for inputs not
        given), readable: each message by role, then every other parameter (tools, tool choice,
        structured output, generation). ``rosetta render``, ``show`` and ``diff`` print this."""
        filled = {field.name: placeholder(field.name) for field in self.inputs} | dict(inputs or {})
        kwargs = self.to_litellm(filled)
        parts = [f"model: {kwargs.pop('model')}"]
        for message in kwargs.pop("messages"):
            parts.append(f"--- {message['role']} ---\n" + _readable(message.get("content")))
        plain = {key: value for key, value in sorted(kwargs.items()) if not isinstance(value, (dict, list))}
        for key, value in sorted(kwargs.items()):
            if key not in plain:
                parts.append(f"--- {key} ---\n" + json.dumps(value, indent=2, ensure_ascii=False))
        if plain:
            parts.append("--- parameters ---\n"
                         + "\n".join(f"{key}: {json.dumps(value)}" for key, value in plain.items()))
        return "\n".join(parts) + "\n"

    def render_for_display(self, inputs: Mapping[str, Any] | None = None) -> str:
        """One text block for manual (copy/paste) mode: system context, examples, request, output.

        A completion-style prompt is shown exactly as the model receives it.
        """
        if self.system_placement is SystemPlacement.COMPLETION and inputs is not None:
            return str(self.messages(inputs)[0]["content"]) + "\n"
        parts = []
        if self.system:
            parts.append("=== SYSTEM CONTEXT ===\n" + self.system)
        demos = self.demos_for(inputs) if inputs is not None else self.demos
        if demos:
            lines = [f"[{m.role}]\n{m.content}" for m in demos]
            parts.append("=== EXAMPLES ===\n" + "\n\n".join(lines))
        elif self.demo_pool is not None:
            parts.append(f"=== EXAMPLES ===\nthe {self.demo_pool.count} of {len(self.demo_pool.demos)} pooled examples "
                         "nearest to each request")
        if self.tools:
            parts.append("=== TOOLS ===\n" + json.dumps(self.tools, indent=2))
            parts.append(MANUAL_TOOLS.format(names=", ".join(spec.name for spec in self.tool_specs)))
        request = self.user_message(inputs) if inputs is not None else "\n\n".join(t for _, t in self.user_blocks)
        parts.append("=== REQUEST ===\n" + request)
        if self.output_schema is not None and not self._schema_in_text():
            parts.append("=== OUTPUT INSTRUCTIONS ===\nAnswer with one JSON object valid against this schema:\n"
                         + json.dumps(self.output_schema, indent=2))
        return "\n\n".join(parts) + "\n"


    def _schema_in_text(self) -> bool:
        """Whether the system text already asks for the schema (it is written in the prompt, not sent
        in the request): manual mode then does not repeat it."""
        from rosetta.render.mechanisms import MECHANISMS

        return self.structured_output is not None and not MECHANISMS[self.structured_output].schema_in_request


MANUAL_TOOLS = """=== USING THE TOOLS HERE ===
The tools above ({names}) cannot be called from this chat. To use one, reply with only the line
CALL <tool name> <arguments as one JSON object>
and wait: its result comes back as a message starting RESULT <tool name>:. Call as many as you need,
one per reply; then give your final answer."""
"""How a copy/paste prompt explains tools: the person pasting runs each call and pastes its result
back into the chat, then gives rosetta the final answer (``rosetta run --manual`` says so too)."""


def _readable(content: Any) -> str:
    """A message's content as :meth:`RenderedPrompt.request_text` shows it: text as written (text
    blocks one after another, a cache mark as its own line where the cached prefix ends), anything
    else as JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return "\n".join(str(block["text"]) + (f"\n[cache_control: {block['cache_control']['type']} — the cached "
                                               "prefix ends here]" if block.get("cache_control") else "")
                         for block in content)
    return json.dumps(content, indent=2, ensure_ascii=False)


def demo_turns(demo: Demo, user_blocks: tuple[tuple[str, str], ...]) -> tuple[Message, Message]:
    """One demo as a request (the inputs in the request's own blocks) and its answer."""
    blocks = []
    for name, template in user_blocks:
        if name in demo.inputs:
            value = demo.inputs[name]
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            blocks.append(template.replace("{" + name + "}", text))
    answer = demo.output if isinstance(demo.output, str) else json.dumps(demo.output, ensure_ascii=False)
    return Message(role="user", content="\n\n".join(blocks)), Message(role="assistant", content=answer)


def _knobs_plain(knobs: Knobs) -> dict[str, Any]:
    data: dict[str, Any] = _plain(knobs)
    if data.get("demo_selection") == "fixed":
        del data["demo_selection"]
    if data.get("retrieval") is None:
        del data["retrieval"]
    return data


def _plain(value: Any) -> Any:
    """Dataclasses, enums and tuples → dicts, values and lists (one walk, no deep copies)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


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
