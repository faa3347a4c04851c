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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from rosetta.definition.yaml_source import parse_yaml
from rosetta.errors import Location, Problem, UsageError
from rosetta.providers.declared_models import MODELS_VARIABLE, Where, declared_model, read_declared_file
from rosetta.providers.kinds import StructuredOutput
from rosetta.providers.model_entries import (
    OLLAMA_CHAT_PREFIX,
    OLLAMA_PREFIX,
    CatalogModel,
    Retirement,
    Status,
    Vendors,
    retirement,
)
from rosetta.providers.model_map import guess_model, listed_in_map
from rosetta.third_party import import_litellm

log = logging.getLogger(__name__)

def lifecycle_date() -> datetime.date:
    """The date models' lifecycles are judged on: the one clock that selection, compile, lint and
    the commands read (rendering reads none; tests pin this one)."""
    return datetime.date.today()


ANY_MODEL = ("*",)
"""``unlisted_models`` by default: every id litellm can route is accepted."""


@dataclass(frozen=True)
class Catalog:
    """All catalog models plus the default compile targets."""

    models: tuple[CatalogModel, ...]
    default_targets: tuple[str, ...]
    retirements: dict[str, Retirement] = field(default_factory=dict)  # model id → its retirement
    reviewed: dict[str, Any] = field(default_factory=dict)  # when, and against which litellm map
    vendors: Vendors = field(default_factory=Vendors)
    _names: dict[str, CatalogModel] = field(default_factory=dict, repr=False, compare=False)
    _declared: dict[str, Where] = field(default_factory=dict, repr=False, compare=False)  # id → its declaration
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
        text = read_declared_file(file)
        models = {model.id: model for model in self.models}
        taken = {name: model.id for model in self.models for name in (model.id.lower(), *map(str.lower, model.aliases))}
        declared = dict(self._declared)
        for key, entry in entries.items():
            where = Where(file, text, str(key), (environment or {}).get(key))
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

    def _base_model(self, name: Any, where: Where) -> CatalogModel:
        """The model a declaration's ``base_model`` names (litellm's convention: a deployment with a
        name of its own says which model it serves): a catalog model, one a host serves, or one
        litellm's map lists."""
        if not isinstance(name, str) or not name.strip():
            raise where.error("base_model", f"{name!r} is not a model id", expected='e.g. "openai/gpt-4o"')
        found = self.find(name) or self.guess(name.strip())
        if found is None or not (found.known or listed_in_map(found.id)):
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
        mapped = guess_model(name, adapters, self.vendors)
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
        table = import_litellm().model_cost
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
    if listed_in_map(model.id):
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


def load_catalog() -> Catalog:
    """The bundled catalog (parsed once per process); a project's, with its declared models, is
    :func:`catalog_for`. Either resolves a name the one way, :meth:`Catalog.resolve`."""
    return _bundled()


def catalog_for(root: str | Path, declared: Mapping[str, Any]) -> Catalog:
    """The catalog of the project at ``root`` with its ``declared`` models (``Settings.models``,
    ``Settings.models``), whose errors name lines of the project's pyproject.toml."""
    if not declared:
        return _bundled()
    pyproject = Path(root) / "pyproject.toml"
    return _with_declared(json.dumps(declared, sort_keys=True, default=str), str(pyproject) if pyproject.is_file()
                          else None, os.environ.get(MODELS_VARIABLE, ""))


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
    retirements = {entry["id"]: retirement(entry["id"], entry["retires"]) for entry in entries if "retires" in entry}
    vendors = Vendors(tuple((rule["adapter"], tuple(rule["match"])) for rule in data["vendors"]),
                      tuple(data["output_config_hosts"]), tuple(data["own_names"]))
    return Catalog(models=tuple(CatalogModel.from_dict({k: v for k, v in entry.items() if k != "retires"})
                                for entry in entries),
                   default_targets=tuple(data["default_targets"]), retirements=retirements,
                   reviewed=dict(data.get("reviewed") or {}), vendors=vendors)
