"""The search space: the renderer's knobs, restricted to what the target model's adapter allows,
and the candidates a race draws from it.

Every dimension is an optuna categorical or integer whose first choice is the unoptimized
render. Demo sets are ordered candidate lists from train: set 0 is train's first rows as the
dataset lists them (the plain k-shot prompt, as DSPy's candidate sets start with the unshuffled
train set), the rest seeded draws of four kinds — label-balanced (labels taken in turn), diverse
(each row the least like those already chosen), bootstrapped (the model's own correct answers,
topped up with labeled rows) and plain samples. A candidate uses the first ``demo_count`` of one
set, forwards or reversed; set -1 means the definition's own demos, and set -2 (``NEAREST``)
demos retrieved per request from a pool under a retrieval policy (:class:`~rosetta.render.prompt.Retrieval`):
how many (``demo_count``), from which pool (train's labeled rows, or the bootstrapped ones), with
the neighbours' labels taken in turn or not, how much diversity (MMR) against plain nearness, and
whether the most similar demo goes next to the request or first.

:meth:`SearchSpace.candidates` lists a race's candidates: the unoptimized render, the plain k-shot
prompt and plain nearest demos first (the baselines every search compares with), then fixed demo
sets (one per other set, with a count and order drawn for it and, now and then, another instruction
or format knob) in turn with drawn retrieval policies, so the search weighs *how* demos are chosen
against *which*.

:meth:`SearchSpace.kind` names what a candidate is, so that a winner says whether the search found
it or it was there whatever the seed: *seeded* kinds (:data:`SEEDED`) are the same prompts in every
search, *drawn* ones depend on the seed.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import TYPE_CHECKING, Any

from rosetta.optimize.demo_sets import draw_demo_sets
from rosetta.parts import Demo
from rosetta.providers.kinds import Delimiter, StructuredOutput
from rosetta.render.prompt import RETRIEVAL_ORDERS, Knobs, Retrieval

if TYPE_CHECKING:
    from optuna.trial import Trial

    from rosetta.datasets import Example
    from rosetta.providers.adapter import Adapter
    from rosetta.providers.model_entries import CatalogModel
    from rosetta.signature import Signature

SPACE_VERSION = 7
"""Part of the study's name: bumped when a trial's params come to mean another prompt (as when demo
set 0 became train's first rows, trials became a race's units, the adaptive reasoning of a
JSON-only answer stopped meaning "think step by step", or dev was split into screening and
confirmation rows and instructions stopped replacing Context), so a journal from an older rosetta
is not resumed and misread."""

NEAREST = -2
"""The demo set that is not a set: per request, the train rows nearest to it."""

SEEDED = ("unoptimized", "first-k", "nearest-k")
"""Kinds of candidates every search holds whatever its seed: the unoptimized render, train's first
k rows as demos, and the k train rows nearest to each request (plain nearness at the largest count)."""

DRAWN_SETS = ("label-balanced", "diverse", "bootstrapped", "sampled")
"""Kinds of fixed demo sets drawn with the seed (see :func:`~rosetta.optimize.demo_sets.draw_demo_sets`)."""

DRAWN = (*DRAWN_SETS, "retrieval-policy")
"""Kinds of demos drawn with the seed: fixed demo sets, and retrieval policies other than plain
nearest demos at the largest count (see :meth:`SearchSpace.candidates`)."""

DIVERSITIES = (0.0, 0.25, 0.5, 0.75)
"""The MMR weights a drawn retrieval policy takes (0: nearest only)."""

POOLS = ("labeled", "bootstrapped")
"""Where retrieved demos come from: train's labeled rows, or the rows the model itself answered
correctly (its own phrasing, DSPy's bootstrapped demos); the second only when there are enough."""

FORMAT_KNOBS = ("reasoning", "section_order", "delimiter", "structured_output")


def anchor_count(signature: Signature, train: tuple[Example, ...], nearest: bool) -> int:
    """How many seeded prompts the race's prior is chosen from (as :func:`build_space` will hold
    them): one, the nearest-demos prompt, where train holds more rows than a request gets; else the
    unoptimized render and, where demos are searched, train's first k rows."""
    high = signature.demo_range[1]
    if nearest and 0 < high < len(train):
        return 1
    return 2 if high > 0 and train else 1


def origin(kind: str) -> str:
    """"seeded" for a kind of candidate every search holds whatever its seed, else "drawn"."""
    return "seeded" if kind in SEEDED else "drawn"


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
    bootstrapped_pool: tuple[str, ...] = ()  # bootstrapped rows, a second pool when more than a request gets
    balance_field: str | None = None  # the output field whose labels retrieved demos may take in turn
    balanced: dict[int, int] = field(default_factory=dict)  # label-balanced demo set → how many labels it cycles
    set_kinds: tuple[str, ...] = ()  # each demo set's kind: "first-k" for set 0, then one of DRAWN_SETS
    instruction_kinds: tuple[str, ...] = ("definition",)  # each instruction's source: definition, terse, proposed
    notes: tuple[str, ...] = ()

    def suggest(self, trial: Trial) -> dict[str, Any]:
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
            if params["demo_set"] == NEAREST:
                for name, choices in self._policy_choices().items():
                    params[name] = trial.suggest_categorical(name, list(choices))
        for name, choices in (("reasoning", self.reasoning), ("section_order", self.section_orders),
                              ("delimiter", self.delimiters), ("structured_output", self.structured_outputs)):
            if len(choices) > 1:
                params[name] = trial.suggest_categorical(name, list(choices))
        return params

    def _policy_choices(self) -> dict[str, tuple[Any, ...]]:
        """Each retrieval-policy param this space varies, its first choice plain nearness."""
        choices: dict[str, tuple[Any, ...]] = {}
        if self.bootstrapped_pool:
            choices["retrieval_pool"] = POOLS
        if self.balance_field:
            choices["retrieval_balance"] = (False, True)
        choices["retrieval_diversity"] = DIVERSITIES
        choices["retrieval_order"] = RETRIEVAL_ORDERS
        return choices

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
        return self._retrieved(self.demo_counts[1], {})

    def _retrieved(self, count: int, policy: dict[str, Any]) -> dict[str, Any]:
        """The unoptimized render with ``count`` demos retrieved per request under ``policy`` (plain
        nearness for each param it leaves out)."""
        plain = {name: choices[0] for name, choices in self._policy_choices().items()}
        return {**self.default_params(), "demo_set": NEAREST, "demo_count": count, "demo_order": "forward",
                **plain, **policy}

    def candidates(self, seed: int) -> list[dict[str, Any]]:
        """The race's candidates, baselines first: the unoptimized render, the plain k-shot prompt,
        plain nearest demos; then one per other demo set, each with a drawn count and order and, now
        and then, another instruction or format knob, taking turns with drawn retrieval policies."""
        rng = random.Random(seed)
        anchors = [p for p in (self.default_params(), self.few_shot_params(), self.nearest_params()) if p is not None]
        if not (self.demo_sets and self.demo_counts[1] > 0):
            return anchors + [self._vary({**self.default_params()}, rng, always=True) for _ in range(64)]
        sets = [self._vary({**self.default_params(), "demo_set": index, "demo_count": self._count(index, rng),
                            "demo_order": rng.choice(["forward", "reverse"])}, rng)
                for index in range(1, len(self.demo_sets))]
        if not self.nearest_pool:
            return anchors + sets
        policies: list[dict[str, Any]] = []
        for _ in range(20 * len(sets)):  # distinct policies, none the seeded plain one
            if len(policies) == len(sets):
                break
            policy = self._policy(rng)
            if policy not in policies and policy != self.nearest_params():
                policies.append(policy)
        turns = zip_longest(policies, sets)
        return anchors + [params for pair in turns for params in pair if params is not None]

    def _policy(self, rng: random.Random) -> dict[str, Any]:
        """A drawn retrieval policy: a count from the range (at least one demo) and a value of each
        policy param, the plain one no likelier than the others."""
        low, high = self.demo_counts
        policy = {name: rng.choice(choices) for name, choices in self._policy_choices().items()}
        return self._retrieved(rng.randint(max(low, 1), high), policy)

    def _count(self, index: int, rng: random.Random) -> int:
        """A demo count for set ``index``: a whole number of label rounds for a label-balanced set
        (each label equally often), else one from the upper half of the range."""
        low, high = self.demo_counts
        labels = self.balanced.get(index, 0)
        if labels and labels <= high:
            rounds = [labels * m for m in range(1, high // labels + 1) if labels * m >= low]
            if rounds:
                return rng.choice(rounds)
        return rng.randint(max(low, (high + 1) // 2), high)

    def _vary(self, params: dict[str, Any], rng: random.Random, *, always: bool = False) -> dict[str, Any]:
        """Now and then another instruction (one in four) or format knob (one in five each); with
        ``always``, at least one of them (a space without demos has nothing else to vary)."""
        choices: list[tuple[str, list[Any], float]] = [("instruction", list(range(len(self.instructions))), 0.25),
                   ("reasoning", list(self.reasoning), 0.2), ("section_order", list(self.section_orders), 0.2),
                   ("delimiter", list(self.delimiters), 0.2), ("structured_output", list(self.structured_outputs), 0.2)]
        open_choices = [(name, values) for name, values, _ in choices if len(values) > 1]
        for name, values, chance in choices:
            if len(values) > 1 and rng.random() < chance:
                params[name] = rng.choice(values[1:])
        if always and open_choices and params == self.default_params():
            name, values = rng.choice(open_choices)
            params[name] = rng.choice(values[1:])
        return params

    def kind(self, params: dict[str, Any]) -> str:
        """What the candidate with ``params`` is: its demos' kind (:data:`SEEDED` or :data:`DRAWN`;
        none for the definition's own demos), then each other choice it changes (``proposed-instruction``,
        ``terse-instruction``, a format knob), joined by " + "; "unoptimized" when it changes nothing."""
        parts: list[str] = []
        demo_set = params.get("demo_set", -1)
        if demo_set == NEAREST:
            parts.append("nearest-k" if params == self.nearest_params() else "retrieval-policy")
        elif demo_set >= 0:
            parts.append(self.set_kinds[demo_set])
        instruction = params.get("instruction", 0)
        if instruction:
            parts.append(f"{self.instruction_kinds[instruction]}-instruction")
        parts += [name.replace("_", "-") for name in FORMAT_KNOBS if params.get(name, AUTO) != AUTO]
        return " + ".join(parts) or "unoptimized"

    def describe_knobs(self, params: dict[str, Any]) -> str:
        """The candidate's choices in words, for people (``rosetta trials``): "4 nearest demos (MMR
        0.25, label-balanced); instruction: terse ("Classify the ticket…"); reasoning on"."""
        return describe_params(params, self.set_kinds, [(kind, text) for kind, text in
                                                        zip(self.instruction_kinds, self.instructions, strict=False)])

    def knobs(self, params: dict[str, Any]) -> Knobs:
        """Renderer knobs for a trial's params (absent params keep the adapter's choice)."""
        values: dict[str, Any] = {}
        instruction = self.instructions[params.get("instruction", 0)]
        if instruction is not None:
            values["instructions"] = instruction
        if params.get("demo_set") == NEAREST:  # the order is the policy's: demo_order does not apply
            pool = self.bootstrapped_pool if params.get("retrieval_pool") == "bootstrapped" else self.nearest_pool
            values.update(demo_ids=pool, demo_count=params["demo_count"], demo_selection="nearest",
                          retrieval=self.retrieval(params))
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

    def retrieval(self, params: dict[str, Any]) -> Retrieval | None:
        """The retrieval policy of a retrieved-demos candidate; None for plain nearness (so its
        prompt keeps the bytes it had before policies existed)."""
        policy = Retrieval(diversity=params.get("retrieval_diversity", 0.0),
                           balance=self.balance_field if params.get("retrieval_balance") else None,
                           order=params.get("retrieval_order", RETRIEVAL_ORDERS[0]))
        return None if policy == Retrieval() else policy

    def size(self) -> int:
        """How many distinct prompts the space holds (for progress text)."""
        total = len(self.instructions) * len(self.reasoning) * len(self.section_orders) * len(self.delimiters) \
            * len(self.structured_outputs)
        if self.demo_sets and self.demo_counts[1] > 0:
            counts = self.demo_counts[1] - self.demo_counts[0] + 1
            policies = 1
            for choices in self._policy_choices().values():
                policies *= len(choices)
            total *= len(self.demo_sets) * counts * 2 + 1 + (counts * policies if self.nearest_pool else 0)
        return total

    def describe(self) -> dict[str, Any]:
        """Plain data for artifacts and ``--dry-run``."""
        return {
            "instructions": len(self.instructions),
            "demo_sets": len(self.demo_sets),
            "demo_count": list(self.demo_counts),
            "nearest_demos": len(self.nearest_pool),
            "retrieval": {name.removeprefix("retrieval_"): list(choices)
                          for name, choices in self._policy_choices().items()} if self.nearest_pool else {},
            "reasoning": list(self.reasoning),
            "section_order": list(self.section_orders),
            "delimiter": list(self.delimiters),
            "structured_output": list(self.structured_outputs),
            "size": self.size(),
        }


def build_space(signature: Signature, model: CatalogModel, adapter: Adapter, train: tuple[Example, ...], *,
                instructions: tuple[str, ...] = (), bootstrapped: tuple[Demo, ...] = (), demo_sets: int = 8,
                seed: int = 0, label_of: Callable[[Any], str] | None = None, nearest: bool = True) -> SearchSpace:
    """The space for ``signature`` on ``model``; ``label_of(output)`` groups train rows for
    stratified demo sets (None: no grouping)."""
    notes: list[str] = []
    low, high = signature.demo_range
    labeled = tuple(Demo(id=f"train:{e.id}", inputs=e.inputs, output=e.output) for e in train)
    pool = labeled + tuple(bootstrapped)
    sets: tuple[tuple[str, ...], ...] = ()
    balanced: dict[int, int] = {}
    set_kinds: tuple[str, ...] = ()
    nearest_pool: tuple[str, ...] = ()
    bootstrapped_pool: tuple[str, ...] = ()
    if high > 0 and pool:
        high = min(high, len(pool))
        low = min(low, high)
        sets, balanced, set_kinds = draw_demo_sets(labeled, bootstrapped, high, demo_sets, seed, label_of)
        if nearest and len(labeled) > high:  # choosing needs more rows than a request gets
            nearest_pool = tuple(d.id for d in labeled)
            if len(bootstrapped) > high:
                bootstrapped_pool = tuple(d.id for d in bootstrapped)
    elif high == 0:
        notes.append("few-shot is disabled in the definition: demos are not searched")
    completion = getattr(model, "prompt_style", "chat") == "completion"
    reasoning: tuple[str, ...] = (AUTO,)
    if not completion and signature.reasoning_strategy.value == "adaptive" and signature.output_schema is None:
        reasoning = (AUTO, "on", "off")  # a JSON-only answer is never told to think aloud: nothing to search
    delimiters = (AUTO, *[d.value for d in Delimiter if d.value != adapter.delimiter.value])
    orders = (AUTO, *[name for name, order in SECTION_ORDERS.items() if list(order) != list(adapter.section_order)])
    structured: tuple[str, ...] = (AUTO,)
    if signature.output_schema is not None and model.capabilities.structured_output:
        # the other side of the adapter's choice: schema in the prompt, or only in the request
        alternative = StructuredOutput.PROMPT_SCHEMA if adapter.structured_output is not StructuredOutput.PROMPT_SCHEMA \
            else StructuredOutput.RESPONSE_SCHEMA
        structured = (AUTO, alternative.value)
    # a terse built-in candidate needs no proposer: the one-line description in place of the identity
    # sentence (every body section stays); a long persona often drowns a small model's few-shot cues
    terse = (signature.description,) if signature.description and high > 0 else ()
    texts = (None, *dict.fromkeys(t for t in (*terse, *instructions) if t))
    sources = ("definition", *("terse" if text in terse else "proposed" for text in texts[1:]))
    return SearchSpace(instructions=texts, demo_sets=sets, demo_counts=(low, high), reasoning=reasoning,
                       section_orders=orders, delimiters=delimiters, structured_outputs=structured,
                       demos=signature.demos + pool, own_demo_ids=tuple(d.id for d in signature.demos),
                       nearest_pool=nearest_pool, bootstrapped_pool=bootstrapped_pool,
                       balance_field=label_field(signature) if nearest_pool else None,
                       balanced=balanced, set_kinds=set_kinds,
                       instruction_kinds=sources, notes=tuple(notes))


def label_field(signature: Signature) -> str | None:
    """The output's first enum-typed top-level field: its label (None when it has none)."""
    schema = signature.output_schema or {}
    return next((name for name, prop in (schema.get("properties") or {}).items()
                 if isinstance(prop, dict) and "enum" in prop), None)


def label_function(signature: Signature) -> Callable[[Any], str] | None:
    """For stratified demo sets: the value of the output's label field (:func:`label_field`), or
    the output itself when it is an enum."""
    schema = signature.output_schema or {}
    name = label_field(signature)
    if name is not None:
        return lambda output: str(output.get(name)) if isinstance(output, dict) else ""
    if schema.get("enum"):
        return lambda output: str(output)
    return None


def describe_params(params: dict[str, Any], set_kinds: tuple[str, ...] = (),
                    instructions: list[tuple[str, str | None]] | None = None) -> str:
    """A candidate's params in words (see :meth:`SearchSpace.describe_knobs`); ``set_kinds`` and
    ``instructions`` (kind, text) name what a bare index means when they are known."""
    parts: list[str] = []
    demo_set, count = params.get("demo_set", -1), params.get("demo_count")
    if demo_set == NEAREST:
        policy = [f"MMR {params['retrieval_diversity']:g}"] if params.get("retrieval_diversity") else []
        policy += ["label-balanced"] if params.get("retrieval_balance") else []
        policy += ["from the model's own answers"] if params.get("retrieval_pool") == "bootstrapped" else []
        policy += [str(params["retrieval_order"]).replace("_", " ")] if params.get("retrieval_order") not in (
            None, RETRIEVAL_ORDERS[0]) else []
        parts.append(f"{count} nearest demos" + (f" ({', '.join(policy)})" if policy else ""))
    elif demo_set >= 0:
        kind = set_kinds[demo_set] if demo_set < len(set_kinds) else f"set {demo_set}"
        order = ", reversed" if params.get("demo_order") == "reverse" else ""
        parts.append(f"{count} {kind} demos{order}" if kind != "first-k" else f"first {count} train rows as demos{order}")
    else:
        parts.append("the definition's own demos")
    instruction = params.get("instruction", 0)
    if instruction:
        kind, text = (instructions or [])[instruction] if instruction < len(instructions or []) else ("", None)
        words = " ".join((text or "").split()[:8])
        parts.append(f"instruction: {kind or f'#{instruction}'}" + (f' ("{words}…")' if words else ""))
    for name in FORMAT_KNOBS:
        value = params.get(name, AUTO)
        if value != AUTO:
            parts.append(f"{name.replace('_', ' ')} {value}")
    return "; ".join(parts)
