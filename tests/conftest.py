"""Shared helpers: write definition files into a throwaway project and run the CLI."""

from __future__ import annotations

import datetime
import os
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from typer.testing import CliRunner

# CI runs the property tests with a fixed seed so a landing never depends on luck; local runs keep
# exploring new inputs (raise the count with ROSETTA_FUZZ_EXAMPLES).
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

REPO = Path(__file__).resolve().parents[1]

# A pytest-xdist worker starts with its controller's terminal size in COLUMNS and LINES, and a Rich console
# keeps the COLUMNS it saw when made: the CLI tests expect a pipe's width, or the COLUMNS each one sets.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)

SLOW_FIXTURES = {"local_model", "local_model_cache", "pg_server"}
"""Fixtures that start something heavy: the embedded model, a PostgreSQL server."""
SLOW_MODULES = {"test_notebooks.py", "test_html_report.py", "test_local_model.py", "test_local_run.py",
                "test_verify_local.py", "test_optimize_postgres.py", "test_trials_plot.py"}
"""Modules that drive the embedded model, a notebook kernel, Chromium or PostgreSQL throughout."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark what is slow, so that `./dev test -m "not slow"` runs in a few minutes."""
    for item in items:
        if item.path.name in SLOW_MODULES or SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


_KEYS_BEFORE = pytest.StashKey[set[Path]]()


def _project_keys() -> set[Path]:
    from rosetta.signing import secret_path

    folder = secret_path(REPO).parent
    return set(folder.glob("*.key")) if folder.is_dir() else set()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Each throwaway project a search runs in gets a signing key in the user's cache folder (see
    rosetta.signing): note the keys there before the run. Under pytest-xdist only the controlling
    process does, once every worker is done, so no worker removes a key another is using."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        session.config.stash[_KEYS_BEFORE] = _project_keys()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Remove the keys this run made."""
    before = session.config.stash.get(_KEYS_BEFORE, None)
    if before is not None:
        for made in _project_keys() - before:
            made.unlink(missing_ok=True)


TODAY = datetime.date(2026, 11, 26)
"""The date every test judges model lifecycles on (the catalog's review date): Claude Sonnet 4 is
retired by then (2026-06-15), and no test changes as later retirement dates pass."""


@pytest.fixture(autouse=True)
def pinned_lifecycle_date(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one clock rosetta reads for lifecycles (rosetta.providers.catalog.lifecycle_date), pinned."""
    import rosetta.providers.catalog as catalog

    monkeypatch.setattr(catalog, "lifecycle_date", lambda: TODAY)


PORTABLE = """\
---
name: {name}
version: "1.0.0"
description: Classifies things.
identity:
  role: Classifier
  expertise: [sorting]
capabilities:
  required_features: [structured_output]
output:
  schema:
    type: object
    properties:
      label: {{type: string, enum: [a, b]}}
    required: [label]
  required: true
portability:
  enabled: true
  minimum_context_window: 8000
  model_preferences: [anthropic/claude-sonnet-5-5, openai/gpt-4o]
  reasoning_strategy: adaptive
  body_format: markdown
---
## Role
You classify things.

## Constraints
- Answer with one label.

## Output format
JSON with a `label`.
"""
"""A definition that passes every PV check; tests mutate it to fail one check at a time."""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty project directory (it has a pyproject.toml, so it is a project root)."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    return tmp_path


@pytest.fixture
def write(project: Path) -> Callable[..., Path]:
    """write(name, text) → path: create a file in the project, dedenting ``text``."""

    def _write(name: str, text: str | bytes, *, dedent: bool = True) -> Path:
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(textwrap.dedent(text) if dedent else text, encoding="utf-8")
        return path

    return _write


@pytest.fixture
def portable(write: Callable[..., Path]) -> Callable[..., Path]:
    """portable(name, replace={old: new}) → path of a PORTABLE definition with edits applied."""

    def _portable(name: str = "demo", replace: dict[str, str] | None = None, body_extra: str = "") -> Path:
        text = PORTABLE.format(name=name)
        for old, new in (replace or {}).items():
            assert old in text, f"fixture edit {old!r} does not apply"
            text = text.replace(old, new)
        return write(f"{name}.md", text + body_extra, dedent=False)

    return _portable


@pytest.fixture
def cli() -> Callable[..., object]:
    """cli(*args) → click Result of running ``rosetta args`` in-process."""
    from rosetta.cli import app

    runner = CliRunner()

    def _cli(*args: str):
        return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)

    return _cli


COMPILE_AGENTS = ("vuln-triage.md", "advisory-extractor.md", "code-reviewer.md", "code-reviewer.governance.yaml")


def make_project(path: Path) -> Path:
    """A project holding copies of a few bundled agents (for compile and runtime tests)."""
    import shutil

    (path / "signatures").mkdir(parents=True)
    (path / "pyproject.toml").write_text("[project]\nname = 'demo'\n\n[tool.rosetta]\n")
    for name in COMPILE_AGENTS:
        shutil.copy(REPO / "signatures" / name, path / "signatures" / name)
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A throwaway project with three agents, ready to compile."""
    return make_project(tmp_path / "project")


def question_type_project(root: Path, *, train: int, dev: int, test: int) -> Path:
    """A project at ``root`` with the bundled question-type agent and the first rows of each split
    of its public data (no compiled artifacts)."""
    import shutil

    (root / "signatures").mkdir(parents=True)
    shutil.copy(REPO / "signatures" / "question-type.md", root / "signatures")
    (root / "pyproject.toml").write_text("[project]\nname = 'qt'\nversion = '0'\n", encoding="utf-8")
    data = root / "datasets" / "question-type"
    data.mkdir(parents=True)
    for split, rows in (("train", train), ("dev", dev), ("test", test)):
        lines = (REPO / "datasets" / "question-type" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
        (data / f"{split}.jsonl").write_text("\n".join(lines[:rows]) + "\n", encoding="utf-8")
    return root


LOCAL_MODEL = "local/gemma-3-270m"
"""The embedded model every offline end-to-end test runs on (a base model: completion prompts)."""
CHAT_LOCAL_MODEL = "local/smollm2-135m-instruct"
"""The second embedded model: instruction-tuned, another family and chat template."""
LOCAL_MODELS = (LOCAL_MODEL, CHAT_LOCAL_MODEL)


def sample_inputs(definition: Path, root: Path) -> dict[str, Any]:
    """Inputs a bundled agent accepts: its first example's, else every input filled with a sentence
    that passes the bundled agents' input rules (long enough, naming a CVE)."""
    from rosetta.definition.loader import load_definition
    from rosetta.signature import lower

    signature = lower(load_definition(definition, root=root))
    if signature.demos:
        return dict(signature.demos[0].inputs)
    return {field.name: "CVE-2024-12345: SQL injection in the login form lets an attacker bypass authentication."
            for field in signature.inputs}


@pytest.fixture(scope="session")
def local_model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache directory holding both embedded models' assembled, verified GGUFs, shared by the whole
    session (each model then loads once per process, keyed by its file)."""
    from rosetta.local.weights import model_path

    cache = tmp_path_factory.mktemp("rosetta-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ROSETTA_CACHE_DIR", str(cache))
        for model in LOCAL_MODELS:
            model_path(model)
    return cache


@pytest.fixture
def local_model(local_model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The local model's name, with ROSETTA_CACHE_DIR pointing at the session's cache."""
    monkeypatch.setenv("ROSETTA_CACHE_DIR", str(local_model_cache))
    return LOCAL_MODEL


def chromium() -> str:
    """Debian's Chromium, which the browser tests drive through Playwright (no browser download)."""
    import shutil

    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "Chromium is missing: `./dev test` installs Debian's chromium package (apt-get install chromium)"
    return path
