"""Issue 59: ``evaluate --cross --plot`` without plotly is a usage error naming the extra to install,
said before any model is called (not after the whole matrix), with no traceback."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import scripted_model
from scripted_model import write_toy_project

MODELS = ("scripted/toy", "scripted/contrast")


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    scripted_model.register()
    root = tmp_path / "toy"
    root.mkdir()
    write_toy_project(root)
    return root


def test_plot_without_plotly_names_the_extra_before_evaluating(toy: Path, cli: Any, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "plotly", None)  # `import plotly` now raises ImportError
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)
    before = scripted_model.calls
    result = cli("-C", toy, "evaluate", "toy-sorter", "--cross", MODELS[0], "--cross", MODELS[1],
                 "--plot", toy / "matrix.html")
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "needs plotly, which is not installed" in said and "pip install 'rosetta-prompts[plots]'" in said
    assert "Traceback" not in result.output
    assert scripted_model.calls == before, "the matrix was evaluated before the missing plotly was noticed"
    assert not (toy / "compiled" / "toy-sorter" / "cross.yaml").exists() and not (toy / "matrix.html").exists()


def test_the_heatmap_writer_itself_refuses_cleanly(monkeypatch, tmp_path: Path) -> None:
    from rosetta.cli.optimize import write_heatmap
    from rosetta.errors import UsageError

    monkeypatch.setitem(sys.modules, "plotly", None)
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)
    with pytest.raises(UsageError, match="needs plotly, which is not installed") as caught:
        write_heatmap(object(), tmp_path / "m.html")
    assert "rosetta-prompts[plots]" in str(caught.value)


def test_trials_plot_without_plotly_names_the_extra_too() -> None:
    """``rosetta trials --plot`` asks optuna whether plotly imports; in a fresh process, where no
    earlier import of plotly can have been cached."""
    import subprocess

    code = ("import sys; sys.modules['plotly'] = None\n"
            "from pathlib import Path\n"
            "from rosetta.cli.trials import write_plots\n"
            "from rosetta.errors import UsageError\n"
            "try:\n    write_plots(object(), Path('unused.html'), title='t')\n"
            "except UsageError as error:\n    print(error)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "needs plotly" in done.stdout and "rosetta-prompts[plots]" in done.stdout
