"""Power laws on log-log axes: how a cost grows with the length, fitted by ``numpy.polyfit``
on the logs; no torch and no measurement, so that plots and sweeps fit without either.

Scaling claims are fitted, never read off a plot: `fit_power_law` gives the exponent
that a sweep's upper lengths follow.
"""
from __future__ import annotations

import math
import numbers

import numpy as np


def fit_power_law(x, y, *, last: int | None = None) -> tuple[float, float]:
    """Least-squares fit of ``y = prefactor * x ** exponent`` on log-log axes.

    Math: the slope and intercept of the line ``log y = exponent log x + log prefactor``.
    ``last`` fits only the last ``last`` points (the upper lengths, where the leading
    term dominates), an int >= 2. Every value must be finite: a NaN or inf (a point that
    did not run, a time that overflowed) raises instead of turning the fit into NaN.
    Returns ``(exponent, prefactor)``.

    >>> round(fit_power_law([1, 2, 4, 8], [3, 12, 48, 192])[0], 6)
    2.0
    """
    xs, ys = [float(v) for v in x], [float(v) for v in y]
    if len(xs) != len(ys):
        raise ValueError(f"x and y differ in length: {len(xs)} != {len(ys)}")
    _check_finite("x", xs)
    _check_finite("y", ys)
    if last is not None:
        _check_last(last)
        xs, ys = xs[-last:], ys[-last:]
    if len(xs) < 2 or len(set(xs)) < 2:
        raise ValueError(f"need at least 2 distinct x values to fit, got {xs}")
    if min(xs) <= 0 or min(ys) <= 0:
        raise ValueError(f"a power law needs positive x and y, got x={xs}, y={ys}")
    slope, intercept = np.polyfit(np.log(xs), np.log(ys), 1)
    return float(slope), math.exp(intercept)


def _check_finite(name: str, values: list[float]) -> None:
    """Raise naming the first value that is NaN or infinite, and where it is."""
    for i, v in enumerate(values):
        if not math.isfinite(v):
            raise ValueError(f"{name} must be finite, got {v} at index {i}; leave out the points "
                             "that were not measured")


def _check_last(last) -> None:
    """``last`` counts points: an int >= 2 (``xs[-0:]`` would silently be every point)."""
    expected = f"last must be an int >= 2 (a fit needs two points), got {last!r}"
    if isinstance(last, bool) or not isinstance(last, numbers.Integral):
        raise TypeError(expected)
    if last < 2:
        raise ValueError(expected)
