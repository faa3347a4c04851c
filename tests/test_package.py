"""What a user installs: the wheel built from this checkout, under its own name on PyPI
(``rosetta-prompts``; PyPI's ``rosetta`` is an unrelated package), gives a working ``rosetta``
command and import in a fresh virtual environment, and its types reach the user's type checker
(``py.typed``, the public names re-exported)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

from conftest import REPO

DISTRIBUTION = "rosetta-prompts"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed (``--no-deps``; the dependencies are this test
    environment's, on the venv's path after its own site-packages, so the wheel's ``rosetta`` wins)."""
    root = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(root / "dist"), str(REPO)], check=True, timeout=300, capture_output=True)
    (wheel,) = (root / "dist").glob("*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
                    "--no-deps", "--no-index", str(wheel)], check=True, timeout=300, capture_output=True)
    purelib = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    (purelib / "test-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv


def _run(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(list(args), cwd=cwd, env={**env, "PATH": f"{venv / 'bin'}:{env.get('PATH', '')}"},
                          capture_output=True, text=True, timeout=300)


def test_the_wheel_is_named_for_pypi_and_carries_its_types_and_rules(installed) -> None:
    (wheel,) = installed.parent.joinpath("dist").glob("*.whl")
    assert wheel.name.startswith("rosetta_prompts-")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"rosetta/py.typed", "rosetta/runtime/secret_rules.toml", "rosetta/runtime/secret_rules_gitleaks.toml",
            "rosetta/providers/runtime_policy.yaml"} <= names
    metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
    assert f"Name: {DISTRIBUTION}\n" in zipfile.ZipFile(wheel).read(metadata).decode()


def test_the_installed_command_and_import_work_outside_the_checkout(installed, tmp_path) -> None:
    project = tmp_path / "project"
    shutil.copytree(REPO / "signatures", project / "signatures")
    found = _run(installed, str(installed / "bin" / "python"), "-c", "import rosetta; print(rosetta.__file__)",
                 cwd=project)
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()).is_relative_to(installed), found.stdout  # the wheel's, not the checkout's
    version = _run(installed, "rosetta", "--version", cwd=project)
    assert version.returncode == 0 and version.stdout.strip().endswith(__import__("rosetta").__version__)
    shown = _run(installed, "rosetta", "validate", "signatures/", "--format", "json", cwd=project)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert json.loads(shown.stdout)["summary"]["errors"] == 0


def test_a_user_script_importing_the_public_names_passes_mypy_strict(installed, tmp_path) -> None:
    """And a valid answer's ``output`` is the user's model where ``output_type=`` gives one."""
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent("""\
        from typing import Any

        from pydantic import BaseModel

        from rosetta import Agent, ModelCallError, Result, RetryPolicy, RunOptions, load

        class Triage(BaseModel):
            severity: str
            rationale: str

        def triage(report: str) -> Result[Triage]:
            agent: Agent[Triage] = load("vuln-triage", output_type=Triage)
            options = RunOptions(policy=RetryPolicy(attempts=2))
            try:
                result = agent.run({"report": report}, options=options)
            except ModelCallError as error:
                raise SystemExit(str(error)) from error
            reveal_type(result.output)
            with agent.stream({"report": report}) as stream:
                reveal_type(stream.result().output)
            reveal_type(agent.chat().send({"report": report}).output)
            return result

        def untyped(report: str) -> Result[Any]:
            return load("vuln-triage").run({"report": report})
        """))
    checked = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--python-executable",
                              str(installed / "bin" / "python"), str(script)],
                             cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count('Revealed type is "app.Triage"') == 3, checked.stdout
