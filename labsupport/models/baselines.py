"""The protocol's two baselines without training: the closed-form ridge and the seasonal naive."""
from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import nn

from ..validation import (
    check_nonnegative_number,
    check_positive_int,
    check_positive_number,
    check_rank,
)
from .base import Forecaster


class RidgeForecaster(Forecaster):
    """Closed-form ridge regression from the lookback window to the horizon: the linear
    baseline that every accuracy table carries beside the trained models.

    Math: ``y = W x + b`` over time, one map shared by the channels (channels are folded
    into the rows, as DLinear does); ``W = argmin |Y - X W|^2 + lambda |W|^2`` with the
    intercept unpenalised, solved exactly in float64. `fit` solves it for a grid of
    penalties ``lambda`` on the training windows and keeps the one with the lowest
    validation MSE.
    Shapes: x (B, L, C) -> (B, T, C). ``revin=True`` first normalises each window and
    channel by its own mean m and standard deviation s and undoes it on the forecast (RevIN
    without the learned affine map), like the trained models' instance normalisation. The
    error it is judged by is then the denormalised one, ``s (y' - W x' - b)`` for the
    normalised row (x', y'), so each row is weighted by its spread squared:
    ``W = argmin sum_r s_r^2 |y'_r - W x'_r - b|^2 + lambda mean(s^2) |W|^2``
    (the penalty scaled by the mean weight, so that ``lambda`` means what it means without
    revin). An unweighted solve would over-weight the calm windows by ``1 / s^2``.
    The weights are parameters without gradients, so parameter counts include them.
    ``penalties``: finite numbers >= 0 (default `PENALTIES`); ``eps`` > 0 keeps a constant
    window's standard deviation above zero. A penalty that leaves the least squares singular
    (0 on fewer training rows than lags, or on inputs without variance) has no unique
    solution and is never kept (its ``validation_mse`` is NaN), nor is one whose solution is
    not finite.

    >>> x = torch.randn(200, 8, 1)
    >>> y = x[:, -2:] * 2.0                           # the last two steps, doubled
    >>> ridge = RidgeForecaster(lookback=8, horizon=2).fit((x, y), (x, y))
    >>> torch.allclose(ridge(x), y, atol=1e-3)
    True
    """

    PENALTIES = tuple(10.0 ** (k / 2) for k in range(-6, 11))      # 1e-3 .. 1e5, half decades

    def __init__(self, *, lookback: int, horizon: int, channels: int = 1, penalties=None,
                 revin: bool = False, eps: float = 1e-5):
        super().__init__(lookback=lookback, horizon=horizon, channels=channels, revin=revin)
        self.penalties = self.PENALTIES if penalties is None else _penalties(penalties)
        self.eps = check_positive_number("eps", eps)
        self.weight = nn.Parameter(torch.zeros(self.horizon, self.lookback), requires_grad=False)   # (T, L)
        self.bias = nn.Parameter(torch.zeros(self.horizon), requires_grad=False)                    # (T,)
        self.penalty: float | None = None
        self.validation_mse: dict = {}

    def _instance_norm(self, revin: bool, affine: bool) -> bool:
        """The ridge normalises inside its float64 solve (`_rows`): a flag, not a module."""
        return revin

    def _rows(self, x: torch.Tensor):
        """(B, L, C) -> rows (B*C, L) in float64, with the per-row statistics when revin."""
        rows = x.transpose(1, 2).reshape(-1, x.shape[1]).double()         # (B*C, L)
        if not self.revin:
            return rows, None
        mean = rows.mean(dim=1, keepdim=True)                             # (B*C, 1)
        std = (rows.var(dim=1, keepdim=True, unbiased=False) + self.eps).sqrt()
        return (rows - mean) / std, (mean, std)

    def _pairs(self, data, name: str):
        if not (isinstance(data, (tuple, list)) and len(data) == 2
                and all(isinstance(t, torch.Tensor) for t in data)):
            raise TypeError(f"{name} must be an (inputs (N, {self.lookback}, {self.channels}), "
                            f"targets (N, {self.horizon}, {self.channels})) pair of tensors")
        x, y = data
        self.check_window(x, f"{name} inputs")
        self.check_window(y, f"{name} targets", length=self.horizon)
        if len(x) != len(y) or len(x) == 0:
            raise ValueError(f"{name}: {len(x)} inputs and {len(y)} targets; expected the same, "
                             "non-zero number of windows")
        if not (torch.isfinite(x).all() and torch.isfinite(y).all()):
            raise ValueError(f"{name} holds NaN or inf values; clean or drop those windows first")
        X, stats = self._rows(x)                                          # (N*C, L)
        Y = y.transpose(1, 2).reshape(-1, self.horizon).double()          # (N*C, T)
        if stats is not None:
            Y = (Y - stats[0]) / stats[1]
        return X, Y, stats

    @torch.no_grad()
    def fit(self, train, val) -> "RidgeForecaster":
        """Solve the ridge regression on ``train`` for every penalty, keep the one with the
        lowest MSE on ``val``; both are ``(inputs (N, L, C), targets (N, T, C))`` pairs."""
        X, Y, stats = self._pairs(train, "train")
        # Row weights: the spread squared under revin (the denormalised error), else 1;
        # divided by their mean, so the penalty grid keeps its meaning.
        weight = torch.ones(len(X), 1, dtype=X.dtype) if stats is None else stats[1] ** 2   # (N*C, 1)
        weight = weight / weight.mean()
        x_mean = (weight * X).sum(dim=0) / weight.sum()                   # (L,): weighted means
        y_mean = (weight * Y).sum(dim=0) / weight.sum()                   # (T,)
        root = weight.sqrt()
        Xc, Yc = root * (X - x_mean), root * (Y - y_mean)                 # (N*C, L), (N*C, T)
        evals, evecs = torch.linalg.eigh(Xc.T @ Xc)                       # (L,), (L, L)
        projected = evecs.T @ (Xc.T @ Yc)                                 # (L, T)
        Xv, Yv, stats = self._pairs(val, "val")
        # X^T X + penalty I singular (to float64's precision) leaves the solution not unique:
        # penalty 0 on fewer rows than lags, or on inputs without variance. RevIN's rows all
        # have mean 0, so one direction (the constant) is null and harmless: it is left out.
        singular = float(evals.max().clamp_min(0)) * len(evals) * torch.finfo(torch.float64).eps
        harmless = 1 if self.revin else 0
        best = None
        for penalty in self.penalties:
            kept = evals + penalty > singular                             # (L,): directions solved for
            if int((~kept).sum()) > harmless:
                self.validation_mse[penalty] = math.nan                  # no unique solution: never kept
                continue
            scale = torch.where(kept, evals + penalty, math.inf)         # a left-out direction: 0
            W = evecs @ (projected / scale[:, None])                      # (L, T)
            b = y_mean - x_mean @ W                                       # (T,)
            mse = self._denormalised_mse(Xv @ W + b, Yv, stats)
            self.validation_mse[penalty] = mse
            if math.isfinite(mse) and (best is None or mse < best[0]):
                best = (mse, penalty, W, b)
        if best is None:
            raise ValueError(f"RidgeForecaster.fit: no penalty of {self.penalties} gives a finite validation "
                             f"MSE (got {list(self.validation_mse.values())}){self._singular_note(X)}; "
                             "pass larger penalties, e.g. penalties=[1.0, 10.0]")
        _, self.penalty, W, b = best
        self.weight.copy_(W.T.to(self.weight.dtype))
        self.bias.copy_(b.to(self.bias.dtype))
        return self

    def _singular_note(self, X) -> str:
        """Why penalty 0 had no unique solution, for `fit`'s message ('' when it is not given)."""
        if 0.0 not in self.penalties:
            return "; the inputs have too little variance for them"
        rows, lags = X.shape
        why = (f"{rows} training rows (windows x channels) for {lags} lags and an intercept"
               if rows <= lags - (1 if self.revin else 0) else
               "the training inputs do not vary in every lag (e.g. constant windows)")
        return (f"; penalty 0 leaves the least squares singular: {why}, so its solution is not unique and "
                "its validation MSE would mean nothing")

    @staticmethod
    def _denormalised_mse(pred, target, stats) -> float:
        if stats is not None:
            pred, target = pred * stats[1] + stats[0], target * stats[1] + stats[0]
        return (pred - target).pow(2).mean().item()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.penalty is None:
            raise RuntimeError("RidgeForecaster is not fitted: call .fit(train, val) first")
        self.check_window(x)
        B, L, C = x.shape
        rows, stats = self._rows(x)                                       # (B*C, L)
        y = rows @ self.weight.double().T + self.bias.double()            # (B*C, T)
        if stats is not None:
            y = y * stats[1] + stats[0]
        return y.view(B, C, self.horizon).transpose(1, 2).to(x.dtype)     # (B, T, C)

    def extra_repr(self) -> str:
        return (f"lookback={self.lookback}, horizon={self.horizon}, channels={self.channels}, "
                f"revin={self.revin}, penalty={self.penalty}")


def _penalties(penalties) -> tuple[float, ...]:
    """The ridge's penalties as floats, each finite and >= 0 (a NaN or inf would make every
    forecast NaN; a negative one can make the system singular)."""
    if isinstance(penalties, (str, bytes)) or not isinstance(penalties, Iterable):
        raise TypeError(f"penalties must be a sequence of numbers, e.g. [1.0, 10.0], got "
                        f"{type(penalties).__name__} {penalties!r}")
    values = tuple(penalties)
    expected = f"penalties must be a non-empty sequence of finite numbers >= 0, got {values!r}"
    try:
        checked = tuple(check_nonnegative_number("penalty", p) for p in values)
    except (TypeError, ValueError) as err:            # the same kind of mistake, said of the sequence
        raise type(err)(expected) from None
    if not checked:
        raise ValueError(expected)
    return checked


def seasonal_naive(x: torch.Tensor, period: int, horizon: int) -> torch.Tensor:
    """Repeat the last ``period`` steps of x (B, L, C) to fill ``horizon`` steps: (B, T, C).

    Math: ``y_t = x_{L - period + (t mod period)}``, t = 0 .. horizon - 1.

    >>> seasonal_naive(torch.arange(6.).view(1, 6, 1), period=3, horizon=4).flatten().tolist()
    [3.0, 4.0, 5.0, 3.0]
    """
    check_rank("x", x, 3, "(B, L, C)")
    period, horizon = check_positive_int("period", period), check_positive_int("horizon", horizon)
    L = x.shape[1]
    if period > L:
        raise ValueError(f"period {period} > window length {L}; x must be (B, L >= {period}, C), "
                         f"got {tuple(x.shape)}")
    idx = L - period + torch.arange(horizon, device=x.device) % period   # (T,)
    return x[:, idx]                                                    # (B, T, C)
