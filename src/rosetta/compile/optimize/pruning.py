"""Stopping weak variants early: optuna's successive halving or median pruner, plus a race
against the incumbent on the same examples."""

from __future__ import annotations

from typing import Any

import optuna


class RacePruner(optuna.pruners.BasePruner):
    """``base`` (successive halving or median), plus a race against the incumbent: every trial sees
    the dev examples in the same order, so after ``n`` of them its mean is compared with the best
    finished trial's mean over the same ``n`` (a paired comparison). It stops when it trails by
    more than ``slack / sqrt(n)``, and, once ``decisive`` examples are in (half of dev), when it
    is not ahead: a variant that only ties the incumbent cannot replace it."""

    def __init__(self, base: optuna.pruners.BasePruner, slack: float = 0.5, decisive: int | None = None) -> None:
        self.base = base
        self.slack = slack
        self.decisive = decisive

    def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
        if self.base.prune(study, trial):
            return True
        step = trial.last_step
        if step is None:
            return False
        finished = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
                    if step in t.intermediate_values]
        if not finished:
            return False
        incumbent: Any = max(finished, key=lambda t: (t.value, -t.number))
        current, rival = trial.intermediate_values[step], incumbent.intermediate_values[step]
        if self.decisive is not None and step >= self.decisive and step < max(incumbent.intermediate_values):
            return current <= rival
        return current < rival - self.slack / step ** 0.5
