"""``rosetta trials``: what the last search of an agent on a model tried — each unit of the race
(a candidate answering one rung's dev rows) with its knobs, kind, score, calls and cost — and
optuna's own plots of it as one HTML file. Every score here is on dev, where the race chose: the
best of them overstates what the winner scores on new rows (its test score, in the artifact, does not)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from rosetta.cli.common import (
    ListFormat,
    err,
    load_agent,
    out,
    print_note,
    project_settings,
    relative,
    reports_errors,
)
from rosetta.errors import Problem, UsageError


@reports_errors
def trials(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(help="Agent name or definition path.")],
    model: Annotated[str, typer.Option("--model", "-m", help="The model the search optimized for.")],
    storage: Annotated[str | None, typer.Option("--storage", help="The storage the search used, when not the "
                                                "project's journal (sqlite:///..., postgresql://...).")] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="Also write optuna's plots (optimization history, "
                                              "knob importances, score against prompt tokens and against calls) "
                                              "to this HTML file.")] = None,
    format: Annotated[ListFormat, typer.Option("--format", "-f", help="Output format.")] = ListFormat.text,
) -> None:
    """List the trials of the last search of AGENT on a model: per unit of the race, the candidate,
    rung and dev rows, its knobs and kind (seeded or drawn), score, state, calls, cost and prompt
    tokens. Scores are on dev, where the race chose."""
    from rosetta.optimize.target import last_study
    from rosetta.providers.catalog import catalog_for

    settings = project_settings(ctx)
    loaded = load_agent(ctx, agent)
    model_id = catalog_for(settings.root, settings.models).resolve(model, unlisted=True).id
    study, label = last_study(settings.root, settings.compiled_dir, loaded.name, model_id, storage)
    rows = [trial_row(trial) for trial in study.trials]
    if format is ListFormat.json:
        sys.stdout.write(json.dumps({"agent": loaded.name, "model": model_id, "study": study.study_name,
                                     "storage": label, "scores": SCORES_NOTE, "trials": rows}, indent=2,
                                    default=str) + "\n")
    else:
        _print(rows, f"{loaded.name} on {model_id}: {len(rows)} trials of study {study.study_name} ({label})")
    if plot is not None:
        write_plots(study, plot, title=f"{loaded.name} on {model_id}: {study.study_name}")
        err.print(f"plots written to {escape(str(relative(plot)))}")


SCORES_NOTE = ("on dev rows, where the race chose: the winner's is optimistic (its interval ignores that "
               "selection); its test score in the artifact, with test_ci95, is the honest estimate")


def trial_row(trial: Any) -> dict[str, Any]:
    """One optuna trial of the race as plain data; ``kind`` is what the candidate is (see
    :meth:`~rosetta.optimize.space.SearchSpace.kind`), ``origin`` whether every seed holds it,
    ``score`` the metric on the rows it answered and ``race_score`` what the race ranked it on (the
    correct label's probability where the model gives log-probabilities, else the same score)."""
    from rosetta.optimize.space import describe_params, origin

    attrs = trial.user_attrs
    values = trial.values or [None]
    kind = attrs.get("kind") or ("unoptimized" if attrs.get("default") else None)  # studies from before kinds
    plain = attrs.get("plain") or []
    return {"number": trial.number, "candidate": attrs.get("candidate"), "rung": attrs.get("rung"),
            "phase": attrs.get("phase") or f"rung {attrs.get('rung')}", "rows": attrs.get("rows"), "state": trial.state.name.lower(),
            "score": sum(plain) / len(plain) if plain else values[0], "race_score": values[0],
            "stopped": attrs.get("stopped"), "calls": attrs.get("calls"), "cost": attrs.get("cost"),
            "prompt_tokens": attrs.get("prompt_tokens"), "input_cost": attrs.get("input_cost"),
            "default": bool(attrs.get("default")),
            "kind": kind, "origin": origin(kind) if kind else None, "knobs": dict(trial.params),
            "choices": attrs.get("knobs_text") or describe_params(dict(trial.params))}


def _print(rows: list[dict[str, Any]], title: str) -> None:
    """The units as a table (state, race score, score, calls, cost, tokens), then each candidate's
    choices once, in words."""
    import textwrap

    width = max(out.width, 40)
    out.print(escape(textwrap.fill(title, width, subsequent_indent="  ", break_on_hyphens=False)), soft_wrap=True)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    odds = any(r["race_score"] is not None and r["score"] is not None and abs(r["race_score"] - r["score"]) > 1e-9
               for r in rows)
    priced = any(row.get("input_cost") for row in rows)
    columns = ("#", "Cand.", "Phase", "Rows", "State", *(("Odds",) if odds else ()), "Score", "Calls", "Cost", "Tokens",
               *(("In $/call",) if priced else ()))
    for column in columns:
        table.add_column(column, justify="left" if column == "State" else "right", no_wrap=True)
    choices: dict[Any, str] = {}
    for row in rows:
        state = "stopped" if row["stopped"] else row["state"]
        race = (_cell(row["race_score"], "{:.3f}"),) if odds else ()
        table.add_row(str(row["number"]), _cell(row["candidate"]), row["phase"], _cell(row["rows"]), state,
                      *race, _cell(row["score"], "{:.3f}"), _cell(row["calls"]), _cell(row["cost"] or None, "${:.4f}"),
                      _cell(row["prompt_tokens"] or None),
                      *((_cell(row.get("input_cost") or None, "${:.5f}"),) if priced else ()))
        kind = f" ({row['kind']}, {row['origin']})" if row["kind"] else ""
        choices.setdefault(row["candidate"], kind + ": " + (row["choices"] or "the defaults"))
    out.print(table)
    notes = ["stopped: not answered, the race ended or the budget ran out first",
             f"Score: the metric on the rows the unit answered, {SCORES_NOTE}"]
    if priced:
        notes.append("In $/call: the prompt's input per call in service, its cached prefix at the host's cache-read "
                     "price (litellm's); Cost: what the unit's calls were billed")
    if odds:
        notes.insert(1, "Odds: what the race ranked on, the probability the model gave the correct label "
                        "(finer than right or wrong on a few rows)")
    for note in notes:
        print_note(note)
    for candidate, text in choices.items():
        line = textwrap.fill(f"candidate {_cell(candidate)}{text}", width, subsequent_indent="    ",
                             break_long_words=False, break_on_hyphens=False)
        out.print(escape(line), soft_wrap=True)


def _cell(value: Any, shape: str = "{}") -> str:
    return "-" if value is None else shape.format(value)


def write_plots(study: Any, path: Path, *, title: str) -> None:
    """optuna's plotly plots of ``study`` in one self-contained HTML file (plotly.js inlined once,
    so it opens offline): optimization history, knob importances, and the Pareto fronts of score against prompt tokens
    and against calls."""
    import html
    import warnings

    from optuna import visualization
    from optuna.exceptions import ExperimentalWarning

    from rosetta.third_party import quiet_optuna

    if not visualization.is_available():
        raise UsageError(Problem("--plot needs plotly", hint="pip install 'rosetta-prompts[plots]'"))
    from rosetta.fileio import write_atomic
    from rosetta.notebook.optimization import score_against

    finished = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    if not finished:
        raise UsageError(Problem(f"study {study.study_name} has no finished trial to plot"))
    figures = [("Optimization history", visualization.plot_optimization_history(study, target_name="score"))]
    with warnings.catch_warnings(), quiet_optuna():  # no "A new study created in memory" lines
        warnings.simplefilter("ignore", ExperimentalWarning)
        if len({tuple(sorted(t.params.items())) for t in finished}) > 1:
            figures.append(("Knob importances", visualization.plot_param_importances(study, target_name="score")))
        for cost, name in (("prompt_tokens", "prompt tokens"), ("calls", "calls")):
            figures.append((f"Score against {name}", visualization.plot_pareto_front(
                score_against(study, cost), target_names=["score", name])))
    sections = [f"<h2>{html.escape(name)}</h2>" + figure.to_html(full_html=False, include_plotlyjs=index == 0)
                for index, (name, figure) in enumerate(figures)]
    write_atomic(path, f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
                       f"</head><body><h1>{html.escape(title)}</h1>{''.join(sections)}</body></html>\n")
