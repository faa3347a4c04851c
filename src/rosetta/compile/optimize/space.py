"""The search space: the renderer's knobs, restricted to what the target model's adapter allows.

Every dimension is an optuna categorical or integer whose first choice is the unoptimized
render, so the default prompt is one point of the space (enqueued as trial 0). Demo sets are
ordered candidate lists from train: set 0 is train's first rows as the dataset lists them (the
plain k-shot prompt, as DSPy's candidate sets start with the unshuffled train set; enqueued as
trial 1), the rest seeded draws — labeled examples, plus "bootstrapped" ones whose output is the
model's own correct answer. A trial uses the first ``demo_count`` of one set, forwards or
reversed; set -1 means the definition's own demos, and set -2 (``NEAREST``) the ``demo_count``
labeled train rows nearest to each request (chosen per request; enqueued as trial 2).
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from rosetta.parts import Demo
from rosetta.providers.kinds import Delimiter, StructuredOutput
from rosetta.render.prompt import Knobs

SPACE_VERSION = 3
"""Part of the study's name: bumped when a trial's params come to mean another prompt (as when demo
set 0 became train's first rows), so a journal from an older rosetta is not resumed and misread."""

NEAREST = -2
"""The demo set that is not a set: per request, the train rows nearest to it."""

AUTO = "auto"
"""A categorical choice meaning "what the adapter would pick"."""

SECTION_ORDERS = {
    "rccf": ("role", "context", "constraints", "format", "tools"),
    "constraints-first": ("role", "constraints", "context", "format", "tools"),
    "format-first": ("role", "format", "context", "constraints", "tools"),
}


@dataclass(frozen=True)
class SearchSpace:
    """The choices of one (agent, model) study; :meth:`knobs` turns a trial's params into knobs."""

    instructions: tuple[str | None, ...] = (None,)  # None: the definition's own text; then the terse one
    demo_sets: tuple[tuple[str, ...], ...] = ()
    demo_counts: tuple[int, int] = (0, 0)
    reasoning: tuple[str, ...] = (AUTO,)
    section_orders: tuple[str, ...] = (AUTO,)
    delimiters: tuple[str, ...] = (AUTO,)
    structured_outputs: tuple[str, ...] = (AUTO,)
    demos: tuple[Demo, ...] = field(default=(), repr=False)  # every demo a set may name
    own_demo_ids: tuple[str, ...] = ()  # the definition's own demos (what the unoptimized render uses)
    nearest_pool: tuple[str, ...] = ()  # labeled train rows a nearest-demos prompt picks from (empty: not searched)
    notes: tuple[str, ...] = ()

    def suggest(self, trial: Any) -> dict[str, Any]:
        """Ask ``trial`` for one value of every dimension that has more than one choice."""
        params: dict[str, Any] = {}
        if len(self.instructions) > 1:
            params["instruction"] = trial.suggest_categorical("instruction", list(range(len(self.instructions))))
        if self.demo_sets and self.demo_counts[1] > 0:
            nearest = [NEAREST] if self.nearest_pool else []
            params["demo_set"] = trial.suggest_categorical("demo_set", [*nearest, *range(-1, len(self.demo_sets))])
            low, high = self.demo_counts
            params["demo_count"] = trial.suggest_int("demo_count", low, high) if high > low else low
            params["demo_order"] = trial.suggest_categorical("demo_order", ["forward", "reverse"])
        for name, choices in (("reasoning", self.reasoning), ("section_order", self.section_orders),
                              ("delimiter", self.delimiters), ("structured_output", self.structured_outputs)):
            if len(choices) > 1:
                params[name] = trial.suggest_categorical(name, list(choices))
        return params

    def default_params(self) -> dict[str, Any]:
        """The params of the unoptimized render (trial 0)."""
        params: dict[str, Any] = {}
        if len(self.instructions) > 1:
            params["instruction"] = 0
        if self.demo_sets and self.demo_counts[1] > 0:
            params.update(demo_set=-1, demo_order="forward", demo_count=self.demo_counts[0])
        for name, choices in (("reasoning", self.reasoning), ("section_order", self.section_orders),
                              ("delimiter", self.delimiters), ("structured_output", self.structured_outputs)):
            if len(choices) > 1:
                params[name] = choices[0]
        return params

    def few_shot_params(self) -> dict[str, Any] | None:
        """The unoptimized render with demo set 0 at the largest count: the plain k-shot prompt,
        the first variant worth trying on a small model (trial 1); None when demos are not searched."""
        if not (self.demo_sets and self.demo_counts[1] > 0):
            return None
        return {**self.default_params(), "demo_set": 0, "demo_count": self.demo_counts[1], "demo_order": "forward"}

    def nearest_params(self) -> dict[str, Any] | None:
        """The unoptimized render with the most nearest demos a request may get (trial 2: DSPy's
        KNNFewShot idea, the variant most likely to help a small model); None when not searched."""
        if not (self.nearest_pool and self.demo_counts[1] > 0):
            return None
        return {**self.default_params(), "demo_set": NEAREST, "demo_count": self.demo_counts[1],
                "demo_order": "forward"}

    def knobs(self, params: dict[str, Any]) -> Knobs:
        """Renderer knobs for a trial's params (absent params keep the adapter's choice)."""
        values: dict[str, Any] = {}
        instruction = self.instructions[params.get("instruction", 0)]
        if instruction is not None:
            values["instructions"] = instruction
        if params.get("demo_set") == NEAREST:  # the order is the similarity's: demo_order does not apply
            values.update(demo_ids=self.nearest_pool, demo_count=params["demo_count"], demo_selection="nearest")
        elif params.get("demo_set", -1) >= 0:
            chosen = list(self.demo_sets[params["demo_set"]][: params["demo_count"]])
            if params.get("demo_order") == "reverse":
                chosen.reverse()
            values.update(demo_ids=tuple(chosen), demo_count=len(chosen))
        else:  # only the definition's own demos, chosen as the adapter would: the unoptimized render
            values["demo_ids"] = self.own_demo_ids
        reasoning = params.get("reasoning", AUTO)
        if reasoning != AUTO:
            values["reasoning"] = reasoning == "on"
        order = params.get("section_order", AUTO)
        if order != AUTO:
            values["section_order"] = SECTION_ORDERS[order]
        for name in ("delimiter", "structured_output"):
            value = params.get(name, AUTO)
            if value != AUTO:
                values[name] = value
        return Knobs(**values)

    def size(self) -> int:
        """How many distinct prompts the space holds (for progress text)."""
        total = len(self.instructions) * len(self.reasoning) * len(self.section_orders) * len(self.delimiters) \
            * len(self.structured_outputs)
        if self.demo_sets and self.demo_counts[1] > 0:
            counts = self.demo_counts[1] - self.demo_counts[0] + 1
            total *= len(self.demo_sets) * counts * 2 + 1 + (counts if self.nearest_pool else 0)
        return total

    def describe(self) -> dict[str, Any]:
        """Plain data for artifacts and ``--dry-run``."""
        return {
            "instructions": len(self.instructions),
            "demo_sets": len(self.demo_sets),
            "demo_count": list(self.demo_counts),
            "nearest_demos": len(self.nearest_pool),
            "reasoning": list(self.reasoning),
            "section_order": list(self.section_orders),
            "delimiter": list(self.delimiters),
            "structured_output": list(self.structured_outputs),
            "size": self.size(),
        }


def build_space(signature: Any, model: Any, adapter: Any, train: tuple[Any, ...], *,
                instructions: tuple[str, ...] = (), bootstrapped: tuple[Demo, ...] = (),
                demo_sets: int = 8, seed: int = 0, label_of: Any = None, nearest: bool = True) -> SearchSpace:
    """The space for ``signature`` on ``model``; ``label_of(output)`` groups train rows for
    stratified demo sets (None: no grouping)."""
    notes: list[str] = []
    low, high = signature.demo_range
    labeled = tuple(Demo(id=f"train:{e.id}", inputs=e.inputs, output=e.output) for e in train)
    pool = labeled + tuple(bootstrapped)
    sets: tuple[tuple[str, ...], ...] = ()
    nearest_pool: tuple[str, ...] = ()
    if high > 0 and pool:
        high = min(high, len(pool))
        low = min(low, high)
        sets = _demo_sets(labeled, bootstrapped, high, demo_sets, seed, label_of)
        if nearest and len(labeled) > high:  # choosing needs more rows than a request gets
            nearest_pool = tuple(d.id for d in labeled)
    elif high == 0:
        notes.append("few-shot is disabled in the definition: demos are not searched")
    completion = getattr(model, "prompt_style", "chat") == "completion"
    reasoning: tuple[str, ...] = (AUTO,)
    if not completion and signature.reasoning_strategy.value == "adaptive":
        reasoning = (AUTO, "on", "off")
    delimiters = (AUTO, *[d.value for d in Delimiter if d.value != adapter.delimiter.value])
    orders = (AUTO, *[name for name, order in SECTION_ORDERS.items() if list(order) != list(adapter.section_order)])
    structured: tuple[str, ...] = (AUTO,)
    if signature.output_schema is not None and model.capabilities.structured_output:
        # the other side of the adapter's choice: schema in the prompt, or only in the request
        alternative = StructuredOutput.PROMPT_SCHEMA if adapter.structured_output is not StructuredOutput.PROMPT_SCHEMA \
            else StructuredOutput.RESPONSE_SCHEMA
        structured = (AUTO, alternative.value)
    # a terse built-in candidate needs no proposer: the one-line description in place of the role and
    # context text (constraints and format stay); long rules often drown a small model's few-shot cues
    terse = (signature.description,) if signature.description and high > 0 else ()
    texts = (None, *dict.fromkeys(t for t in (*terse, *instructions) if t))
    return SearchSpace(instructions=texts, demo_sets=sets, demo_counts=(low, high), reasoning=reasoning,
                       section_orders=orders, delimiters=delimiters, structured_outputs=structured,
                       demos=signature.demos + pool, own_demo_ids=tuple(d.id for d in signature.demos),
                       nearest_pool=nearest_pool,
                       notes=tuple(notes))


def _demo_sets(labeled: tuple[Demo, ...], bootstrapped: tuple[Demo, ...], size: int, count: int,
               seed: int, label_of: Any) -> tuple[tuple[str, ...], ...]:
    """Train's first ``size`` rows as listed (curated datasets often open with their clearest
    cases), then seeded draws: plain samples, samples stratified over labels, and (every third set,
    when there are any) bootstrapped demos topped up with labeled ones."""
    rng = random.Random(seed)
    sets: list[tuple[str, ...]] = [tuple(d.id for d in labeled[:size])] if labeled else []
    groups: dict[str, list[Demo]] = defaultdict(list)
    for demo in labeled:
        groups[label_of(demo.output) if label_of else ""].append(demo)
    attempts = 0
    while len(sets) < count and attempts < count * 20:
        attempts += 1
        if bootstrapped and len(sets) % 3 == 1:
            chosen = rng.sample(list(bootstrapped), min(size, len(bootstrapped)))
            chosen += rng.sample([d for d in labeled], min(size - len(chosen), len(labeled)))
        elif len(groups) > 1 and len(sets) % 2 == 0:
            labels = list(groups)
            rng.shuffle(labels)
            chosen = [rng.choice(groups[label]) for label in labels[:size]]
            if len(chosen) < size:
                rest = [d for d in labeled if d not in chosen]
                chosen += rng.sample(rest, min(size - len(chosen), len(rest)))
        else:
            chosen = rng.sample(list(labeled), min(size, len(labeled)))
        candidate = tuple(d.id for d in chosen)
        if candidate not in sets:
            sets.append(candidate)
    return tuple(sets)


def label_function(signature: Any) -> Any:
    """For stratified demo sets: the value of the output's first enum-typed top-level field."""
    schema = signature.output_schema or {}
    for name, prop in (schema.get("properties") or {}).items():
        if isinstance(prop, dict) and "enum" in prop:
            return lambda output, name=name: str(output.get(name)) if isinstance(output, dict) else ""
    if schema.get("enum"):
        return lambda output: str(output)
    return None
