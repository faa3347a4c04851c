"""Convenient entry points for exploring prompt variants in Jupyter (``import rosetta.notebook as nb``).

Nothing here is a new concept: each function is a thin layer over what the CLI uses — the
renderer, the optimizer's study and evaluation, the runtime's prompt selection — that returns
pandas DataFrames, matplotlib figures or small HTML views a notebook displays well. See
``notebooks/`` for worked examples.

Importing this module imports no notebook machinery; pandas, matplotlib, optuna and IPython are
imported by the functions that need them.
"""

from __future__ import annotations

from rosetta.notebook.prompts import (
    View,
    compile,
    diff,
    knobs,
    load,
    render,
    render_table,
    show_prompts,
    signature,
)
from rosetta.notebook.optimization import (
    CrossScores,
    Evaluation,
    Optimization,
    cross,
    evaluate,
    optimize,
    sandbox,
    score_bars,
)

__all__ = ["CrossScores", "Evaluation", "Optimization", "View", "compile", "cross", "diff", "evaluate", "knobs",
           "load", "optimize", "render", "render_table", "sandbox", "score_bars", "show_prompts", "signature"]
