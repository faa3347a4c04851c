"""Optimizing and scoring in a notebook: a throwaway project copy, an optuna study with a live
display, its trials as a DataFrame and optuna's plots, per-example evaluations, score bars and
the cross-model matrix."""

from __future__ import annotations

import csv
import html
import io
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rosetta.errors import Problem, UsageError
from rosetta.notebook.prompts import _definition


def sandbox(agent: Any, *, project: Any = None, train: int | None = None, dev: int | None = None,
            test: int | None = None, directory: str | os.PathLike[str] | None = None) -> Path:
    """A copy of the project to experiment in — its pyproject, signatures and the agent's labeled
    data, each split cut to its first N rows (a small dev set is a cheap search) — so studies,
    caches and artifacts never touch the real ``compiled/``, ``.rosetta/`` or ``datasets/``.
    Returns the copy's root (a new temporary directory unless ``directory`` is given)."""
    from rosetta.datasets import default_location

    loaded, signature, settings = _definition(agent, project)
    root = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix=f"rosetta-{loaded.name}-"))
    if root.exists() and any(root.iterdir()):
        raise UsageError(Problem(f"{root} is not empty", field="directory", hint="give a new or empty directory"))
    root.mkdir(parents=True, exist_ok=True)
    source = settings.root / "pyproject.toml"
    if source.is_file():
        shutil.copy(source, root / "pyproject.toml")
    else:
        (root / "pyproject.toml").write_text("[project]\nname = 'sandbox'\n", encoding="utf-8")
    shutil.copytree(settings.signatures_dir, root / settings.signatures_dir.relative_to(settings.root))
    location = Path(default_location(settings.datasets_dir, signature.name,
                                     loaded.spec.evaluation.dataset, settings.root))
    if not location.is_dir():
        raise UsageError(Problem(f"{loaded.name} has no labeled examples in {location}",
                                 hint="a sandbox copies datasets/<agent>/{train,dev,test}.jsonl or .csv"))
    target = root / settings.datasets_dir.relative_to(settings.root) / signature.name
    target.mkdir(parents=True)
    limits = {"train": train, "dev": dev, "test": test}
    for path in sorted(location.iterdir()):
        split = next((s for s in limits if path.stem == s or (s == "dev" and path.stem in ("validation", "val"))),
                     None)
        if split is None or path.suffix not in (".jsonl", ".csv"):
            continue
        _copy_rows(path, target / path.name, limits[split])
    return root


def _copy_rows(source: Path, target: Path, limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise UsageError(Problem(f"keep at least one row of {source.name}", field=source.stem))
    text = source.read_text(encoding="utf-8")
    if source.suffix == ".jsonl":
        rows = [line for line in text.splitlines() if line.strip()]
        target.write_text("".join(line + "\n" for line in rows[:limit]), encoding="utf-8")
        return
    records = list(csv.reader(io.StringIO(text)))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(records[:1] + records[1:][:limit])
    target.write_text(out.getvalue(), encoding="utf-8")


class _LiveStatus:
    """The search's progress in one notebook output that updates in place (an IPython display
    handle: no widgets, so it also works headless under nbclient); outside IPython, a text line
    per phase."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.started = time.monotonic()
        self.last: tuple[Any, ...] = ()
        self.shown = 0.0
        self.handle = None
        try:
            from IPython import get_ipython
        except ImportError:
            get_ipython = None  # noqa: N806
        shell = get_ipython() if get_ipython is not None else None
        if shell is not None and getattr(shell, "kernel", None) is not None:
            from IPython.display import display

            self.handle = display(self._bundle(None), raw=True, display_id=True)

    def __call__(self, status: Any, final: bool = False) -> None:
        key = (status.phase, status.trials_done, status.best, status.note)
        now = time.monotonic()
        if not final and key == self.last and now - self.shown < 0.5:
            return
        if self.handle is None:
            if status.phase != (self.last[0] if self.last else None) or final:
                print(self._text(status), flush=True)
        else:
            self.handle.update(self._bundle(status), raw=True)
        self.last, self.shown = key, now

    def _text(self, status: Any) -> str:
        if status is None:
            return f"{self.title}: starting"
        best = "–" if status.best is None else f"{status.best:.3f}"
        return (f"{self.title}: {status.phase} · {status.trials_done}/{status.trials_total} candidates · "
                f"best {best} · {status.calls} calls · {status.pruned} out · {time.monotonic() - self.started:.0f}s"
                + (f" · {status.note}" if status.note else ""))

    def _bundle(self, status: Any) -> dict[str, str]:
        text = self._text(status)
        done, total = (status.trials_done, max(status.trials_total, 1)) if status is not None else (0, 1)
        return {"text/plain": text,
                "text/html": f'<div><progress value="{min(done, total)}" max="{total}"></progress> '
                             f"<code>{html.escape(text)}</code></div>"}


@dataclass
class Optimization:
    """One ``optimize`` run: the report the CLI prints (``report``, ``outcome``: scores, calls,
    the winning prompt) and the optuna study behind it, to read in tables and plots."""

    report: Any  # rosetta.optimize.target.OptimizeReport
    study: Any  # optuna.Study
    project: Path

    @property
    def outcome(self) -> Any:
        """The :class:`~rosetta.optimize.study.SearchOutcome` (winner, scores, budget)."""
        return self.report.outcome

    @property
    def prompt(self) -> Any:
        """The winning prompt, exactly as the artifact stores it."""
        return self.outcome.prompt

    @property
    def pareto(self) -> bool:
        return len(self.study.directions) > 1

    def summary(self) -> dict[str, Any]:
        """The headline numbers, as plain data: the winner's kind, its dev score (which chose it: its
        interval ignores that selection) and its test score with the honest 95% interval."""
        from rosetta.optimize.evaluation import interval95

        outcome = self.outcome
        return {"agent": self.report.agent, "model": self.report.model, "kind": outcome.kind, "chosen_on": "dev",
                "dev": outcome.dev_score, "dev_ci95_ignoring_selection": outcome.dev_interval,
                "baseline_dev": outcome.baseline_dev, "test": outcome.test_score,
                "test_ci95": interval95(outcome.test_per_example), "activation": self.report.activation,
                "baseline_test": outcome.baseline_test, "trials": outcome.trials, "pruned": outcome.pruned,
                "calls": outcome.calls, "paid_calls": outcome.paid_calls, "stopped": outcome.stopped,
                "knobs": {k: v for k, v in outcome.prompt.knobs.to_dict().items() if v is not None},
                "artifact": self.report.artifact, "notes": list(outcome.notes)}

    def __repr__(self) -> str:
        outcome = self.outcome
        test = "" if outcome.test_score is None else f", test {outcome.test_score:.3f}"
        return (f"Optimization({self.report.agent} → {self.report.model}: dev {outcome.dev_score:.3f}{test}, "
                f"{outcome.trials} candidates, {outcome.calls} calls)")

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
                       for k, v in self.summary().items())
        return f"<table>{rows}</table>"

    def trials_frame(self) -> Any:
        """optuna's ``trials_dataframe()``, tidied: one row per unit of the race (a ``candidate``
        answering dev up to ``rows`` in a ``rung``) with its knobs, ``score``, ``state``,
        ``prompt_tokens``, ``calls``, the candidate's ``kind`` and flags for the unoptimized render and
        the winner's last unit. Scores are on dev, where the race chose."""
        frame = self.study.trials_dataframe(multi_index=False)
        renames = {"value": "score", "values_0": "score", "values_1": "tokens_objective",
                   "user_attrs_prompt_tokens": "prompt_tokens", "user_attrs_calls": "calls",
                   "user_attrs_cost": "cost", "user_attrs_candidate": "candidate", "user_attrs_rung": "rung",
                   "user_attrs_rows": "rows", "user_attrs_stopped": "stopped", "user_attrs_kind": "kind"}
        frame = frame.rename(columns={**renames, **{c: c.removeprefix("params_") for c in frame.columns
                                                    if c.startswith("params_")}})
        frame["state"] = frame["state"].str.lower()
        default = frame["user_attrs_default"] if "user_attrs_default" in frame else None
        frame["default"] = default.fillna(False).astype(bool) if default is not None else frame["number"] == 0
        winner = self.outcome.race.get("winner")
        units = [t for t in self.study.trials if t.state.name == "COMPLETE" and t.user_attrs.get("candidate") == winner]
        last = max(units, key=lambda t: t.user_attrs.get("rung", 0)).number if units else None
        frame["winner"] = frame["number"] == last
        drop = [c for c in frame.columns if c.startswith(("user_attrs_", "system_attrs_"))
                or c in ("datetime_start", "datetime_complete", "tokens_objective")]
        frame = frame.drop(columns=drop)
        if "duration" in frame:
            frame["duration"] = frame["duration"].dt.total_seconds().round(1)
        return frame.set_index("number")

    def _target(self) -> dict[str, Any]:
        return {"target": lambda t: t.values[0], "target_name": "score"} if self.pareto else {"target_name": "score"}

    def plot_history(self) -> Any:
        """Score per trial and the best so far (optuna's optimization history), as a figure."""
        from optuna.visualization import matplotlib as plots

        return _figure(plots.plot_optimization_history, self.study, **self._target())

    def plot_importances(self) -> Any:
        """Which knobs mattered: optuna's fANOVA parameter importances over the finished trials."""
        import optuna
        from optuna.visualization import matplotlib as plots

        complete = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        candidates = len({t.user_attrs.get("candidate", t.number) for t in complete})  # a candidate's units: one knob set
        if candidates < 2:
            raise UsageError(Problem(f"importances need two candidates with a finished trial; this study has "
                                     f"{candidates}",
                                     hint="allow more --max-calls, or fewer dev examples, so more variants finish"))
        target = {"target": lambda t: t.values[0]} if self.pareto else {}
        return _figure(plots.plot_param_importances, self.study, evaluator=None, **target, target_name="score")

    def plot_pareto(self) -> Any:
        """Cost against score: optuna's Pareto front of score (higher is better) and prompt tokens
        (what every call pays for). A single-objective study is shown through the same two values."""
        from optuna.visualization import matplotlib as plots

        return _figure(plots.plot_pareto_front, score_against(self.study), target_names=["score", "prompt tokens"])


def score_against(study: Any, cost: str = "prompt_tokens") -> Any:
    """``study`` as two objectives for optuna's Pareto-front plot: score (higher is better) and a
    cost each trial recorded (lower is better): ``prompt_tokens``, what every call pays for, or
    ``calls``, what scoring the candidate took."""
    import optuna

    pair = optuna.create_study(directions=["maximize", "minimize"])
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        pair.add_trial(optuna.trial.create_trial(
            params=trial.params, distributions=trial.distributions, user_attrs=trial.user_attrs,
            values=[trial.values[0], int(trial.user_attrs.get(cost, 0))]))
    if not pair.trials:
        raise UsageError(Problem("no variant finished the dev set, so there is no front to draw"))
    return pair


def _figure(plot: Any, *args: Any, **kwargs: Any) -> Any:
    """Call an optuna matplotlib plot and return its figure, closed in pyplot so Jupyter shows it
    once (as the cell's value), not twice."""
    import matplotlib.pyplot as plt
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        axes = plot(*args, **kwargs)
    figure = axes.figure if hasattr(axes, "figure") else axes.flat[0].figure
    figure.set_size_inches(8, 4)
    figure.tight_layout()
    plt.close(figure)
    return figure


def optimize(agent: Any, model: str, *, project: Any = None, trials: int | None = None,
             max_calls: int | None = None, max_cost: float | None = None, timeout_s: float | None = None, seed: int = 0,
             pruner: str = "halving", proposer: str | None = None, proposals: int = 3, pareto: bool = False,
             baseline: bool = False, jobs: int = 1, storage: str | None = None, force: bool = True,
             progress: bool = True, complete: Any = None) -> Optimization:
    """``rosetta compile AGENT --model MODEL --optimize`` from a notebook, with a live progress
    display; writes the artifact into the project's ``compiled/`` (use :func:`sandbox` for a
    throwaway copy). ``force`` (default) runs the study even when the artifact is up to date: a
    finished study and the evaluation cache answer it again without new calls. ``proposer``
    names a model that writes instruction candidates (default: none)."""
    from rosetta.optimize.study import SearchSettings, open_storage
    from rosetta.optimize.target import OptimizeRequest
    from rosetta.optimize.target import optimize as run_optimize

    loaded, _, settings = _definition(agent, project)
    search = SearchSettings(trials=trials, max_calls=max_calls, max_cost=max_cost, timeout_s=timeout_s, seed=seed,
                            pruner=pruner, proposer=proposer, proposals=proposals,
                            pareto=pareto, jobs=jobs, storage=storage, baseline_test=baseline)
    request = OptimizeRequest(definition=loaded.definition_path, model=model, settings=search, force=force)
    show = _LiveStatus(f"{loaded.name} → {model}") if progress else None
    report = run_optimize(request, settings=settings, on_status=show, complete=complete)
    if report.outcome is None:
        raise UsageError(Problem(f"{loaded.name} → {model}: {report.status}, no search ran",
                                 hint="pass force=True to read the study again"))
    if show is not None:
        from rosetta.optimize.study import SearchStatus

        outcome = report.outcome
        show(SearchStatus(trials_done=outcome.trials, trials_total=outcome.trials, pruned=outcome.pruned,
                          best=outcome.dev_score, calls=outcome.calls, phase="done", note=outcome.stopped or ""),
             final=True)
    import optuna

    from rosetta.third_party import quiet_optuna

    opened, _ = open_storage(storage or report.outcome.storage, settings.state.studies / "unused")
    name = report.outcome.study_run or report.outcome.study
    with quiet_optuna():
        study = optuna.load_study(study_name=name, storage=opened)
    return Optimization(report, study, settings.root)


@dataclass
class Evaluation:
    """A prompt scored on one labeled split: the mean ``score`` and one row per example in ``frame``."""

    agent: str
    model: str
    split: str
    metric: str
    score: float
    prompt: str  # which prompt was scored: the artifact's path, the fallback's reason, or "given prompt"
    frame: Any = field(repr=False)  # pandas.DataFrame
    recorded: float | None = None  # the artifact's score for this split, when it recorded one

    @property
    def label(self) -> str:
        return f"{self.agent} → {self.model}"

    def _repr_html_(self) -> str:
        recorded = "" if self.recorded is None else f" (recorded at compile time: {self.recorded:.4f})"
        head = (f"<p><b>{html.escape(self.label)}</b> on {self.split}: {html.escape(self.metric)} "
                f"<b>{self.score:.4f}</b> over {len(self.frame)} examples{recorded}<br>"
                f"<small>prompt: {html.escape(self.prompt)}</small></p>")
        return head + self.frame.to_html(max_rows=20)


def evaluate(agent: Any, model: str, *, split: str = "test", prompt: Any = None, project: Any = None,
             metric: str | None = None, jobs: int = 1, complete: Any = None) -> Evaluation:
    """Score on a labeled split. Without ``prompt``: what the runtime would send for ``model`` (its
    artifact, else the fallback render), as ``rosetta evaluate``. With one (say ``render(...)`` of
    a variant, or ``optimization.prompt``): that prompt, through the optimizer's evaluator and the
    project's evaluation cache, so a variant the search already scored costs nothing."""
    import pandas as pd

    from rosetta.optimize.rescore import evaluate as run_evaluate

    loaded, _, settings = _definition(agent, project)
    if prompt is None:
        report = run_evaluate(loaded.definition_path, model, settings=settings, split=split, metric=metric,
                              jobs=jobs, complete=complete)
        return Evaluation(report.agent, report.model, split, report.metric, report.score, report.selection,
                          pd.DataFrame(report.rows, columns=_COLUMNS), report.recorded)
    if not hasattr(prompt, "render_for_display"):
        raise UsageError(Problem(f"prompt must be a RenderedPrompt, not {type(prompt).__name__}", field="prompt"))
    from rosetta.optimize.cache import EvalCache
    from rosetta.optimize.context import load_context
    from rosetta.optimize.evaluation import Budget, Evaluator

    context = load_context(loaded.definition_path, model, settings=settings, metric=metric)
    if prompt.model != context.model.id:
        raise UsageError(Problem(f"the prompt was rendered for {prompt.model}, not {context.model.id}",
                                 field="prompt", hint=f"render it for {model}"))
    examples = context.data.split(split)
    evaluator = Evaluator(context.agent, context.metric, EvalCache(context.state.eval_cache),
                          Budget(), jobs=jobs, complete=complete)
    rows = []
    for example, answer in zip(examples, evaluator.answers(prompt, examples), strict=True):
        rows.append({"id": example.id, "score": evaluator.score(answer, example), "valid": answer.valid,
                     "calls": answer.calls, "output": answer.data, "expected": example.output,
                     "error": getattr(answer, "error", None)})
    score = sum(r["score"] for r in rows) / len(rows) if rows else 0.0
    return Evaluation(context.signature.name, context.model.id, split, context.metric.name, score, "given prompt",
                      pd.DataFrame(rows, columns=_COLUMNS))


_COLUMNS = ["id", "score", "valid", "calls", "output", "expected", "error"]


def score_bars(results: Iterable[Evaluation] | Mapping[str, float | Evaluation], *, title: str = "score") -> Any:
    """A bar per result (per model, or per variant when you name them in a mapping), its score
    written on it: the chart to compare models or variants at a glance."""
    import matplotlib.pyplot as plt

    items = list(results.items()) if isinstance(results, Mapping) else [(r.label, r) for r in results]
    if not items:
        raise UsageError(Problem("nothing to plot", field="results", hint="pass evaluate(...) results"))
    labels, scores = [], []
    for label, result in items:
        if not isinstance(result, (Evaluation, int, float)):
            raise UsageError(Problem(f"{label}: not a score or an Evaluation ({type(result).__name__})",
                                     field="results"))
        labels.append(str(label))
        scores.append(float(result.score if isinstance(result, Evaluation) else result))
    figure, axes = plt.subplots(figsize=(max(4, 1.6 * len(items)), 3.2))
    bars = axes.bar(labels, scores, color="#4c72b0")
    axes.bar_label(bars, labels=[f"{s:.3f}" for s in scores], padding=2)
    axes.set_ylim(0, max(1.0, max(scores)) * 1.12)
    axes.set_ylabel(title)
    axes.tick_params(axis="x", labelrotation=15)
    figure.tight_layout()
    plt.close(figure)
    return figure


@dataclass
class CrossScores:
    """The cross-model matrix in a notebook (``rosetta evaluate --cross``): ``frame`` has a row per
    prompt (whose prompt, then each model's own uncompiled render) and a column per model that
    answered; each column's best is in bold."""

    matrix: Any  # rosetta.optimize.cross.CrossMatrix
    frame: Any = field(repr=False)  # pandas.DataFrame

    def _repr_html_(self) -> str:
        matrix = self.matrix
        best = {column: set(matrix.best(column)) for column in matrix.models}
        head = (f"<p><b>{html.escape(matrix.agent)}</b> on {matrix.split}: {html.escape(matrix.metric)} over "
                f"{matrix.examples} examples — rows: whose prompt; columns: which model answered</p>")
        cells = "".join(f"<th>{html.escape(column)}</th>" for column in matrix.models)
        body = ""
        for label, row in zip(self.frame.index, matrix.scores):
            values = "".join((f"<td><b>{matrix.scores[row][c]:.3f}</b></td>" if row in best[c] else
                              f"<td>{matrix.scores[row][c]:.3f}</td>") for c in matrix.models)
            body += f"<tr><th>{html.escape(label)}</th>{values}</tr>"
        return f"{head}<table><tr><th>prompt of</th>{cells}</tr>{body}</table>"

    def heatmap(self) -> Any:
        """The matrix as a matplotlib heatmap, scores written in the cells."""
        import matplotlib.pyplot as plt
        import numpy as np

        values = self.frame.to_numpy(dtype=float)
        figure, axes = plt.subplots(figsize=(1.8 + 1.9 * values.shape[1], 1.2 + 0.6 * values.shape[0]))
        axes.imshow(values, cmap="viridis", vmin=0, vmax=1, aspect="auto")
        axes.set_xticks(range(values.shape[1]), [str(c) for c in self.frame.columns], rotation=15)
        axes.set_yticks(range(values.shape[0]), [str(i) for i in self.frame.index])
        axes.set_xlabel("answered by")
        for (i, j), value in np.ndenumerate(values):
            axes.text(j, i, f"{value:.3f}", ha="center", va="center", color="white" if value < 0.6 else "black")
        axes.set_title(f"{self.matrix.agent}: {self.matrix.metric} on {self.matrix.split}")
        figure.tight_layout()
        plt.close(figure)
        return figure


def cross(agent: Any, models: Iterable[str], *, split: str = "test", project: Any = None, metric: str | None = None,
          jobs: int = 1, complete: Any = None) -> CrossScores:
    """Every model's prompt (its artifact, else the runtime's fallback) sent as is to every model of
    ``models`` and scored on ``split`` — the cross-model matrix of ``rosetta evaluate --cross``."""
    import pandas as pd

    from rosetta.optimize.cross import cross_evaluate
    from rosetta.store.cross import UNCOMPILED

    loaded, _, settings = _definition(agent, project)
    matrix = cross_evaluate(loaded.definition_path, list(models), settings=settings, split=split, metric=metric,
                            jobs=jobs, complete=complete)
    labels = [f"prompt of {row}" if row != UNCOMPILED else "uncompiled render (own)" for row in matrix.scores]
    frame = pd.DataFrame([[matrix.scores[row][column] for column in matrix.models] for row in matrix.scores],
                         index=labels, columns=matrix.models)
    return CrossScores(matrix, frame)
