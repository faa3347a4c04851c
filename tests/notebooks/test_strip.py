"""Issue 59: ``python notebooks/strip.py`` without nbformat says which extra installs it (exit code 2,
no traceback). No kernel is started here."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from conftest import REPO

STRIP = REPO / "notebooks" / "strip.py"


def test_strip_without_nbformat_names_the_extra(monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("strip_under_test", STRIP)
    strip = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "nbformat", None)  # `import nbformat` now raises ImportError
    spec.loader.exec_module(strip)  # importing the script needs no nbformat
    assert strip.main(["--check"]) == 2
    said = capsys.readouterr().err
    assert "needs nbformat" in said and "pip install 'rosetta-prompts[notebook]'" in said


def test_strip_run_as_a_script_without_nbformat_ends_cleanly():
    code = ("import runpy, sys\n"
            "sys.modules['nbformat'] = None\n"
            f"sys.argv = [{str(STRIP)!r}, '--check']\n"
            f"runpy.run_path({str(STRIP)!r}, run_name='__main__')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "rosetta-prompts[notebook]" in done.stderr


def test_the_notebook_extra_installs_nbformat():
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert any(requirement.startswith("nbformat") for requirement in extras["notebook"])
