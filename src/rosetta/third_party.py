"""Every setting rosetta changes in a library it uses, in one place, each scoped to rosetta's own
work and undone after it: an application that imports rosetta keeps its own litellm, optuna and
datasets settings (and its environment) outside rosetta's calls.

- litellm downloads its model cost map at import unless ``LITELLM_LOCAL_MODEL_COST_MAP`` is set,
  fetches Anthropic's beta-header table on the first Anthropic call unless
  ``LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS`` is, may download a Hugging Face tokenizer to count tokens,
  and prints a "Give Feedback / Get Help" banner with each error. rosetta runs offline by default:
  :func:`import_litellm` sets the import's variable for the import only, and :func:`using_litellm`
  the rest while rosetta uses litellm (a call, or a look at its model map; a value the user set wins).
- optuna logs "A new study created" and each trial at INFO, DSPy each step of an optimizer, and
  datasets draws progress bars and logs its cache: :func:`quiet_optuna`, :func:`quiet_dspy` and
  :func:`quiet_datasets` lower them while rosetta uses them.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import Any

LITELLM_IMPORT_ENVIRONMENT = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
"""Read by litellm when it is imported: its bundled model map, never the network."""
LITELLM_CALL_ENVIRONMENT = {"LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True"}
"""Read by litellm during calls: its bundled Anthropic beta headers, never the network."""
LITELLM_CALL_FLAGS = {"disable_hf_tokenizer_download": True, "suppress_debug_info": True}
"""litellm's module flags while rosetta's calls run."""

_lock = threading.Lock()
_calls = 0  # rosetta's calls running now, in every thread and event loop
_saved: dict[str, Any] = {}  # what the first of them replaced


@contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` in the environment (those the user did not set) for the block, then as before."""
    added = [name for name in values if name not in os.environ]
    for name in added:
        os.environ[name] = values[name]
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def import_litellm() -> ModuleType:
    """litellm (≈3 s and 170 MB the first time), its model map read from its bundled copy."""
    loaded = sys.modules.get("litellm")
    if loaded is not None and not getattr(loaded.__spec__, "_initializing", False):  # after the first: as it is
        return loaded
    with _lock, _environment(LITELLM_IMPORT_ENVIRONMENT):
        import litellm
    return litellm


def import_dspy() -> ModuleType:
    """DSPy, which imports litellm at its own import: litellm first, offline (:func:`import_litellm`)."""
    import_litellm()
    import dspy

    module: ModuleType = dspy
    return module


@contextmanager
def using_litellm() -> Iterator[ModuleType]:
    """While the block runs (any number at once, in any thread): litellm offline and quiet, as the
    module docstring says; the user's values come back when the last block ends."""
    global _calls
    litellm = import_litellm()
    with _lock:
        _calls += 1
        if _calls == 1:
            _saved.clear()
            _saved.update({f"flag:{name}": getattr(litellm, name, None) for name in LITELLM_CALL_FLAGS})
            _saved.update({f"env:{name}": os.environ.get(name) for name in LITELLM_CALL_ENVIRONMENT})
            for flag, on in LITELLM_CALL_FLAGS.items():
                setattr(litellm, flag, on)
            for variable, text in LITELLM_CALL_ENVIRONMENT.items():
                os.environ.setdefault(variable, text)
    try:
        yield litellm
    finally:
        with _lock:
            _calls -= 1
            if _calls == 0:
                for key, value in _saved.items():
                    kind, name = key.split(":", 1)
                    if kind == "flag":
                        setattr(litellm, name, value)
                    elif value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value


@contextmanager
def quiet_optuna() -> Iterator[None]:
    """optuna at WARNING for the block (a study's creation and each trial are rosetta's to report)."""
    import optuna

    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(before)


@contextmanager
def quiet_dspy() -> Iterator[None]:
    """DSPy's logger at WARNING for the block (its INFO lines would break rosetta's progress display)."""
    import logging

    logger = logging.getLogger("dspy")
    before = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(before)


@contextmanager
def quiet_datasets() -> Iterator[ModuleType]:
    """HF datasets without progress bars and below-ERROR logs for the block; yields the module."""
    import datasets as module

    datasets: Any = module  # no type information: its functions are looked up as written
    bars, verbosity = datasets.is_progress_bar_enabled(), datasets.logging.get_verbosity()
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    try:
        yield datasets
    finally:
        datasets.logging.set_verbosity(verbosity)
        if bars:
            datasets.enable_progress_bars()
