"""Where a model is served and whether rosetta may send a key there: the :class:`Endpoint` of a
declared model (its URL and the *names* of the variables holding its URL and key), the trust rule
for a URL a cloned project names (this machine, or an origin the user lists in
``ROSETTA_TRUSTED_ENDPOINTS``), and the errors for a missing key or an untrusted endpoint."""

from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass
from urllib.parse import urlsplit

from rosetta.errors import Location, Problem, UsageError
from rosetta.providers.credentials import MissingCredentials
from rosetta.providers.policy import credential_rules


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
                "a cloned project may name any server", Location(self.named_in), model_field(model_id, "api_base"),
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
                                         Location(f"${self.api_base_env}"), model_field(model_id, "api_base_env"),
                                         "the endpoint's URL, e.g. http://127.0.0.1:8000/v1",
                                         f"export {self.api_base_env}=<url>, or give api_base in "
                                         f'[tool.rosetta.models."{model_id}"]'))
            return self.api_base
        reason = url_problem(value)
        if reason is not None:
            raise UsageError(Problem(
                f"{model_id}: ${self.api_base_env} does not hold the endpoint's URL: {reason} (its value is not "
                "shown, it may be a secret)", Location(f"${self.api_base_env}"), model_field(model_id, "api_base_env"),
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
            raise MissingCredentials(model_id, (self.api_key_env,), Problem(
                f"{model_id}: ${self.api_key_env} is not set", Location(f"${self.api_key_env}"),
                model_field(model_id, "api_key_env"), "the endpoint's API key",
                f"export {self.api_key_env}=<key>, or remove api_key_env from "
                f'[tool.rosetta.models."{model_id}"] if the endpoint needs none'))
        return key


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


def model_field(model_id: str, key: str | None = None) -> str:
    return f'tool.rosetta.models."{model_id}"' + (f".{key}" if key else "")
