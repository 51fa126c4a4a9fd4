"""A paired test of two forecasters over the same test windows: pure math on the loss
differences ``d_t = loss_a(t) - loss_b(t)``, one per window, t = 1..n.

The Diebold-Mariano test (Diebold & Mariano 1995, "Comparing predictive accuracy", Journal
of Business & Economic Statistics 13(3), 253-263) asks whether the mean of d is zero. Test
windows a day apart whose targets overlap, and errors that persist from day to day, make
the d_t autocorrelated, so the variance of their mean is a long-run variance, estimated
with the Bartlett kernel (Newey & West 1987, "A simple, positive semi-definite,
heteroskedasticity and autocorrelation consistent covariance matrix", Econometrica 55(3),
703-708). Harvey, Leybourne & Newbold (1997, "Testing the equality of prediction mean
squared errors", International Journal of Forecasting 13(2), 281-291) correct the statistic
for small samples and compare it with a Student-t with n - 1 degrees of freedom.

Math:
    ``m = max(h - 1, floor(n^(1/3)))``, h = the windows whose targets overlap one window's;
    ``gamma_k = (1/n) sum_{t>k} (d_t - dbar)(d_{t-k} - dbar)``;
    ``V = gamma_0 + 2 sum_{k=1..m} (1 - k/(m+1)) gamma_k`` (the Bartlett long-run variance);
    ``DM = dbar / sqrt(V / n)``; ``DM* = DM sqrt((n + 1 - 2h + h(h - 1)/n) / n)``;
    p = 2 (1 - F_{n-1}(|DM*|)) (``scipy.stats.t``); the interval
    ``dbar +- t_{n-1} sqrt(V / n) / sqrt(factor)`` holds exactly the means the test at that
    level does not reject.

>>> test = diebold_mariano([0.3, -0.1, 0.5, 0.2, 0.4, -0.2, 0.6, 0.1])
>>> round(test.mean, 3), test.lag, test.excludes_zero
(0.225, 2, True)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import t as student_t

from ..validation import check_positive_int

__all__ = ["PairedTest", "diebold_mariano", "lag_truncation", "newey_west_variance"]


def _check_open_probability(name: str, p) -> float:
    expected = f"{name} must be a probability strictly between 0 and 1, got {p!r}"
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(expected)
    if not 0.0 < p < 1.0:
        raise ValueError(expected)
    return float(p)


# --- the long-run variance ---------------------------------------------------------------------

def lag_truncation(n: int, overlap: int) -> int:
    """The Bartlett window's last lag: ``max(h - 1, floor(n^(1/3)))`` for n differences of
    which ``overlap`` = h share targets (the cube root in exact integers)."""
    n, overlap = check_positive_int("n", n), check_positive_int("overlap", overlap)
    root = round(n ** (1.0 / 3.0))
    while root ** 3 > n:
        root -= 1
    while (root + 1) ** 3 <= n:
        root += 1
    return max(overlap - 1, root)


def newey_west_variance(d, lag: int) -> float:
    """The Bartlett-kernel long-run variance of ``d (n,)`` with lags 0..``lag``.

    Math: ``gamma_0 + 2 sum_{k=1..lag} (1 - k/(lag+1)) gamma_k``, with
    ``gamma_k = (1/n) sum_{t>k} (d_t - dbar)(d_{t-k} - dbar)``; never negative.
    """
    d = np.asarray(d, dtype=np.float64)
    e, n = d - d.mean(), len(d)
    total = float(e @ e) / n
    for k in range(1, min(lag, n - 1) + 1):
        total += 2.0 * (1.0 - k / (lag + 1.0)) * float(e[k:] @ e[:-k]) / n
    return max(total, 0.0)


# --- the test ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class PairedTest:
    """The Diebold-Mariano test (HLN-corrected) of the mean loss difference a - b: the mean
    over ``n`` windows, its ``level`` interval [``low``, ``high``], the statistic, the
    two-sided p-value, and the Bartlett ``lag`` and window ``overlap`` it used."""

    mean: float
    low: float
    high: float
    statistic: float
    p_value: float
    n: int
    lag: int
    overlap: int
    level: float = 0.95

    @property
    def excludes_zero(self) -> bool:
        """True when the interval lies wholly on one side of zero (the test rejects)."""
        return self.low > 0.0 or self.high < 0.0


def _differences(d) -> np.ndarray:
    """``d`` as a float64 array (n,), refused unless 1-D, of length >= 2 and finite."""
    if isinstance(d, torch.Tensor):
        d = d.detach().cpu().double().numpy()
    d = np.asarray(d, dtype=np.float64)
    if d.ndim != 1:
        raise ValueError(f"loss differences d must be 1-D (n,), one per test window, got shape {d.shape}")
    if len(d) < 2:
        raise ValueError(f"the paired test needs at least 2 test windows, got {len(d)}")
    bad = int((~np.isfinite(d)).sum())
    if bad:
        raise ValueError(f"{bad} of {len(d)} loss differences are NaN or inf; a model with a non-finite "
                         "forecast or score failed and cannot be tested")
    return d


def diebold_mariano(d, *, overlap: int = 1, level: float = 0.95) -> PairedTest:
    """Test whether the mean of the loss differences ``d (n,)`` (model a minus model b, one
    per test window, in time order) is zero; ``overlap`` = h, the number of test windows
    whose targets overlap a given one's (``ceil(horizon / stride)``; 1 when none do).

    Diebold & Mariano (1995), J. Business & Economic Statistics 13(3); the long-run variance
    by the Bartlett kernel of Newey & West (1987), Econometrica 55(3); the small-sample
    factor and the Student-t with n - 1 degrees of freedom of Harvey, Leybourne & Newbold
    (1997), Int. J. Forecasting 13(2). The module's docstring has the formulas.
    """
    d = _differences(d)
    n = len(d)
    overlap = check_positive_int("overlap", overlap)
    if overlap >= n:
        raise ValueError(f"overlap {overlap} must be below the number of windows {n}: the small-sample "
                         "factor (n - h)(n - h + 1) / n^2 needs h < n")
    level = _check_open_probability("level", level)
    lag = lag_truncation(n, overlap)
    mean = float(d.mean())
    factor = math.sqrt((n + 1 - 2 * overlap + overlap * (overlap - 1) / n) / n)
    se = math.sqrt(newey_west_variance(d, lag) / n) / factor             # of the mean, HLN-scaled
    if se == 0.0:
        statistic = 0.0 if mean == 0.0 else math.copysign(math.inf, mean)
        return PairedTest(mean, mean, mean, statistic, 1.0 if mean == 0.0 else 0.0, n, lag, overlap, level)
    statistic = mean / se
    half = float(student_t.ppf(0.5 + level / 2.0, n - 1)) * se
    p_value = 2.0 * float(student_t.sf(abs(statistic), n - 1))
    return PairedTest(mean, mean - half, mean + half, statistic, min(1.0, p_value), n, lag, overlap, level)
