"""A project's own models, ``[tool.rosetta.models."<provider>/<name>"]`` (or ``$ROSETTA_MODELS``):
each entry checked field by field, with the file and line of a bad value, and merged over the built-in
entry with the same id or over what litellm's map says of a new one."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from rosetta.errors import ConfigError, Location, Problem
from rosetta.providers.endpoints import Endpoint, model_field, url_problem
from rosetta.providers.kinds import StructuredOutput
from rosetta.providers.model_entries import Capabilities, CatalogModel, Vendors
from rosetta.providers.model_map import guess_model


MODELS_VARIABLE = "ROSETTA_MODELS"
"""The environment variable whose JSON object is merged over ``[tool.rosetta.models]`` (read by the
settings loaders, which refuse it when malformed; here only to say which entries came from it)."""


STRUCTURED_OUTPUT: dict[str, StructuredOutput] = {
    "json_schema": StructuredOutput.JSON_SCHEMA_STRICT,
    "json_object": StructuredOutput.JSON_OBJECT,
    "tool": StructuredOutput.FORCED_TOOL,
    "prompt": StructuredOutput.PROMPT_SCHEMA,
    **{kind.value: kind for kind in StructuredOutput},
}
"""A declaration's ``structured_output`` words (and the mechanisms' own names) → mechanism."""

DECLARABLE = ("base_model", "api_base", "api_base_env", "api_key_env", "adapter", "class", "context_window",
              "max_output_tokens", "prompt_style", "structured_output", "family", "aliases", "capabilities",
              "cache_min_tokens")
"""The keys of a ``[tool.rosetta.models."<id>"]`` entry."""

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def declared_model(model_id: str, entry: Any, base: CatalogModel | None, where: Where,
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
        base = guess_model(model_id, None, vendors)
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
            if not isinstance(value, str) or not ENV_NAME.fullmatch(value):
                raise where.error(key, "is not an environment variable's name (the value is not shown: it may be "
                                       "a key pasted in its place)",
                                  hint="name the variable, e.g. MY_SERVER_KEY; the key itself never goes in a file")
            values[key] = value
        elif key == "class":
            values["model_class"] = where.choice(key, value, ("frontier", "mid", "open"))
        elif key == "prompt_style":
            values[key] = where.choice(key, value, ("chat", "completion"))
        elif key in ("context_window", "max_output_tokens", "cache_min_tokens"):
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


class Where:
    """Where a declared model's settings are written, for errors: its table in pyproject.toml, or
    ``$ROSETTA_MODELS`` for the keys (``overrides``: its entry) that variable sets."""

    def __init__(self, file: str | Path | None, text: str, model_id: str, overrides: Any = None) -> None:
        self.file, self.source, self.model_id, self.overrides = file, text, model_id, overrides

    def error(self, key: str | None, message: str, *, expected: str | None = None,
              hint: str | None = None) -> ConfigError:
        return ConfigError(Problem(f"{message}" if key else f"model {self.model_id!r} {message}",
                                   self.location(key), model_field(self.model_id, key), expected, hint))

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


def read_declared_file(file: str | Path | None) -> str:
    try:
        return Path(file).read_text(encoding="utf-8") if file else ""
    except (OSError, UnicodeDecodeError):
        return ""
