"""Which credentials a call to a model needs, and whether this environment has them: one answer for
the runtime (asked before each model of a chain is called, so a missing key costs no request, retry
or wait), ``rosetta verify`` and ``rosetta doctor``.

litellm's ``validate_environment`` names the variables each provider reads; the ``credentials``
table of ``runtime_policy.yaml`` says which of them hold a credential and which hosts find theirs
elsewhere. A declared model's own key (``api_key_env``) is checked where it is read
(:meth:`rosetta.providers.endpoints.Endpoint.key`) and reaches a call as ``api_key``, which counts as
present here. Only variables' names are ever reported, never a value.
"""

from __future__ import annotations

import functools
import os
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rosetta.errors import Problem, UsageError

if TYPE_CHECKING:
    from rosetta.providers.policy import CredentialRules


class MissingCredentials(UsageError):
    """A call needs a key this environment does not have — a provider's (litellm names its
    variables) or a declared endpoint's ``api_key_env``: found before any request is sent, and
    classified ``credentials`` (``runtime_policy.yaml``): not retried, the next model of the chain
    is tried. ``variables`` names what to set, never a value. The one missing-key error: the
    runtime, ``rosetta verify`` and ``rosetta doctor`` all read this."""

    def __init__(self, provider: str, variables: tuple[str, ...], problem: Problem | None = None) -> None:
        self.provider, self.variables = provider, tuple(variables)
        names = ", ".join(f"${name}" for name in self.variables)
        unset = f"{names} is not set" if len(self.variables) == 1 else f"none of {names} is set"
        super().__init__(problem or Problem(f"no credentials for {provider}: {unset}", hint=fix_hint(self.variables)))

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, (self.provider, self.variables, self.problems[0]))

    @property
    def hint(self) -> str:
        """What the runtime did and how to fix it, naming the variable (never a value)."""
        return "not retried, nothing was sent; the next model of the chain, if any, was tried; " + \
            fix_hint(self.variables)


def fix_hint(variables: tuple[str, ...]) -> str:
    """How to give the runtime the keys ``variables`` name."""
    named = f"{variables[0]}=<key>" if len(variables) == 1 else \
        f"{' / '.join(variables)} (e.g. export {variables[0]}=<key>)"
    return (f"export {named}, or pass api_key=... to the run; `rosetta doctor` shows which providers have "
            "credentials here")


@dataclass(frozen=True)
class ProviderCredentials:
    """What one model's provider reads from the environment, sorted into what matters."""

    provider: str
    missing: tuple[str, ...] = ()  # credential variables litellm reads for it, none of them set
    unset: tuple[str, ...] = ()  # other variables it reads that are unset (a URL, API version, project): defaults apply
    ambient: bool = False  # its SDK also finds credentials beyond the environment (a profile, a role, ADC)
    error: str | None = None  # litellm could not say (the class of what it raised)

    @property
    def refused(self) -> bool:
        """Whether a call can be known to fail for want of a key before it is made."""
        return bool(self.missing) and not self.ambient


def check_credentials(model: str, params: Mapping[str, Any] | None = None) -> ProviderCredentials:
    """The credentials a call to ``model`` (a litellm model id) with litellm keyword arguments
    ``params`` needs from the environment, and which of them are missing.

    None are needed when the call carries its own key (``api_key``), when litellm holds one
    (``litellm.api_key`` or ``litellm.<provider>_key``, set in code), when litellm reads its secrets
    from a secret manager rather than the environment, or when litellm answers the call itself
    (``mock_response``): the request never reaches a provider."""
    from rosetta.providers.policy import credential_rules
    from rosetta.third_party import using_litellm

    params = params or {}
    with using_litellm() as litellm:  # the local/ provider needs no key: routed or not, it is named "local"
        return _credentials(litellm, model, params, credential_rules())


def _credentials(litellm: Any, model: str, params: Mapping[str, Any], rules: CredentialRules) -> ProviderCredentials:
    """:func:`check_credentials` with litellm at hand."""
    provider = _provider(litellm, model)
    ambient = provider in rules.ambient
    if (params.get("api_key") or params.get("mock_response") is not None or litellm.api_key
            or getattr(litellm, f"{provider}_key", None) or getattr(litellm, "secret_manager_client", None)):
        return ProviderCredentials(provider, ambient=ambient)
    try:
        found = litellm.validate_environment(model=model, api_base=params.get("api_base"))
    except Exception as error:  # noqa: BLE001  an odd provider: the call itself will say
        return ProviderCredentials(provider, ambient=ambient, error=type(error).__name__)
    unset = [name for name in found.get("missing_keys") or () if not os.environ.get(name)]
    missing = tuple(name for name in unset if rules.holds_credential(name))
    return ProviderCredentials(provider, missing, tuple(name for name in unset if name not in missing), ambient)


def missing_credentials(params: Mapping[str, Any]) -> MissingCredentials | None:
    """What a call with litellm keyword arguments ``params`` would fail for want of a key, known
    before it is sent (None: send it; a host that finds credentials elsewhere is never refused here)."""
    found = check_credentials(str(params.get("model", "")), params)
    return MissingCredentials(found.provider, found.missing) if found.refused else None


def credential_values(model: str, params: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The credentials a call to ``model`` carries: its own ``api_key``, else the values of the
    environment variables litellm reads that provider's credentials from (``TOGETHERAI_API_KEY``
    for ``together_ai/…``, both of Gemini's). What metering per key is keyed by; never shown."""
    params = params or {}
    if params.get("api_key"):
        return (str(params["api_key"]),)
    return tuple(os.environ.get(name, "") for name in credential_variables(model))


@functools.cache
def credential_variables(model: str) -> tuple[str, ...]:
    """The variables holding ``model``'s provider credentials, as litellm names them: what
    ``validate_environment`` reports missing when it sees an empty environment. Asked through a copy
    of the function whose ``os`` has no variables, so that the process environment is neither read
    nor changed (a set variable is not reported, and other threads may be calling)."""
    from rosetta.providers.policy import credential_rules
    from rosetta.third_party import using_litellm

    with using_litellm() as litellm:
        ask = litellm.validate_environment
        blind = types.FunctionType(ask.__code__, {**ask.__globals__, "os": _NoEnvironment}, ask.__name__,
                                   ask.__defaults__, ask.__closure__)
        try:
            names = blind(model=model).get("missing_keys") or ()
        except Exception:  # noqa: BLE001  an odd provider: no variable known, the call carries none
            names = ()
    rules = credential_rules()
    return tuple(name for name in names if rules.holds_credential(name))


class _NoEnvironment:
    """``os`` as :func:`credential_variables` shows it to litellm: no variable set."""

    environ: dict[str, str] = {}
    path = os.path
    sep = os.sep

    @staticmethod
    def getenv(name: str, default: str | None = None) -> str | None:
        return default


def _provider(litellm: Any, model: str) -> str:
    """litellm's provider for ``model`` (``openai`` for ``gpt-4o``), else its prefix."""
    try:
        return str(litellm.get_llm_provider(model=model)[1])
    except Exception:  # noqa: BLE001  an id litellm does not route: its prefix is all there is
        return model.split("/", 1)[0]
