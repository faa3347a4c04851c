"""rosetta.notebook against the deterministic scripted model (tests/scripted_model.py): render tables
and views, a sandboxed study with its trials frame and plots, evaluations and score bars — fast,
no local model."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import pytest
import scripted_model
from scripted_model import write_toy_project

import rosetta.notebook as nb
from rosetta.errors import UsageError

matplotlib.use("Agg")

AGENT = "signatures/toy-sorter.md"
MODELS = ["scripted/toy", "anthropic/claude-sonnet-5-5", "openai/gpt-4o", "gemini/gemini-2.5-pro"]


@pytest.fixture(autouse=True)
def scripted() -> None:
    scripted_model.register()


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    root = tmp_path / "toy"
    root.mkdir()
    write_toy_project(root, train=24, dev=8, test=6)
    return root


def test_render_table_has_one_row_per_model_with_each_providers_decisions(toy: Path) -> None:
    table = nb.render_table(toy / AGENT, MODELS)
    # canonical ids, in the order asked
    assert list(table["model"]) == ["scripted/toy", "anthropic/claude-sonnet-5-5", "openai/gpt-4o",
                                    "gemini/gemini-2.5-pro"]
    by_model = table.set_index("model")
    assert by_model.loc["anthropic/claude-sonnet-5-5", "structured_output"] == "output_config"
    assert by_model.loc["anthropic/claude-sonnet-5-5", "delimiter"] == "xml"
    assert by_model.loc["openai/gpt-4o", "structured_output"] == "json_schema_strict"
    assert (table["tokens"] > 0).all() and (table["error"] == "").all()
    assert set(table.columns) >= {"adapter", "system_placement", "demos", "warnings", "reasoning"}


def test_variants_and_unrenderable_models_get_rows(toy: Path) -> None:
    table = nb.render_table(toy / AGENT, ["openai/gpt-4o", "no-such-model-xyz"],
                            variants={"default": {}, "xml": {"delimiter": "xml"}})
    assert list(table["variant"]) == ["default", "xml", "default", "xml"]
    assert list(table["delimiter"][:2]) == ["markdown", "xml"]
    assert table["error"].iloc[2] and "no-such-model-xyz" in table["error"].iloc[2]
    with pytest.raises(UsageError, match="not a knob"):
        nb.render_table(toy / AGENT, ["openai/gpt-4o"], variants={"bad": {"colour": "red"}})
    with pytest.raises(UsageError, match="at least one model"):
        nb.render_table(toy / AGENT, [])


def test_render_show_prompts_and_diff(toy: Path) -> None:
    plain = nb.render(toy / AGENT, "openai/gpt-4o")
    xml = nb.render(toy / AGENT, "openai/gpt-4o", delimiter="xml")
    assert plain.knobs.delimiter.value == "markdown" and xml.knobs.delimiter.value == "xml"
    view = nb.show_prompts(nb.load(toy / AGENT), ["anthropic/claude-sonnet-5-5", "openai/gpt-4o"],
                           inputs={"text": "a note about <hats>"})
    assert view._repr_html_().count('class="column"') == 2
    assert "a note about &lt;hats&gt;" in view._repr_html_() and "a note about <hats>" in repr(view)
    changed = nb.diff(plain, xml)
    assert "diff_chg" in changed._repr_html_() or "diff_add" in changed._repr_html_()
    assert repr(changed).startswith("--- openai/gpt-4o") and "\n+" in repr(changed)
    assert repr(nb.diff(plain, plain)) == "identical\n"
    assert "identical" in nb.diff("a\nb", "a\nb", labels=("one", "two"))._repr_html_()
    with pytest.raises(UsageError, match="cannot diff a int"):
        nb.diff(plain, 3)


def test_knobs_lists_what_the_adapter_lets_the_optimizer_vary(toy: Path) -> None:
    frame = nb.knobs(toy / AGENT, "openai/gpt-4o").set_index("dimension")
    assert frame.loc["delimiter", "choices"][0] == "auto" and "xml" in frame.loc["delimiter", "choices"]
    assert frame.loc["structured_output", "choices"] == ["auto", "prompt_schema"]
    assert frame.loc["reasoning", "choices"] == ["auto"]  # the toy agent says reasoning_strategy: none
    assert frame.loc["demos", "choices"] == ["1–3 demos"]


def test_sandbox_copies_the_project_and_cuts_the_splits(toy: Path, tmp_path: Path) -> None:
    root = nb.sandbox(toy / AGENT, dev=3, test=2, directory=tmp_path / "box")
    data = root / "datasets" / "toy-sorter"
    assert len((data / "dev.jsonl").read_text().splitlines()) == 3
    assert len((data / "test.jsonl").read_text().splitlines()) == 2
    assert len((data / "train.jsonl").read_text().splitlines()) == 24
    assert json.loads((data / "dev.jsonl").read_text().splitlines()[0])["id"] == "dev-0"
    assert (root / AGENT).read_text() == (toy / AGENT).read_text() and (root / "pyproject.toml").is_file()
    with pytest.raises(UsageError, match="not empty"):
        nb.sandbox(toy / AGENT, directory=root)
    with pytest.raises(UsageError, match="at least one row"):
        nb.sandbox(toy / AGENT, dev=0, directory=tmp_path / "empty")


def test_optimize_in_a_sandbox_gives_the_study_its_frame_and_plots(toy: Path) -> None:
    from matplotlib.figure import Figure

    box = nb.sandbox(toy / AGENT)
    result = nb.optimize(box / AGENT, "scripted/toy", trials=8, max_calls=120, proposer="scripted/proposer",
                         baseline=True)
    assert not (toy / "compiled").exists() and not (toy / ".rosetta").exists()  # only the sandbox was written
    assert (box / "compiled" / "toy-sorter" / "scripted" / "toy.yaml").is_file()
    summary = result.summary()
    assert summary["dev"] == 1.0 and summary["baseline_dev"] < 0.6 and summary["test"] == 1.0
    frame = result.trials_frame()
    assert len(frame) == len(result.study.trials) and frame.index.name == "number"
    assert {"score", "state", "prompt_tokens", "calls", "default", "winner", "instruction", "candidate", "rung",
            "rows"} <= set(frame.columns)
    assert frame["default"].sum() >= 1 and frame["winner"].sum() == 1  # the unoptimized render raced too
    assert frame.loc[frame["winner"], "score"].iloc[0] == 1.0
    assert not [c for c in frame.columns if c.startswith(("user_attrs_", "params_"))]
    for figure in (result.plot_history(), result.plot_importances(), result.plot_pareto()):
        assert isinstance(figure, Figure) and figure.axes
    assert "baseline_dev" in result._repr_html_()
    # a re-run reads the finished study and the cache: the same winner, nothing paid
    again = nb.optimize(box / AGENT, "scripted/toy", trials=8, max_calls=120, proposer="scripted/proposer",
                        baseline=True, progress=False)
    assert again.outcome.paid_calls == 0 and again.outcome.params == result.outcome.params


def test_live_progress_prints_one_line_per_phase_outside_jupyter(toy: Path, capsys: pytest.CaptureFixture) -> None:
    nb.optimize(toy / AGENT, "scripted/toy", trials=3, max_calls=60)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("toy-sorter → scripted/toy: starting · 0/3 candidates")  # no proposer, no bootstrap
    assert any(line.startswith("toy-sorter → scripted/toy: racing") for line in lines)
    assert lines[-1].startswith("toy-sorter → scripted/toy: done · 3/3 candidates")
    assert len(lines) == len(set(lines)) < 10


def test_importances_need_two_finished_trials(toy: Path) -> None:
    result = nb.optimize(toy / AGENT, "scripted/toy", trials=1, max_calls=60, progress=False)
    with pytest.raises(UsageError, match="two candidates with a finished trial; this study has 1"):
        result.plot_importances()


def test_evaluate_the_runtimes_prompt_or_a_given_variant(toy: Path) -> None:
    runtime = nb.evaluate(toy / AGENT, "scripted/toy", split="test")
    assert list(runtime.frame["id"]) == [f"test-{n}" for n in range(6)]
    assert runtime.score == runtime.frame["score"].mean() and runtime.prompt.startswith("uncompiled")
    # the RULEBOOK instruction is always right (see scripted_model)
    good = nb.render(toy / AGENT, "scripted/toy", instructions=scripted_model.GOOD_INSTRUCTION)
    variant = nb.evaluate(toy / AGENT, "scripted/toy", split="dev", prompt=good)
    assert variant.score == 1.0 and variant.frame["valid"].all() and variant.prompt == "given prompt"
    before = scripted_model.calls
    assert nb.evaluate(toy / AGENT, "scripted/toy", split="dev", prompt=good).score == 1.0
    assert scripted_model.calls == before  # answered from the project's evaluation cache
    assert "over 8 examples" in variant._repr_html_()
    with pytest.raises(UsageError, match="rendered for openai/gpt-4o"):
        nb.evaluate(toy / AGENT, "scripted/toy", prompt=nb.render(toy / AGENT, "openai/gpt-4o"))
    figure = nb.score_bars({"runtime": runtime, "rulebook": variant, "fixed": 0.5})
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == ["runtime", "rulebook", "fixed"]
    assert [round(p.get_height(), 3) for p in figure.axes[0].patches] == [round(runtime.score, 3), 1.0, 0.5]
    assert [t.get_text() for t in nb.score_bars([variant]).axes[0].get_xticklabels()] == ["toy-sorter → scripted/toy"]
    with pytest.raises(UsageError, match="nothing to plot"):
        nb.score_bars([])


def test_importing_the_notebook_api_imports_no_heavy_library() -> None:
    import subprocess
    import sys

    code = ("import sys, rosetta.notebook\n"
            "heavy = [m for m in ('pandas', 'matplotlib', 'optuna', 'IPython', 'litellm') if m in sys.modules]\n"
            "assert not heavy, heavy")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode == 0
