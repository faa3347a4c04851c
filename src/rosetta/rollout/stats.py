"""The two tests an experiment is decided by, both two-sided, treatment against control.

- Rates (valid, success): the pooled two-proportion z-test,
  ``z = (p_t - p_c) / sqrt(p (1 - p) (1/n_c + 1/n_t))`` with ``p`` the pooled rate; the same
  p-value as a chi-squared test of the 2×2 table without continuity correction.
- Means (score, latency, cost): Welch's t-test (``scipy.stats.ttest_ind(equal_var=False)``), which
  does not assume the arms have equal variances.

A test that is undefined on the data (an empty arm, no variance at all, a value that is not
finite) reports ``p_value=None`` rather than a number that would look like evidence. Means and
tests never overflow: Welch's t is the same for the values divided by any positive number, so
huge samples are scaled down before they are squared.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TestResult:
    """One comparison of treatment against control."""

    test: str  # "z" | "welch"
    control: float  # the control arm's rate or mean (nan when it has no samples)
    treatment: float
    n_control: int
    n_treatment: int
    statistic: float | None  # z or t; None when the test is undefined
    p_value: float | None  # two-sided
    df: float | None = None  # Welch–Satterthwaite degrees of freedom (welch only)

    @property
    def effect(self) -> float:
        """Treatment minus control."""
        return self.treatment - self.control


def two_proportion_z(successes_control: int, n_control: int, successes_treatment: int,
                     n_treatment: int) -> TestResult:
    """Pooled two-proportion z-test of ``successes / n`` between the arms."""
    from scipy.stats import norm

    for count, total in ((successes_control, n_control), (successes_treatment, n_treatment)):
        if total < 0 or not 0 <= count <= total:
            raise ValueError(f"{count} successes out of {total} is not a proportion")
    rate_c = successes_control / n_control if n_control else math.nan
    rate_t = successes_treatment / n_treatment if n_treatment else math.nan
    if not n_control or not n_treatment:
        return TestResult("z", rate_c, rate_t, n_control, n_treatment, None, None)
    pooled = (successes_control + successes_treatment) / (n_control + n_treatment)
    error = math.sqrt(pooled * (1 - pooled) * (1 / n_control + 1 / n_treatment))
    if error == 0:
        return TestResult("z", rate_c, rate_t, n_control, n_treatment, None, None)
    z = (rate_t - rate_c) / error
    return TestResult("z", rate_c, rate_t, n_control, n_treatment, z, float(2 * norm.sf(abs(z))))


def mean(values: Sequence[float]) -> float:
    """The mean of ``values``: nan for none, or for infinities of both signs; never an OverflowError."""
    if not values:
        return math.nan
    try:
        return math.fsum(values) / len(values)
    except OverflowError:  # finite values whose sum is not: add them as fractions of the largest
        largest = max(abs(value) for value in values)
        return largest * (math.fsum(value / largest for value in values) / len(values))
    except ValueError:  # inf and -inf
        return math.nan


_SCALE_ABOVE = 1e100
"""Samples with a value beyond this are divided by their largest magnitude before Welch's t."""


def welch_t(control: Sequence[float], treatment: Sequence[float]) -> TestResult:
    """Welch's unequal-variances t-test of the arms' means."""
    from scipy.stats import ttest_ind

    mean_c, mean_t = mean(control), mean(treatment)
    sizes = len(control), len(treatment)
    if min(sizes) < 2 or not all(math.isfinite(value) for value in (*control, *treatment)):
        return TestResult("welch", mean_c, mean_t, *sizes, None, None)
    largest = max(abs(value) for value in (*control, *treatment))
    if largest > _SCALE_ABOVE:  # t and df do not change; the squares no longer overflow
        control, treatment = [value / largest for value in control], [value / largest for value in treatment]
    if min(control) == max(control) and min(treatment) == max(treatment):  # no variance: nothing to estimate
        certain = None if control[0] == treatment[0] else 0.0  # two different constants differ for sure
        return TestResult("welch", mean_c, mean_t, *sizes, None, certain)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        outcome = ttest_ind(list(treatment), list(control), equal_var=False)
    statistic, p_value = float(outcome.statistic), float(outcome.pvalue)
    if math.isnan(p_value) or any("catastrophic cancellation" in str(w.message) for w in caught):
        return TestResult("welch", mean_c, mean_t, *sizes, None, None)  # nearly identical samples: unreliable
    return TestResult("welch", mean_c, mean_t, *sizes, statistic, p_value, float(outcome.df))
