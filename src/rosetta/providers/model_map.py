"""litellm's bundled model map: what rosetta knows of a model outside its catalog (window, output
limit, structured output, sampling parameters, tools), and the guess built from it. litellm is
imported offline (:mod:`rosetta.third_party`); calls go through
:func:`rosetta.local.litellm_offline.import_litellm`, which adds the embedded ``local/`` provider.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from rosetta.providers.kinds import StructuredOutput
from rosetta.providers.model_entries import OLLAMA_CHAT_PREFIX, OLLAMA_PREFIX, Capabilities, CatalogModel, Vendors
from rosetta.third_party import using_litellm

def listed_in_map(route: str) -> bool:
    """Whether litellm's offline model map gives ``route`` a context window (an entry of its own)."""
    with using_litellm() as litellm:
        return bool(map_info(litellm, route).get("max_input_tokens"))


def map_info(litellm: Any, route: str) -> dict[str, Any]:
    """litellm's model info for ``route`` (empty when its map has no entry)."""
    try:
        return dict(litellm.get_model_info(route))
    except Exception:  # litellm raises a bare Exception for names outside its map
        return {}


def guess_model(name: str, adapters: dict[str, Any] | None, vendors: Vendors) -> CatalogModel | None:
    """What litellm's offline model map says of a model outside the catalog (None: litellm routes
    no provider for it). A bare name litellm knows (``gpt-4o``) gets its provider prefix."""
    with using_litellm() as litellm:  # an unknown provider makes litellm print its list of providers
        return _guess(litellm, name, adapters, vendors)


def _guess(litellm: ModuleType, name: str, adapters: dict[str, Any] | None, vendors: Vendors) -> CatalogModel | None:
    """:func:`guess_model` with litellm at hand."""
    route = OLLAMA_CHAT_PREFIX + name[len(OLLAMA_PREFIX):] if name.lower().startswith(OLLAMA_PREFIX) else name
    if not route.rsplit("/", 1)[-1].strip():  # "azure/", "openai/": a provider without a model
        return None
    try:
        bare, provider, _, _ = litellm.get_llm_provider(route)
    except Exception:  # litellm raises BadRequestError for unknown providers
        return None
    if "/" not in route or not route.lower().startswith(provider.lower() + "/"):
        route = f"{provider}/{bare}"
    info = map_info(litellm, route)  # empty for all ollama_chat/*, custom openai/* names, Azure deployments
    if adapters is None:
        from rosetta.providers.adapter import bundled_adapters

        adapters = bundled_adapters()
    adapter = vendors.adapter_for(route, provider, adapters)
    window = int(info.get("max_input_tokens") or 8192)
    schema = bool(info.get("supports_response_schema"))
    return CatalogModel(
        id=route,
        adapter=adapter.name,
        family=family_of(route),
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
            sampling_params=raw_map_entry(litellm, route).get("supports_sampling_params") is not False,
        ),
        known=False,
        structured_output=map_mechanism(adapter.structured_output, provider, info, vendors) if schema else None,
    )


def map_mechanism(preferred: StructuredOutput, provider: str, info: Mapping[str, Any],
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


def family_of(route: str) -> str:
    """The family of a model outside the catalog: the first word of its name, digits dropped, after
    any vendor prefix a host puts before it (``bedrock/us.anthropic.claude-…`` → ``claude``,
    ``together_ai/meta-llama/Llama-3.3-70B`` → ``llama``)."""
    name = route.rsplit("/", 1)[-1].split(":", 1)[0].split("@", 1)[0].lower()
    vendor = re.match(r"(?:[a-z]{2}\.)?[a-z]+\.(.+)", name)
    word = re.match(r"[a-z]+", vendor.group(1) if vendor else name)
    return word.group(0) if word else name


def raw_map_entry(litellm: Any, route: str) -> dict[str, Any]:
    """The map's own row for ``route``: get_model_info leaves out flags it has no field for
    (``supports_sampling_params`` among them)."""
    table = litellm.model_cost
    return table.get(route) or table.get(route.split("/", 1)[-1]) or {}
