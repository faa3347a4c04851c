"""`import rosetta` stays light: nothing heavy until a function needs it."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ["litellm", "dspy", "optuna", "datasets", "llama_cpp", "typer", "rich", "jsonschema", "pydantic_settings"]


def _modules_after(code: str) -> set[str]:
    output = subprocess.run([sys.executable, "-c", f"{code}\nimport sys; print(' '.join(sys.modules))"],
                            capture_output=True, text=True, check=True).stdout
    return set(output.split())


def test_import_rosetta_imports_nothing_heavy():
    loaded = _modules_after("import rosetta")
    assert not loaded & set(HEAVY)
    assert "pydantic" not in loaded


def test_loading_a_definition_does_not_import_the_heavy_stack():
    loaded = _modules_after("import rosetta; rosetta.load_definition('signatures/vuln-triage.md')")
    assert not loaded & {"litellm", "dspy", "optuna", "datasets", "typer", "rich"}


def test_lazy_names_resolve():
    import rosetta

    assert rosetta.load_definition.__module__ == "rosetta.definition.loader"
    assert "load_definition" in dir(rosetta)


def test_reading_compiled_prompts_and_the_catalog_needs_no_pydantic():
    loaded = _modules_after("import rosetta.render.prompt, rosetta.providers.catalog as c; c.load_catalog().resolve('sonnet')")
    assert "pydantic" not in loaded and not loaded & {"litellm", "dspy", "jsonschema"}


def test_what_a_caller_handles_is_importable_from_rosetta_without_the_heavy_stack():
    """Issue 57: Result, Attempt, the errors a call raises and the options types come from `rosetta`."""
    loaded = _modules_after("from rosetta import Attempt, Conversation, GuardrailError, ModelCallError, Result, "
                            "RetryPolicy, Selection")
    assert not loaded & set(HEAVY)
    import rosetta
    from rosetta.errors import RosettaError, UsageError

    assert issubclass(rosetta.ModelCallError, RosettaError) and issubclass(rosetta.GuardrailError, UsageError)
    assert {"Result", "Attempt", "ModelCallError", "GuardrailError"} <= set(dir(rosetta))


def test_every_public_name_is_listed_once_and_resolves():
    """``__all__`` is written out for type checkers; it holds exactly the eager and lazy names."""
    import rosetta

    eager = {"ConfigError", "DefinitionError", "Location", "Problem", "RosettaError", "UsageError", "__version__"}
    assert sorted(rosetta.__all__) == sorted(eager | set(rosetta._LAZY))
    assert all(getattr(rosetta, name) is not None for name in rosetta.__all__)
