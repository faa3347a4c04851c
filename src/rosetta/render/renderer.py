"""``render(signature, model, knobs)``: a pure function from the provider-neutral signature to the
exact prompt one model receives, following its adapter's rules and any knob overrides."""

from __future__ import annotations

import datetime

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, replace
from typing import Any

from rosetta.definition.document import Section
from rosetta.definition.vocabulary import Feature, RCCFRole, ReasoningStrategy
from rosetta.errors import Problem, RenderError
from rosetta.parts import Demo, ToolSpec
from rosetta.providers.adapter import Adapter, bundled_adapters, no_adapter
from rosetta.providers.catalog import ANY_MODEL, load_catalog
from rosetta.providers.kinds import Delimiter, ReasoningMode, StructuredOutput, SystemPlacement
from rosetta.providers.model_entries import CatalogModel
from rosetta.render.assemble import (
    assemble_system,
    block_content,
    group_sections,
    identity_text,
    input_block,
    section_text,
)
from rosetta.render.mechanisms import MECHANISMS, Request
from rosetta.render.prompt import (
    CachePrefix,
    DemoPool,
    Knobs,
    Message,
    RenderedPrompt,
    Retrieval,
    demo_turns,
    tool_envelope,
)
from rosetta.render.schemas import check_shape, gemini_subset, inline_refs, sanitize
from rosetta.signature import Signature

Composed = tuple[str, list[Message], dict[str, int]]
"""A composed prompt: the system text, the demo turns and the token counts."""


def estimate_tokens(text: str) -> int:
    """A fast, provider-neutral token estimate (~4 characters per token for English and JSON)."""
    return math.ceil(len(text) / 4)


def render(
    signature: Signature,
    model: str | CatalogModel,
    knobs: Knobs | None = None,
    *,
    adapters: dict[str, Adapter] | None = None,
    unlisted: bool | Iterable[str] = ANY_MODEL,
    today: datetime.date | None = None,
) -> RenderedPrompt:
    """The prompt for ``model`` (a name or catalog entry); raises :class:`RenderError` when the agent
    cannot work on that model. ``adapters`` defaults to the bundled ones; ``unlisted`` is the gate for
    names outside the catalog (default: any id litellm routes; see
    :meth:`~rosetta.providers.catalog.Catalog.resolve`). ``today``, when given, refuses a model
    retired by then: rendering reads no clock, so the caller (selection, compile, a command) that
    reads one passes its date in, and the same inputs always render the same prompt.

    Long on purpose: every decision is a named helper below, and this body is their wiring in the
    order the prompt is built (placement, delimiter, reasoning, mechanism, tools, budget, demos),
    which reads best in one place."""
    knobs = knobs or Knobs()
    adapters = adapters if adapters is not None else bundled_adapters()
    if isinstance(model, str):
        model = load_catalog().resolve(model, adapters, unlisted=unlisted)
    if model.adapter not in adapters:
        raise RenderError(no_adapter(model, adapters))
    adapter = adapters[model.adapter]
    if today is not None:
        load_catalog().refuse_retired(model, today)
    warnings: list[str] = []
    check_fit(signature, model)
    if signature.host_tools:
        warnings.append(f"{model.id} will not have the host tools {', '.join(signature.host_tools)} "
                        "(capabilities.allowed_tools): no request carries them; run the agent where a host provides "
                        "them, or declare them under `tools` with a JSON Schema")

    delimiter = knobs.delimiter or (
        Delimiter.XML if adapter.keep_xml_bodies and signature.body_format.value == "xml" else adapter.delimiter)
    order = list(knobs.section_order or adapter.section_order)
    reasoning = _reasoning(signature, adapter, model, knobs)
    mechanism = _mechanism(signature, adapter, model, knobs, warnings)
    provider_schema, request_params = _structured_output(signature, adapter, model, mechanism, warnings)
    tool_specs = [_tool_for(spec, f"tools[{i}].parameters", adapter, model, warnings)
                  for i, spec in enumerate(signature.tools)]

    generation = _generation(signature, model, knobs, warnings)
    budget = prompt_budget(signature, adapter, model, generation, knobs.phase)

    chosen, count = _choose_demos(signature, adapter, model, knobs)
    per_request = knobs.demo_selection == "nearest"
    # nearest demos differ per request: the budget is checked against the longest ones
    demos = sorted(chosen, key=_demo_size, reverse=True)[:count] if per_request else chosen[:count]
    compact = (",", ":")
    fixed_tokens = {
        "tools": estimate_tokens(json.dumps([asdict(s) for s in tool_specs], separators=compact)) if tool_specs else 0,
        "schema": estimate_tokens(json.dumps(provider_schema, separators=compact))
        if provider_schema is not None and mechanism is not None and MECHANISMS[mechanism].schema_in_request else 0,
    }

    user_blocks = tuple((field.name, input_block(field, delimiter)) for field in signature.inputs)

    def compose(sections: tuple[Section, ...], demos: list[Demo]) -> Composed:
        system = _system_text(signature, sections, delimiter, order, reasoning, adapter, mechanism, provider_schema,
                              opening="" if knobs.instructions is not None else identity_text(signature))
        demo_messages = [turn for demo in demos for turn in demo_turns(demo, user_blocks)]
        tokens = {"system": estimate_tokens(system),
                  "demos": sum(estimate_tokens(m.content) for m in demo_messages), **fixed_tokens}
        return system, demo_messages, {**tokens, "total": sum(tokens.values())}

    system, demo_messages, tokens, demos, dropped = _fit_budget(
        compose, _instructions(signature, knobs), demos, budget, signature, model, generation, delimiter)
    if dropped:
        warnings.append(f"over the {budget:,}-token prompt budget of {model.id}: dropped " + ", ".join(dropped))
    pool = DemoPool(len(demos), tuple(chosen), _retrieval(signature, knobs)) if per_request and demos else None
    if per_request:  # no fixed demo turns: each request gets its own from the pool
        demo_messages = []
        demos = list(chosen) if pool else []

    placement = adapter.system_prompt
    if model.prompt_style == "completion":
        placement = SystemPlacement.COMPLETION
    elif not model.capabilities.system_message:
        placement = SystemPlacement.FIRST_USER_TURN
    return RenderedPrompt(
        agent=signature.name,
        model=model.id,
        adapter=adapter.name,
        model_class=model.model_class,
        system=system or None,
        system_placement=placement,
        demos=tuple(demo_messages),
        demo_ids=tuple(d.id for d in demos),
        demo_pool=pool,
        user_blocks=user_blocks,
        inputs=tuple(signature.inputs),
        tool_specs=tuple(tool_specs),
        tools=tuple(tool_envelope(tool_specs, adapter.tool_envelope)),
        tool_envelope=adapter.tool_envelope,
        structured_output=mechanism,
        output_schema=signature.output_schema,
        provider_schema=provider_schema,
        request_params=request_params,
        generation=generation,
        tokens=tokens,
        dropped=tuple(dropped),
        warnings=tuple(warnings),
        sampling_params=model.capabilities.sampling_params,
        cache_prefix=_cache_prefix(adapter, model, placement, system, tokens, bool(demo_messages)),
        knobs=replace(knobs, delimiter=delimiter, section_order=tuple(order), reasoning=reasoning,
                      demo_ids=tuple(d.id for d in demos), demo_count=pool.count if pool else len(demos),
                      structured_output=mechanism, demo_selection="nearest" if pool else "fixed",
                      retrieval=pool.policy if pool else None),
    )


def _cache_prefix(adapter: Adapter, model: CatalogModel, placement: SystemPlacement, system: str,
                  tokens: dict[str, int], fixed_demos: bool) -> CachePrefix | None:
    """The stable prefix as the host's prompt cache sees it — the tools and system text, and the
    fixed demos when there are some (retrieved demos differ per request) — with the host's minimum
    (the model's own where the catalog gives one); marked for a host that caches only up to a mark
    when it is long enough. None for a host without a prompt cache, a prompt without system text, or
    one whose system text is no message of its own on a host that needs a mark (nothing is cached)."""
    cache = adapter.prompt_cache
    if cache is None or not system or placement is SystemPlacement.COMPLETION:
        return None
    explicit = cache.mode == "explicit"
    if explicit and placement not in (SystemPlacement.SEPARATE, SystemPlacement.SYSTEM_MESSAGE):
        return None  # the system text opens the first user turn: no block of its own to mark, nothing cached
    stable = tokens.get("tools", 0) + tokens["system"] + (tokens["demos"] if fixed_demos else 0)
    minimum = model.cache_min_tokens or cache.min_tokens
    return CachePrefix("demos" if fixed_demos else "system", stable, minimum, explicit and stable >= minimum)


def _retrieval(signature: Signature, knobs: Knobs) -> Retrieval | None:
    """The retrieval policy of per-request demos (None: nearest only); a label to balance must be
    a field of the output."""
    policy = knobs.retrieval
    if policy is None or policy.balance is None:
        return policy
    fields = (signature.output_schema or {}).get("properties") or {}
    if policy.balance not in fields:
        raise RenderError(Problem(f"retrieval.balance names {policy.balance!r}, which is not a field of "
                                  f"{signature.name}'s output", field="knobs.retrieval.balance",
                                  expected=" | ".join(fields) or "an output with named fields"))
    return policy


def _fit_budget(compose: Callable[[tuple[Section, ...], list[Demo]], Composed], sections: tuple[Section, ...],
                demos: list[Demo], budget: int, signature: Signature, model: CatalogModel, generation: dict[str, Any],
                delimiter: Delimiter) -> tuple[str, list[Message], dict[str, int], list[Demo], list[str]]:
    """Drop demos (last first), then context sections (last first), as few as make the prompt fit.

    The prompt is composed a few times, not once per part dropped (32,000 sections would take
    hours): the number of drops is worked out from each part's length, then checked by composing;
    should the check fail, every drop shortens the prompt, so bisection finds the fewest."""
    system, demo_messages, tokens = compose(sections, demos)
    if tokens["total"] <= budget:
        return system, demo_messages, tokens, demos, []
    optional = [s for s in sections if s.role.value in ("other", "context")]
    most = len(demos) + len(optional)

    def without(count: int) -> tuple[Section, ...]:
        """``sections`` less the last ``count`` optional ones."""
        gone = {id(s) for s in optional[len(optional) - count:]} if count else set()
        return tuple(s for s in sections if id(s) not in gone)

    def fits(drops: int) -> Composed | None:
        """The prompt with the last ``drops`` demos (then optional sections) dropped, if it fits."""
        composed = compose(without(max(0, drops - len(demos))), demos[:max(0, len(demos) - drops)])
        return composed if composed[2]["total"] <= budget else None

    def guess() -> int:
        """The drops that fit if each part's share of the prompt is its own length (true until a
        block empties): demos by their turns' tokens, sections by their text and separator."""
        over = tokens["total"] - budget
        pairs = [demo_messages[i:i + 2] for i in range(0, len(demo_messages), 2)]
        for count, pair in enumerate(reversed(pairs), start=1):
            over -= sum(estimate_tokens(m.content) for m in pair)
            if over <= 0:
                return count
        room = 4 * (budget - (tokens["total"] - tokens["demos"] - tokens["system"]))  # characters left for system
        length = len(system)
        for count, section in enumerate(reversed(optional), start=len(demos) + 1):
            text = section_text("context", section, delimiter)
            length -= len(text) + 2 if text.strip() else 0
            if length <= room:
                return count
        return most

    drops = guess()
    found = fits(drops)
    if found is None or (drops > 1 and fits(drops - 1) is not None):
        found = fits(most)
        if found is None:
            tokens = compose(without(len(optional)), [])[2]
            raise RenderError(Problem(
                f"{signature.name} needs about {tokens['total']:,} prompt tokens but {model.id} leaves {budget:,} "
                f"(context window {model.context_window:,}, {generation.get('max_tokens', 0):,} reserved for output)",
                field="portability.minimum_context_window",
                hint="shorten the definition, lower max_output_tokens, or choose a model with a larger window",
            ))
        low, high = 1, most  # fits(high) holds, fits(low - 1) does not
        while low < high:
            middle = (low + high) // 2
            if fits(middle) is not None:
                high = middle
            else:
                low = middle + 1
        drops, found = low, fits(low)
    assert found is not None  # the bisection ends on a number of drops that fits
    system, demo_messages, tokens = found
    names = [f"demo {d.id}" for d in reversed(demos)] + [f"section {s.title or s.key!r}" for s in reversed(optional)]
    return system, demo_messages, tokens, demos[:max(0, len(demos) - drops)], names[:drops]


# -- decisions -------------------------------------------------------------------------------


def check_fit(signature: Signature, model: CatalogModel) -> None:
    """Raise the :class:`RenderError` that refuses ``model`` for this agent (a window too small,
    tools or vision it lacks): the one check ``render``, ``compile`` and ``validate`` share."""
    if signature.minimum_context_window and signature.minimum_context_window > model.context_window:
        raise RenderError(Problem(
            f"{signature.name} needs a {signature.minimum_context_window:,}-token context window; "
            f"{model.id} has {model.context_window:,}",
            field="portability.minimum_context_window", hint="choose a model with a larger context window",
        ))
    needs_tools = Feature.TOOL_USE in signature.required_features or bool(signature.tools)
    if needs_tools and not model.capabilities.calls_tools:
        raise RenderError(Problem(
            f"{signature.name} uses tools but {model.id} cannot call tools",
            field="capabilities.required_features",
            hint="drop this model from portability.model_preferences, or pick one with tool_use",
        ))
    if Feature.VISION in signature.required_features and not model.capabilities.vision:
        raise RenderError(Problem(f"{signature.name} needs vision; {model.id} has none",
                                  field="capabilities.required_features"))


def _reasoning(signature: Signature, adapter: Adapter, model: CatalogModel, knobs: Knobs) -> bool:
    if knobs.reasoning is not None:
        return knobs.reasoning
    if model.prompt_style == "completion":
        return False  # a base model continues text; it does not follow "think step by step"
    if signature.reasoning_strategy is ReasoningStrategy.EXPLICIT_COT:
        return True
    if signature.reasoning_strategy is ReasoningStrategy.NONE or model.capabilities.builtin_reasoning:
        return False  # a model that reasons before it answers needs no instruction to
    if signature.output_schema is not None:
        return False  # the answer is the JSON value alone: "think step by step" would ask for prose it forbids
    return adapter.reasoning[model.model_class] is ReasoningMode.INJECT


def prompt_budget(signature: Signature, adapter: Adapter, model: CatalogModel, generation: dict[str, Any],
                  phase: str = "default") -> int:
    """Tokens the prompt may take on ``model``: the adapter's shares of its window, less the answer's
    ``max_tokens``, and at most the definition's ``max_input_tokens`` for the phase."""
    window = model.context_window
    budget: int = min(int(window * (adapter.budget.system + adapter.budget.tools + adapter.budget.history)),
                      window - generation.get("max_tokens", 0))
    requested = signature.generation_params.get(phase)
    if requested and requested.max_input_tokens:
        budget = min(budget, requested.max_input_tokens)
    return budget


def _mechanism(signature: Signature, adapter: Adapter, model: CatalogModel, knobs: Knobs,
               warnings: list[str]) -> StructuredOutput | None:
    if signature.output_schema is None:
        return None
    wanted = knobs.structured_output or model.structured_output or adapter.structured_output
    beside_tools = adapter.structured_output_with_tools
    if signature.tools and beside_tools is not None and wanted is not beside_tools:
        warnings.append(f"{model.id} refuses {wanted.value} beside function calling: the answer comes through "
                        f"{beside_tools.value} instead, since {signature.name} has tools")
        wanted = beside_tools
    if wanted is not StructuredOutput.PROMPT_SCHEMA and not model.capabilities.structured_output:
        warnings.append(f"{model.id} has no native structured output; the schema goes in the prompt instead")
        return StructuredOutput.PROMPT_SCHEMA
    return wanted


def _structured_output(signature: Signature, adapter: Adapter, model: CatalogModel,
                       mechanism: StructuredOutput | None,
                       warnings: list[str]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    if mechanism is None or signature.output_schema is None:
        return None, {}
    rules = MECHANISMS[mechanism]
    transforms = [t for t in adapter.schema_transforms
                  if rules.only_transforms is None or t.value in rules.only_transforms]
    schema, notes = sanitize(signature.output_schema, transforms, model.id)
    warnings += notes
    name = re.sub(r"[^A-Za-z0-9_-]", "_", signature.name)[:48] + "_output"
    return schema, rules.request(Request(schema, name, bool(signature.tools), model.capabilities.json_mode,
                                         model.capabilities.constrained_decoding))


def _tool_for(spec: ToolSpec, field: str, adapter: Adapter, model: CatalogModel, warnings: list[str]) -> ToolSpec:
    """Tool parameters in the subset the provider understands (same rules as output schemas)."""
    names = {t.value for t in adapter.schema_transforms}
    parameters = spec.parameters
    check_shape(parameters, field)
    if "gemini_subset" in names:
        parameters, notes = gemini_subset(parameters, model.id, field)
        warnings += [f"tool {spec.name}: {note}" for note in notes]
    elif "inline_refs" in names:
        parameters, _ = inline_refs(parameters, model.id, field)
    return replace(spec, parameters=parameters)


def _generation(signature: Signature, model: CatalogModel, knobs: Knobs, warnings: list[str]) -> dict[str, Any]:
    """The definition's parameters for the phase, clamped to what the model allows. A model that
    thinks by default spends max_tokens on thinking and answer alike: its reserve is added."""
    asked = signature.generation_params.get(knobs.phase) or signature.generation_params.get("default")
    params: dict[str, Any] = {}
    max_tokens = asked.max_output_tokens if asked and asked.max_output_tokens else min(model.max_output, 4096)
    if max_tokens > model.max_output:
        warnings.append(f"max_output_tokens {max_tokens} clamped to {model.id}'s limit {model.max_output}")
        max_tokens = model.max_output
    params["max_tokens"] = min(max_tokens + (model.thinking_reserve or 0), model.max_output)
    if asked:
        for key in ("temperature", "top_p", "seed"):
            value = getattr(asked, key)
            if value is not None:
                params[key] = value
        if asked.stop:
            params["stop"] = list(asked.stop)
    if not model.capabilities.sampling_params:
        for key in ("temperature", "top_p"):
            if params.pop(key, None) is not None:
                warnings.append(f"{model.id} takes no {key} (its API rejects sampling parameters); not sent")
    return params


def _choose_demos(signature: Signature, adapter: Adapter, model: CatalogModel,
                  knobs: Knobs) -> tuple[list[Demo], int]:
    """The demos named (in order) and how many of them a request gets."""
    by_id = {demo.id: demo for demo in signature.demos}
    if knobs.demo_ids is not None:
        unknown = [i for i in knobs.demo_ids if i not in by_id]
        if unknown:
            raise RenderError(Problem(f"unknown demo id(s) {unknown}", field="knobs.demo_ids",
                                      hint=f"known: {sorted(by_id)}"))
        chosen = [by_id[i] for i in knobs.demo_ids]
    else:
        chosen = list(signature.demos)
    low, high = signature.demo_range
    count = knobs.demo_count if knobs.demo_count is not None else adapter.few_shot[model.model_class]
    count = max(low, min(high, int(count)))
    return chosen, min(count, len(chosen))


def _demo_size(demo: Demo) -> int:
    return len(json.dumps(demo.inputs, ensure_ascii=False)) + len(json.dumps(demo.output, ensure_ascii=False))


def _instructions(signature: Signature, knobs: Knobs) -> tuple[Section, ...]:
    """The body's sections, led by the ``instructions`` knob where one is set. The knob takes the
    place of the identity sentence the frontmatter writes (who the agent is: role, expertise,
    persona), never of a section the body holds: a variant rewords the framing and cannot drop a
    rubric, a rule or a fact the definition states, in the Role block or any other, so a variant
    that passes ``--check`` says everything the definition says."""
    if knobs.instructions is None:
        return signature.instructions
    override = Section(key="instructions", title="", role=RCCFRole.ROLE, content=knobs.instructions, line=0)
    return (override, *signature.instructions)


def _system_text(signature: Signature, sections: tuple[Section, ...], delimiter: Delimiter, order: list[str],
                 reasoning: bool, adapter: Adapter, mechanism: StructuredOutput | None,
                 provider_schema: dict[str, Any] | None, *, opening: str) -> str:
    """The system text; ``opening`` starts the Role block (the identity sentence, or nothing where an
    instruction takes its place)."""
    groups = group_sections(sections)
    constraints_extra = []
    if signature.forbidden_actions:
        constraints_extra.append("Never:\n" + "\n".join(f"- {a}" for a in signature.forbidden_actions))
    if signature.output_rules:
        constraints_extra.append("Output rules:\n" + "\n".join(f"- {_rule_text(r)}" for r in signature.output_rules))
    format_extra = []
    if signature.output_levels:
        format_extra.append("Write the answer at these levels, each under its own heading: "
                            + ", ".join(signature.output_levels) + ".")
    if signature.output_template:
        format_extra.append("Follow this template:\n" + signature.output_template.strip())
    if signature.output_location:
        format_extra.append(f"Your answer is saved as `{signature.output_location}`: write it as that "
                            "document's complete content.")
    if mechanism is not None and provider_schema is not None:
        format_extra.append(MECHANISMS[mechanism].instruction(provider_schema))
    if reasoning:
        format_extra.append(adapter.reasoning_instruction)
    tools_text = "\n".join(f"- `{t.name}`: {t.description}" for t in signature.tools)
    blocks = {
        "role": block_content("role", groups["role"], [], delimiter),
        "context": block_content("context", groups["context"], [], delimiter),
        "constraints": block_content("constraints", groups["constraints"], constraints_extra, delimiter),
        "format": block_content("format", groups["format"], format_extra, delimiter),
        "tools": tools_text,
    }
    if opening:
        blocks["role"] = f"{opening}\n\n{blocks['role']}".strip()
    return assemble_system(blocks, order, delimiter)


def _rule_text(rule: str) -> str:
    """An output rule as the prompt states it: a rule name reads as words (no_secrets_in_output →
    "no secrets in output"); a sentence, or a rule holding an expression, is left as written."""
    return rule.replace("_", " ") if " " not in rule else rule
