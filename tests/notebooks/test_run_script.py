"""``python notebooks/run.py`` without the notebook extra says which extra installs it (exit code 2,
no traceback). No kernel is started here."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from conftest import REPO

RUN = REPO / "notebooks" / "run.py"


def test_run_without_nbformat_names_the_extra(monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("run_under_test", RUN)
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "nbformat", None)  # `import nbformat` now raises ImportError
    spec.loader.exec_module(script)  # importing the script needs no nbformat
    assert script.main(["--check"]) == 2
    said = capsys.readouterr().err
    assert "needs nbformat" in said and "pip install 'rosetta-prompts[notebook]'" in said


def test_run_as_a_script_without_nbformat_ends_cleanly():
    code = ("import runpy, sys\n"
            "sys.modules['nbformat'] = None\n"
            f"sys.argv = [{str(RUN)!r}, '--check']\n"
            f"runpy.run_path({str(RUN)!r}, run_name='__main__')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "rosetta-prompts[notebook]" in done.stderr


def test_the_notebook_extra_installs_what_the_script_needs():
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert {"nbformat", "nbclient", "ipykernel"} <= {requirement.split(">")[0].split("[")[0]
                                                     for requirement in extras["notebook"]}


def _script():
    spec = importlib.util.spec_from_file_location("run_under_test", RUN)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_storing_writes_the_clone_path_as_repo():
    import nbformat

    script = _script()
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text=f"{REPO}/compiled: no usable artifact\n"),
        nbformat.v4.new_output("execute_result", data={"text/plain": [f"'{REPO}/x'"]}, execution_count=1),
        nbformat.v4.new_output("error", ename="E", evalue="e", traceback=[f"File {REPO}/src/a.py"])])])
    stored = nbformat.writes(script.clean(notebook))
    assert str(REPO) not in stored and stored.count("<repo>") == 3


def test_the_stored_notebooks_name_no_clone_path():
    """A notebook stored on one machine compares equal when CI runs it in a clone elsewhere."""
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        assert str(REPO) not in path.read_text(encoding="utf-8"), f"{path.name}: run `python notebooks/run.py {path.name}`"
