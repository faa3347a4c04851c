"""The tests match textbook values and independent computations (chi-squared, Welch's formula)."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats as scipy_stats

from rosetta.rollout.stats import two_proportion_z, welch_t

# Welch's t-test, example 1 of the Wikipedia article: t = -2.46, df = 24.99, p = 0.021 (A1 - A2)
A1 = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4]
A2 = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4]


def test_two_proportion_z_textbook_values():
    result = two_proportion_z(45, 100, 60, 100)  # pooled rate 0.525
    assert (result.control, result.treatment) == (0.45, 0.60)
    assert result.effect == pytest.approx(0.15)
    assert result.statistic == pytest.approx(0.15 / math.sqrt(0.525 * 0.475 * (2 / 100)))
    assert result.statistic == pytest.approx(2.1240, abs=1e-4)
    assert result.p_value == pytest.approx(math.erfc(result.statistic / math.sqrt(2)))
    assert result.p_value == pytest.approx(0.0337, abs=1e-4)


@pytest.mark.parametrize("counts", [(45, 100, 60, 100), (120, 1000, 151, 1000), (30, 70, 10, 55), (7, 9, 2, 11)])
def test_two_proportion_z_equals_the_uncorrected_chi_squared_test(counts):
    x_c, n_c, x_t, n_t = counts
    result = two_proportion_z(*counts)
    table = scipy_stats.chi2_contingency([[x_c, n_c - x_c], [x_t, n_t - x_t]], correction=False)
    assert result.statistic ** 2 == pytest.approx(table.statistic)
    assert result.p_value == pytest.approx(table.pvalue)
    assert math.copysign(1, result.statistic) == math.copysign(1, x_t / n_t - x_c / n_c)


def test_welch_textbook_values():
    result = welch_t(A1, A2)  # control A1, treatment A2
    assert result.statistic == pytest.approx(2.46, abs=0.005)
    assert result.df == pytest.approx(24.99, abs=0.005)
    assert result.p_value == pytest.approx(0.021, abs=0.0005)
    assert result.effect == pytest.approx(sum(A2) / 15 - sum(A1) / 15)


def test_welch_matches_its_formula_and_scipy():
    rng = random.Random(7)
    control = [rng.gauss(1.0, 0.3) for _ in range(40)]
    treatment = [rng.gauss(1.2, 0.9) for _ in range(25)]
    result = welch_t(control, treatment)
    m_c, m_t = sum(control) / 40, sum(treatment) / 25
    v_c = sum((x - m_c) ** 2 for x in control) / 39 / 40
    v_t = sum((x - m_t) ** 2 for x in treatment) / 24 / 25
    t = (m_t - m_c) / math.sqrt(v_c + v_t)
    df = (v_c + v_t) ** 2 / (v_c ** 2 / 39 + v_t ** 2 / 24)
    assert result.statistic == pytest.approx(t) and result.df == pytest.approx(df)
    assert result.p_value == pytest.approx(2 * scipy_stats.t.sf(abs(t), df))
    reference = scipy_stats.ttest_ind(treatment, control, equal_var=False)
    assert (result.statistic, result.p_value) == pytest.approx((reference.statistic, reference.pvalue))


def test_undefined_tests_give_no_p_value():
    assert two_proportion_z(0, 0, 3, 10).p_value is None
    assert two_proportion_z(10, 10, 20, 20).p_value is None  # everyone succeeded: no variance
    assert welch_t([1.0], [1.0, 2.0]).p_value is None
    assert welch_t([0.000225] * 7, [0.000225] * 23).p_value is None  # identical constants
    assert welch_t([1.0] * 5, [2.0] * 5).p_value == 0.0  # two different constants differ for certain
    with pytest.raises(ValueError):
        two_proportion_z(11, 10, 1, 10)
