"""Runtime policy per model class, read from ``runtime_policy.yaml`` (data, not code): what the
runtime does around a call, as opposed to the adapters' rules for what the prompt is."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from typing import Any

from rosetta.definition.yaml_source import parse_yaml


@functools.cache
def _policy() -> dict[str, Any]:
    path = resources.files("rosetta.providers") / "runtime_policy.yaml"
    data, _ = parse_yaml(path.read_text(encoding="utf-8"), file=str(path))
    assert isinstance(data, dict), f"{path} is a mapping"  # bundled with the package
    return data


def validation_retries(model_class: str) -> int:
    """Corrections after an answer that does not validate, when the caller sets none."""
    table = _policy()["validation_retries"]
    return int(table.get(model_class, table["mid"]))


class ErrorKind(StrEnum):
    """Why a run (``ModelCallError.kind``) or one call failed, and so what the runtime does next. The
    first nine are what :func:`error_kinds`' table makes of a provider's failure; the last four end
    a run. A ``str``: ``error.kind == "credentials"`` still holds."""

    TRANSIENT = "transient"  # 5xx, 429, a timeout or a dropped connection: retried with backoff, then the next model
    LOCAL = "local"  # this machine could not open a connection (pool or sockets ran out): retried
    HARD = "hard"  # the request itself was refused (bad request, content policy): the run ends
    DENIED = "denied"  # the key was refused, or the endpoint does not serve the model: the next model
    CREDENTIALS = "credentials"  # no key here: nothing was sent, the next model
    REFUSED = "refused"  # the model declined to answer: the next model
    CONTEXT = "context"  # the prompt does not fit the model's window: the next larger model
    BUSY = "busy"  # no in-flight slot of the endpoint came free in time: the next model
    UNAVAILABLE = "unavailable"  # the endpoint is cooling down after failing too often: the next model
    INVALID = "invalid"  # answered, but no answer validated after the corrections
    EXHAUSTED = "exhausted"  # every model of the chain failed
    TOOL_STEPS = "tool_steps"  # the model still called tools after max_tool_steps rounds
    TOOL_ERRORS = "tool_errors"  # more tool calls failed than max_tool_errors allows


@dataclass(frozen=True)
class ErrorKinds:
    """The ``errors`` table: which failures are transient, denied, credentials, hard, context, busy,
    local or refused."""

    statuses: tuple[tuple[re.Pattern[str], ErrorKind], ...]  # "5xx" matches 500-599
    classes: dict[str, ErrorKind]  # exception class name → kind
    before_status: frozenset[str]  # class names that decide even when the error carries a status
    causes: dict[str, ErrorKind]  # class name → kind, for a link of the cause chain (decides first)
    said: tuple[tuple[str, str, ErrorKind], ...] = ()  # (class name, message start, kind): a link of exactly that class

    def of_link(self, link: BaseException) -> ErrorKind | None:
        """The kind a link of the cause chain says: by a class of its own (any in its hierarchy), else
        by exactly its class and what its message starts with (an SDK's generic error class)."""
        kind = next((self.causes[cls.__name__] for cls in type(link).__mro__ if cls.__name__ in self.causes), None)
        if kind is None:
            text = str(link)
            kind = next((kind for name, start, kind in self.said
                         if type(link).__name__ == name and text.startswith(start)), None)
        return kind

    def by_status(self, status: int) -> ErrorKind | None:
        """The kind of an HTTP status: a listed one, else ``hard`` for any other 4xx."""
        for pattern, kind in self.statuses:
            if pattern.fullmatch(str(status)):
                return kind
        return ErrorKind.HARD if 400 <= status < 500 else None


@functools.cache
def error_kinds() -> ErrorKinds:
    """The ``errors`` table of ``runtime_policy.yaml``, ready to look up."""
    table = _policy()["errors"]
    statuses = tuple((re.compile(str(code).replace("x", "[0-9]")), ErrorKind(kind))
                     for kind, codes in table["status"].items() for code in codes)
    classes = {name: ErrorKind(kind) for kind, names in table["classes"].items() for name in names}
    causes = {name: ErrorKind(kind) for kind, names in table["causes"].items() for name in names if ":" not in name}
    said = tuple((name, start.strip(), ErrorKind(kind)) for kind, names in table["causes"].items() for name, _, start in
                 (entry.partition(":") for entry in names if ":" in entry))
    return ErrorKinds(statuses, classes, frozenset(table["classes"].get("context", ())), causes, said)


@dataclass(frozen=True)
class CredentialRules:
    """The ``credentials`` table: which variables hold a credential, and which hosts find theirs elsewhere."""

    names: re.Pattern[str]  # matches a variable's name that holds a key, token or secret
    ambient: frozenset[str]  # litellm providers whose SDK also looks beyond the environment

    def holds_credential(self, variable: str) -> bool:
        """Whether ``variable`` holds a credential (``OPENAI_API_KEY``), not a setting (``OLLAMA_API_BASE``)."""
        return self.names.search(variable) is not None


@functools.cache
def credential_rules() -> CredentialRules:
    """The ``credentials`` table of ``runtime_policy.yaml``, ready to look up."""
    table = _policy()["credentials"]
    words = "|".join(re.escape(str(word)) for word in table["names"])
    return CredentialRules(re.compile(rf"(^|_)({words})(_|$)"), frozenset(table["ambient"]))
