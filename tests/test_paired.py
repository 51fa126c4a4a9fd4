"""The paired test over test windows (`labsupport.compare.paired`): the Diebold-Mariano statistic
with the Harvey-Leybourne-
Newbold correction against a direct numpy computation of the formula, and the interval's
coverage by Monte Carlo (iid and autocorrelated loss differences)."""
import math

import numpy as np
import pytest
import torch
from scipy.stats import t as student_t

from labsupport.compare.paired import (
    PairedTest,
    diebold_mariano,
    lag_truncation,
    newey_west_variance,
)

# --- the Diebold-Mariano test with the HLN correction -------------------------------------------

def direct(d, h):
    """The formula, written out in numpy: Bartlett HAC variance of the mean with lag
    m = max(h - 1, floor(n^(1/3))), the HLN factor, t with n - 1 degrees of freedom."""
    d = np.asarray(d, dtype=float)
    n = len(d)
    m = max(h - 1, int(np.floor(np.cbrt(n) + 1e-12)))
    e = d - d.mean()
    gamma = [np.dot(e[k:], e[:n - k]) / n for k in range(m + 1)]
    lrv = gamma[0] + 2 * sum((1 - k / (m + 1)) * gamma[k] for k in range(1, m + 1))
    hln = np.sqrt((n + 1 - 2 * h + h * (h - 1) / n) / n)
    statistic = hln * d.mean() / np.sqrt(lrv / n)
    return d.mean(), statistic, np.sqrt(lrv / n) / hln, m


def test_the_statistic_and_interval_match_a_direct_computation_of_the_formula():
    d = [0.3, -0.1, 0.5, 0.2, 0.4, -0.2, 0.6, 0.1]                   # n = 8: lag max(h - 1, 2)
    for h, t_7 in ((1, 2.364624), (2, 2.364624), (4, 2.364624)):
        mean, statistic, se, m = direct(d, h)
        test = diebold_mariano(torch.tensor(d, dtype=torch.float64), overlap=h)
        assert isinstance(test, PairedTest) and (test.n, test.overlap, test.lag) == (8, h, m)
        assert test.mean == pytest.approx(mean, rel=1e-12)
        assert test.statistic == pytest.approx(statistic, rel=1e-10)
        assert (test.low, test.high) == pytest.approx((mean - t_7 * se, mean + t_7 * se), abs=1e-6)
        tail = 1 - student_t.cdf(abs(statistic), 7)
        assert test.p_value == pytest.approx(2 * tail, rel=1e-9)
    assert diebold_mariano(d).lag == 2 and diebold_mariano(d, overlap=4).lag == 3


def test_the_p_value_and_the_interval_agree():
    rng = np.random.default_rng(1)
    for shift in (0.0, 0.1, 0.2, 0.3):
        test = diebold_mariano(rng.normal(shift, 1.0, size=60), overlap=2)
        assert (test.p_value < 0.05) == test.excludes_zero
        assert test.low < test.mean < test.high


def test_the_lag_truncation():
    # floor(n^(1/3)) in exact integers: 64 ** (1 / 3) is 3.9999999999999996 in floating point
    assert [lag_truncation(n, 1) for n in (1, 7, 8, 26, 27, 63, 64, 183, 216)] == [1, 1, 2, 2, 3, 3, 4, 5, 6]
    assert lag_truncation(183, 8) == 7 and lag_truncation(8, 2) == 2


def test_the_bartlett_variance_of_a_known_sequence():
    d = np.array([1.0, -1.0, 1.0, -1.0])                           # mean 0: gammas 1, -3/4, 1/2
    assert newey_west_variance(d, 0) == pytest.approx(1.0)
    assert newey_west_variance(d, 1) == pytest.approx(1.0 + 2 * 0.5 * -0.75)
    assert newey_west_variance(d, 2) == pytest.approx(1.0 + 2 * (2 / 3 * -0.75 + 1 / 3 * 0.5))


def test_a_constant_difference_has_no_spread():
    zero = diebold_mariano(np.zeros(10))
    assert (zero.mean, zero.low, zero.high, zero.statistic, zero.p_value) == (0.0, 0.0, 0.0, 0.0, 1.0)
    shifted = diebold_mariano(np.full(10, 0.25))
    assert (shifted.low, shifted.high, shifted.p_value) == (0.25, 0.25, 0.0) and shifted.statistic == math.inf


def test_bad_differences_are_refused():
    with pytest.raises(ValueError, match=r"loss differences d must be 1-D \(n,\), one per test window, "
                                         r"got shape \(2, 3\)"):
        diebold_mariano(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"needs at least 2 test windows, got 1"):
        diebold_mariano([0.1])
    with pytest.raises(ValueError, match=r"2 of 4 loss differences are NaN or inf"):
        diebold_mariano([0.1, float("nan"), float("inf"), 0.2])
    with pytest.raises(ValueError, match=r"overlap must be a positive int, got 0"):
        diebold_mariano([0.1, 0.2, 0.3], overlap=0)
    with pytest.raises(ValueError, match=r"overlap 3 must be below the number of windows 3"):
        diebold_mariano([0.1, 0.2, 0.3], overlap=3)
    with pytest.raises(ValueError, match=r"level must be a probability strictly between 0 and 1, got 1.5"):
        diebold_mariano([0.1, 0.2, 0.3], level=1.5)


# --- coverage by Monte Carlo ----------------------------------------------------------------------

def coverage(draws) -> float:
    return float(np.mean([(lambda t: t.low <= 0.0 <= t.high)(diebold_mariano(d)) for d in draws]))


def iid_t_coverage(draws) -> float:
    n = draws.shape[1]
    half = student_t.ppf(0.975, n - 1) * draws.std(axis=1, ddof=1) / np.sqrt(n)
    return float(np.mean(np.abs(draws.mean(axis=1)) <= half))


def test_the_interval_covers_the_true_mean_of_iid_differences_about_95_percent_of_the_time():
    draws = np.random.default_rng(2024).standard_normal((2000, 183))
    assert 0.93 <= coverage(draws) <= 0.97


def test_the_hac_interval_still_covers_autocorrelated_differences_where_the_iid_one_does_not():
    rng = np.random.default_rng(7)
    noise = rng.standard_normal((2000, 183 + 50))
    d = np.zeros_like(noise)
    for t in range(1, noise.shape[1]):                              # AR(1), phi = 0.5
        d[:, t] = 0.5 * d[:, t - 1] + noise[:, t]
    d = d[:, 50:]                                                   # past the start-up
    hac, iid = coverage(d), iid_t_coverage(d)
    assert hac >= 0.90
    assert iid <= 0.82 and hac - iid >= 0.1
