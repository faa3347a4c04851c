"""rosetta: compile markdown agent definitions into the best prompt for each LLM.

``import rosetta`` is cheap: names are imported on first use (PEP 562), so an application that
only needs one corner of rosetta never pays for the rest, and nothing heavy (litellm, dspy,
optuna, datasets) is imported until a function that needs it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.__about__ import __version__
from rosetta.lazy import lazy_exports
from rosetta.errors import ConfigError, DefinitionError, Location, Problem, RosettaError, UsageError
from rosetta.runtime.log_redaction import redact_logs

redact_logs()  # no log record of a rosetta logger carries a credential, whatever its level

_LAZY = {
    "load": "rosetta.runtime.agent",
    "Agent": "rosetta.runtime.agent",
    "AgentDefinition": "rosetta.definition.document",
    "AgentSpec": "rosetta.definition.models",
    "load_definition": "rosetta.definition.loader",
    "load_directory": "rosetta.definition.loader",
    "discover_definitions": "rosetta.definition.discovery",
    "Settings": "rosetta.settings",
    "load_settings": "rosetta.settings",
    "record_outcome": "rosetta.rollout.outcomes",
    "from_dspy": "rosetta.optimize.dspy_backend",
    # what a caller of run / arun / stream / chat handles
    "Result": "rosetta.runtime.result",
    "Attempt": "rosetta.runtime.result",
    "RetryPolicy": "rosetta.runtime.result",
    "RunOptions": "rosetta.runtime.options",
    "Stream": "rosetta.runtime.stream",
    "ModelCallError": "rosetta.runtime.result",
    "ErrorKind": "rosetta.providers.policy",
    "Outcome": "rosetta.runtime.result",
    "GuardrailError": "rosetta.runtime.guardrails",
    "Conversation": "rosetta.runtime.conversation",
    "Selection": "rosetta.runtime.selector",
    "file_reader": "rosetta.runtime.tools",
}

__all__ = [  # written out: type checkers read a literal list (tests/test_import.py checks it against _LAZY)
    "Agent", "AgentDefinition", "AgentSpec", "Attempt", "ConfigError", "Conversation", "DefinitionError",
    "ErrorKind", "GuardrailError", "Location", "ModelCallError", "Outcome", "Problem", "Result", "RetryPolicy",
    "RosettaError", "RunOptions", "Selection", "Settings", "Stream", "UsageError", "__version__",
    "discover_definitions", "file_reader", "from_dspy", "load", "load_definition", "load_directory",
    "load_settings", "record_outcome",
]

if TYPE_CHECKING:
    from rosetta.runtime.agent import Agent, load
    from rosetta.settings import Settings, load_settings
    from rosetta.definition.discovery import discover_definitions
    from rosetta.definition.loader import load_definition, load_directory
    from rosetta.definition.document import AgentDefinition
    from rosetta.definition.models import AgentSpec
    from rosetta.optimize.dspy_backend import from_dspy
    from rosetta.rollout.outcomes import record_outcome
    from rosetta.runtime.conversation import Conversation
    from rosetta.runtime.guardrails import GuardrailError
    from rosetta.providers.policy import ErrorKind
    from rosetta.runtime.result import Attempt, ModelCallError, Outcome, Result, RetryPolicy
    from rosetta.runtime.options import RunOptions
    from rosetta.runtime.selector import Selection
    from rosetta.runtime.stream import Stream
    from rosetta.runtime.tools import file_reader


__getattr__ = lazy_exports(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(__all__)
