"""Forecasters: the book's patch Transformer and the baselines it is measured against.

Every forecaster is a `Forecaster`: built with keyword arguments ``lookback``, ``horizon``,
``channels`` and ``revin`` plus its own hyperparameters, it maps a window
``x (B, lookback, C)`` to a forecast ``(B, horizon, C)``. Letters: B batch, L lookback,
C channels, T horizon, H hidden. The recurrent and convolutional models stand in for
Chapters 10 and 11.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from types import MappingProxyType

import torch
import torch.nn.functional as F
from torch import nn

from .attention import kernel_name, kernel_spec
from .data import patchify
from .layers import TransformerEncoder
from .positional import make_attention_position, make_positional_encoding
from .validation import (
    check_bool,
    check_dropout,
    check_nonnegative_int,
    check_nonnegative_number,
    check_positive_int,
    check_positive_number,
    check_rank,
)

__all__ = ["check_window", "Forecaster", "GRUForecaster", "PatchGRUForecaster", "CausalConv1d",
           "TemporalBlock", "TCNForecaster", "MovingAverage", "LinearForecaster", "RidgeForecaster",
           "seasonal_naive", "InstanceNorm", "PatchTransformer"]


def check_window(x, lookback: int, channels: int, name: str = "x") -> None:
    """Raise unless ``x`` is a floating-point window shaped (B, lookback, channels)."""
    legend = f"(B, {lookback}, {channels})"
    check_rank(name, x, 3, legend)
    if x.shape[1] != lookback or x.shape[2] != channels:
        raise ValueError(f"{name} must be {legend}, got {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be floating point, got dtype {x.dtype}")


class Forecaster(nn.Module):
    """What every forecaster shares: its sizes, the window check and instance normalisation.

    A subclass calls ``super().__init__(lookback=..., horizon=..., channels=..., revin=...)``
    first and writes ``_forecast(x (B, L, C)) -> (B, T, C)``; `forward` checks the window,
    normalises it when ``revin`` (an `InstanceNorm`, ``self.revin``; None without), calls
    ``_forecast`` and undoes the normalisation on the forecast. Arguments are keyword-only.
    ``revin_affine=False`` drops RevIN's learned scale and shift (as PatchTST's scripts run it).
    """

    def __init__(self, *, lookback: int, horizon: int, channels: int = 1, revin: bool = False,
                 revin_affine: bool = True):
        super().__init__()
        self.lookback = check_positive_int("lookback", lookback)
        self.horizon = check_positive_int("horizon", horizon)
        self.channels = check_positive_int("channels", channels)
        self.revin = self._instance_norm(check_bool("revin", revin), check_bool("revin_affine", revin_affine))

    def _instance_norm(self, revin: bool, affine: bool):
        """The module that normalises each window and channel, or None."""
        return InstanceNorm(self.channels, affine=affine) if revin else None

    def check_window(self, x, name: str = "x", length: int | None = None) -> None:
        """Raise unless ``x`` is a floating-point window (B, lookback or ``length``, channels)."""
        check_window(x, self.lookback if length is None else length, self.channels, name)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.check_window(x)
        return self._with_revin(x, self._forecast)

    def _forecast(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError(f"Forecaster subclasses write _forecast(x (B, L, C)) -> (B, T, C); "
                                  f"{type(self).__name__} has none")

    def _normalise(self, x):
        """x (B, L, C) normalised per window and channel, with the statistics to undo it."""
        return (x, None) if self.revin is None else self.revin.normalise(x)

    def _denormalise(self, y, stats):
        """A forecast y (B, T, C) back in the window's level and scale."""
        return y if stats is None else self.revin.denormalise(y, stats)

    def _with_revin(self, x: torch.Tensor, forecast) -> torch.Tensor:
        """``forecast(x)``, inside the instance normalisation when there is one: (B, L, C) -> (B, T, C)."""
        z, stats = self._normalise(x)                           # (B, L, C)
        return self._denormalise(forecast(z), stats)            # (B, T, C)


class GRUForecaster(Forecaster):
    """Gated recurrent forecaster (Cho et al. 2014): a GRU reads the window, a linear head forecasts.

    Math: ``h_t = GRU(x_t, h_{t-1})``; ``y = W h_L + b`` reshaped to (T, C).
    Shapes: x (B, L, C) -> (B, T, C). ``dropout`` acts between GRU layers and before the head;
    ``revin=True`` normalises each window and channel first (`InstanceNorm`) and undoes it
    on the forecast.

    >>> GRUForecaster(lookback=24, horizon=6, channels=2)(torch.zeros(3, 24, 2)).shape
    torch.Size([3, 6, 2])
    """

    def __init__(self, *, lookback: int, horizon: int, channels: int = 1, hidden: int = 64,
                 layers: int = 1, dropout: float = 0.0, revin: bool = False):
        super().__init__(lookback=lookback, horizon=horizon, channels=channels, revin=revin)
        hidden, layers = check_positive_int("hidden", hidden), check_positive_int("layers", layers)
        dropout = check_dropout("dropout", dropout)
        # nn.GRU warns about dropout with one layer: there is no gap between layers to drop in.
        self.gru = nn.GRU(self.channels, hidden, num_layers=layers, batch_first=True,
                          dropout=dropout if layers > 1 else 0.0)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, self.horizon * self.channels)

    def _forecast(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(x)                                     # (B, L, H)
        y = self.head(self.drop(out[:, -1]))                     # (B, T*C)
        return y.view(x.shape[0], self.horizon, self.channels)   # (B, T, C)


class PatchGRUForecaster(Forecaster):
    """A GRU over patch tokens (the SegRNN idea, Lin et al. 2023): the window is cut into
    the patches `PatchTransformer` reads (``patch_len`` steps every ``stride``), each patch
    is embedded linearly, a GRU reads the tokens in order, and a linear head forecasts from
    its last state. It reads the same tokens as the Transformer with a recurrence instead
    of attention, so comparing the two separates what tokenisation buys from what
    attention buys. Channels are independent: each one is its own sequence of tokens.

    Math: ``e_n = W_e p_n + b_e`` for patch ``p_n``; ``h_n = GRU(e_n, h_{n-1})``;
    ``y = W h_N + b``. Shapes: x (B, L, C) -> (B, T, C).

    >>> PatchGRUForecaster(lookback=336, horizon=24).n_patches
    27
    """

    def __init__(self, *, lookback: int, horizon: int, channels: int = 1, patch_len: int = 24,
                 stride: int = 12, hidden: int = 64, dropout: float = 0.0, revin: bool = False):
        super().__init__(lookback=lookback, horizon=horizon, channels=channels, revin=revin)
        self.patch_len = check_positive_int("patch_len", patch_len)
        self.stride = check_positive_int("stride", stride)
        if self.patch_len > self.lookback:
            raise ValueError(f"patch_len {self.patch_len} is longer than the lookback {self.lookback}; "
                             "pass patch_len <= lookback")
        self.n_patches = (self.lookback - self.patch_len) // self.stride + 1
        hidden = check_positive_int("hidden", hidden)
        self.embed = nn.Linear(self.patch_len, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.drop = nn.Dropout(check_dropout("dropout", dropout))
        self.head = nn.Linear(hidden, self.horizon)

    def _forecast(self, x: torch.Tensor) -> torch.Tensor:
        B, L, C = x.shape
        series = x.transpose(1, 2).reshape(B * C, L)                         # (B*C, L)
        tokens = self.embed(patchify(series, self.patch_len, self.stride))    # (B*C, N, H)
        out, _ = self.gru(tokens)                                            # (B*C, N, H)
        y = self.head(self.drop(out[:, -1]))                                 # (B*C, T)
        return y.view(B, C, self.horizon).transpose(1, 2)                    # (B, T, C)


class CausalConv1d(nn.Conv1d):
    """1-D convolution padded on the left only, so output t sees inputs <= t.

    Math: ``y_t = sum_{i<k} W_i x_{t - i*dilation}`` (x_s = 0 for s < 0).
    Shapes: x (B, C_in, L) -> (B, C_out, L).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int = 1):
        in_channels, out_channels, kernel_size, dilation = (
            check_positive_int(name, value) for name, value in (
                ("in_channels", in_channels), ("out_channels", out_channels),
                ("kernel_size", kernel_size), ("dilation", dilation)))
        super().__init__(in_channels, out_channels, kernel_size, dilation=dilation)
        self.left_pad = (kernel_size - 1) * dilation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.pad(x, (self.left_pad, 0)))   # (B, C_out, L)


class TemporalBlock(nn.Module):
    """Residual block of two dilated causal convolutions (Bai et al. 2018, without weight norm).

    Math: ``y = relu(x' + drop(relu(conv2(drop(relu(conv1(x)))))))``, x' = x or a 1x1 conv of x.
    Shapes: x (B, C_in, L) -> (B, C_out, L); receptive field ``1 + 2 (k - 1) dilation``.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int,
                 dropout: float = 0.0):
        super().__init__()
        self.conv1 = CausalConv1d(in_channels, out_channels, kernel_size, dilation)
        self.conv2 = CausalConv1d(out_channels, out_channels, kernel_size, dilation)
        self.drop = nn.Dropout(check_dropout("dropout", dropout))
        self.skip = (nn.Identity() if in_channels == out_channels
                     else nn.Conv1d(in_channels, out_channels, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.drop(F.relu(self.conv1(x)))    # (B, C_out, L)
        h = self.drop(F.relu(self.conv2(h)))    # (B, C_out, L)
        return F.relu(h + self.skip(x))         # (B, C_out, L)


class TCNForecaster(Forecaster):
    """Temporal convolutional forecaster (Bai et al. 2018): dilated causal residual blocks, linear head.

    Math: receptive field ``R = 1 + 2 (k - 1) sum(dilations)`` (two convolutions per block);
    by default dilations 1, 2, 4, ... are added until ``R >= lookback``.
    Shapes: x (B, L, C) -> features (B, L, H) -> (B, T, C), the head reads the last step.
    ``revin=True`` normalises each window and channel first (`InstanceNorm`) and undoes it
    on the forecast.

    >>> tcn = TCNForecaster(lookback=48, horizon=12)
    >>> tcn.dilations, tcn.receptive_field
    ((1, 2, 4, 8), 61)
    """

    def __init__(self, *, lookback: int, horizon: int, channels: int = 1, hidden: int = 32,
                 kernel_size: int = 3, dilations=None, dropout: float = 0.0, revin: bool = False):
        super().__init__(lookback=lookback, horizon=horizon, channels=channels, revin=revin)
        hidden = check_positive_int("hidden", hidden)
        self.kernel_size = check_positive_int("kernel_size", kernel_size)
        if kernel_size < 2:
            raise ValueError(f"kernel_size must be >= 2 for the receptive field to grow, got {kernel_size}")
        dropout = check_dropout("dropout", dropout)
        self.dilations = self._dilations(dilations)
        widths = [self.channels] + [hidden] * len(self.dilations)
        self.blocks = nn.Sequential(*(TemporalBlock(widths[i], widths[i + 1], self.kernel_size, d, dropout)
                                      for i, d in enumerate(self.dilations)))
        self.head = nn.Linear(hidden, self.horizon * self.channels)

    def _dilations(self, dilations) -> tuple[int, ...]:
        """The given dilations, checked to cover the lookback, or the fewest doublings that do."""
        if dilations is None:
            dilations = [1]
            while self._field(dilations) < self.lookback:
                dilations.append(2 * dilations[-1])
            return tuple(dilations)
        dilations = list(dilations)
        if not dilations:
            raise ValueError("dilations must be a non-empty sequence of positive ints, got []")
        for d in dilations:
            check_positive_int("each dilation", d)
        if self._field(dilations) < self.lookback:
            raise ValueError(f"dilations {tuple(dilations)} with kernel_size {self.kernel_size} give "
                             f"receptive field {self._field(dilations)} < lookback {self.lookback}")
        return tuple(dilations)

    def _field(self, dilations) -> int:
        return 1 + 2 * (self.kernel_size - 1) * sum(dilations)

    @property
    def receptive_field(self) -> int:
        """How many past steps (the current one included) the last step's features see."""
        return self._field(self.dilations)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Causal features of every step: (B, L, C) -> (B, L, H)."""
        self.check_window(x)
        h = self.blocks(x.transpose(1, 2))      # (B, H, L)
        return h.transpose(1, 2)                # (B, L, H)

    def _forecast(self, x: torch.Tensor) -> torch.Tensor:
        y = self.head(self.features(x)[:, -1])                   # (B, T*C)
        return y.view(x.shape[0], self.horizon, self.channels)   # (B, T, C)


class MovingAverage(nn.Module):
    """Centred moving average with edge replication: the trend of a series decomposition.

    Math: ``trend_t = mean(x_{t-p}, ..., x_{t+p})``, k = 2p + 1, x repeated beyond both ends.
    Shapes: x (B, L, C) -> (B, L, C).
    Computed as a difference of running sums (accumulated in float64, so no precision is
    lost): the same values as ``avg_pool1d``, whose backward pass on a CPU is several times
    slower, which made DLinear with instance normalisation (an input that needs gradients)
    spend most of its training step there.
    """

    def __init__(self, kernel_size: int):
        super().__init__()
        self.kernel_size = check_positive_int("kernel_size", kernel_size)
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd so the average is centred, got {kernel_size}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = (self.kernel_size - 1) // 2
        h = F.pad(x.transpose(1, 2), (p, p), mode="replicate")   # (B, C, L + 2p)
        sums = F.pad(h.double().cumsum(-1), (1, 0))               # (B, C, L + 2p + 1): sums[i] = h[:i].sum()
        k = self.kernel_size
        mean = (sums[..., k:] - sums[..., :-k]) / k               # (B, C, L): windows of k steps
        return mean.to(x.dtype).transpose(1, 2)                   # (B, L, C)


class LinearForecaster(Forecaster):
    """DLinear (Zeng et al. 2023): one linear map over time for the trend, one for the remainder.

    Math: ``x = trend + season`` (trend = moving average); ``y = W_t trend + W_s season`` over time.
    Shapes: x (B, L, C) -> (B, T, C). Channels are forecast independently, with weights
    shared across channels, or one pair of maps per channel with ``individual=True``.
    ``revin=True`` normalises each window and channel first (`InstanceNorm`) and undoes it
    on the forecast.

    Training: pass ``**LinearForecaster.FIT_OPTIONS`` to `labsupport.train.fit` (Adam from
    lr 1e-2, halved every epoch after the first two: the official scripts' ``type1``
    schedule). The model is a linear map of many strongly correlated lags: at a constant
    rate Adam does not settle near the least-squares floor, and early stopping keeps
    whichever overshoot the validation part liked (tools/experiments/README.md has the runs).

    >>> LinearForecaster(lookback=48, horizon=12, channels=3)(torch.zeros(2, 48, 3)).shape
    torch.Size([2, 12, 3])
    """

    FIT_OPTIONS = MappingProxyType({"lr": 1e-2, "schedule": "type1"})

    def __init__(self, *, lookback: int, horizon: int, channels: int = 1, kernel_size: int = 25,
                 individual: bool = False, revin: bool = False):
        super().__init__(lookback=lookback, horizon=horizon, channels=channels, revin=revin)
        self.trend = MovingAverage(kernel_size)
        self.individual = check_bool("individual", individual)
        n = self.channels if self.individual else 1
        self.trend_maps = nn.ModuleList(nn.Linear(self.lookback, self.horizon) for _ in range(n))
        self.season_maps = nn.ModuleList(nn.Linear(self.lookback, self.horizon) for _ in range(n))

    def decompose(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Split x (B, L, C) into (trend, remainder), each (B, L, C), which sum to x."""
        self.check_window(x)
        trend = self.trend(x)                   # (B, L, C)
        return trend, x - trend

    def _forecast(self, x: torch.Tensor) -> torch.Tensor:
        trend, season = (part.transpose(1, 2) for part in self.decompose(x))   # (B, C, L) each
        if self.individual:
            y = torch.stack([ft(trend[:, c]) + fs(season[:, c]) for c, (ft, fs)
                             in enumerate(zip(self.trend_maps, self.season_maps))], dim=1)  # (B, C, T)
        else:
            y = self.trend_maps[0](trend) + self.season_maps[0](season)                      # (B, C, T)
        return y.transpose(1, 2)                # (B, T, C)


class RidgeForecaster(Forecaster):
    """Closed-form ridge regression from the lookback window to the horizon: the linear
    baseline that every accuracy table carries beside the trained models.

    Math: ``y = W x + b`` over time, one map shared by the channels (channels are folded
    into the rows, as DLinear does); ``W = argmin |Y - X W|^2 + lambda |W|^2`` with the
    intercept unpenalised, solved exactly in float64. `fit` solves it for a grid of
    penalties ``lambda`` on the training windows and keeps the one with the lowest
    validation MSE.
    Shapes: x (B, L, C) -> (B, T, C). ``revin=True`` first normalises each window and
    channel by its own mean and standard deviation and undoes it on the forecast (RevIN
    without the learned affine map), like the trained models' instance normalisation.
    The weights are parameters without gradients, so parameter counts include them.
    ``penalties``: finite numbers >= 0 (default `PENALTIES`); ``eps`` > 0 keeps a constant
    window's standard deviation above zero. A penalty whose solution is not finite (0 on
    inputs without variance) is never kept.

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
        X, Y, _ = self._pairs(train, "train")
        x_mean, y_mean = X.mean(dim=0), Y.mean(dim=0)                     # (L,), (T,)
        Xc, Yc = X - x_mean, Y - y_mean
        evals, evecs = torch.linalg.eigh(Xc.T @ Xc)                       # (L,), (L, L)
        projected = evecs.T @ (Xc.T @ Yc)                                 # (L, T)
        Xv, Yv, stats = self._pairs(val, "val")
        best = None
        for penalty in self.penalties:
            W = evecs @ (projected / (evals + penalty)[:, None])          # (L, T)
            b = y_mean - x_mean @ W                                       # (T,)
            mse = self._denormalised_mse(Xv @ W + b, Yv, stats)
            self.validation_mse[penalty] = mse
            if math.isfinite(mse) and (best is None or mse < best[0]):
                best = (mse, penalty, W, b)
        if best is None:
            raise ValueError(f"RidgeForecaster.fit: no penalty of {self.penalties} gives a finite validation "
                             f"MSE (got {list(self.validation_mse.values())}); the inputs have too little "
                             "variance for them: pass larger penalties, e.g. penalties=[1.0, 10.0]")
        _, self.penalty, W, b = best
        self.weight.copy_(W.T.to(self.weight.dtype))
        self.bias.copy_(b.to(self.bias.dtype))
        return self

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
    try:
        checked = tuple(check_nonnegative_number("penalty", p) for p in values)
    except ValueError:
        checked = ()
    if not checked:
        raise ValueError(f"penalties must be a non-empty sequence of finite numbers >= 0, got {values!r}")
    return checked


def seasonal_naive(x: torch.Tensor, period: int, horizon: int) -> torch.Tensor:
    """Repeat the last ``period`` steps of x (B, L, C) to fill ``horizon`` steps: (B, T, C).

    Math: ``y_t = x_{L - period + (t mod period)}``, t = 0 .. horizon - 1.

    >>> seasonal_naive(torch.arange(6.).view(1, 6, 1), period=3, horizon=4).flatten().tolist()
    [3.0, 4.0, 5.0, 3.0]
    """
    check_rank("x", x, 3, "(B, L, C)")
    check_positive_int("period", period)
    check_positive_int("horizon", horizon)
    L = x.shape[1]
    if period > L:
        raise ValueError(f"period {period} > window length {L}; x must be (B, L >= {period}, C), "
                         f"got {tuple(x.shape)}")
    idx = L - period + torch.arange(horizon, device=x.device) % period   # (T,)
    return x[:, idx]                                                    # (B, T, C)


class InstanceNorm(nn.Module):
    """RevIN (Kim et al., 2022): normalise each window and channel by its own mean and
    standard deviation, with a learned per-channel scale and shift (``affine=True``), and
    undo it on the forecast, so the model sees shapes rather than levels.

    Math: ``z = (x - mean_t x) / std_t x * w + b``; ``y = (z_out - b) / w * std + mean``
    (w = 1, b = 0 without ``affine``, as PatchTST's scripts run it).
    """

    def __init__(self, channels: int, eps: float = 1e-5, affine: bool = True):
        super().__init__()
        channels = check_positive_int("channels", channels)
        self.eps = check_positive_number("eps", eps)
        affine = check_bool("affine", affine)
        self.weight = nn.Parameter(torch.ones(channels)) if affine else None
        self.bias = nn.Parameter(torch.zeros(channels)) if affine else None

    def normalise(self, x):                                     # x (B, L, C)
        mean = x.mean(dim=1, keepdim=True)                      # (B, 1, C)
        std = (x.var(dim=1, keepdim=True, unbiased=False) + self.eps).sqrt()
        z = (x - mean) / std
        return (z if self.weight is None else z * self.weight + self.bias), (mean, std)

    def denormalise(self, y, stats):                            # y (B, T, C)
        mean, std = stats
        if self.weight is not None:
            y = (y - self.bias) / (self.weight + self.eps)
        return y * std + mean


class PatchTransformer(Forecaster):
    """The book's forecaster: patches of the window are tokens for a causal Transformer
    encoder, and a linear head reads the forecast off the last token (after PatchTST,
    Nie et al. 2023).

    Steps: 1. instance-normalise each channel (RevIN, optional); 2. fold the channels
    into the batch (channel independence, shared weights); 3. cut each channel into
    patches and embed them linearly; 4. add the positional encoding and, optionally,
    calendar features; 5. run the encoder, causal by default; 6. map the last token
    (``head="last"``), all tokens (``head="flatten"``, as PatchTST) or their mean
    (``head="mean"``: with ``causal=False`` and ``pos_encoding="none"`` the forecast does not
    depend on the order of the patches, Section 12.3's control) to the horizon;
    7. undo the normalisation.
    Shapes: x (B, L, C) -> (B, T, C), T = horizon.

    ``pos_encoding``: ``none``, ``sinusoidal``, ``learned``, ``time2vec`` (added to the
    tokens) or ``rope``, ``alibi``, ``relative`` (T5 buckets; inside attention), see
    `labsupport.positional`. ``positions`` (N,) or (B, N) may give each token a real
    time (irregular sampling); default the token index.
    ``kernel``: a name in `labsupport.attention.KERNELS`, a kernel function, or a module
    such as ``LinformerAttention(seq_len=n_patches, k)`` (with ``causal=False``), shared
    by every layer and head.
    ``time_features=F`` expects ``time (B, L + T, F)``: calendar features of every input
    step and of every step to forecast (the calendar is known in advance). Each token
    gets its patch's mean features, and the head gets the horizon's.
    With the last-token or the mean head the model also reads windows of other lengths
    ``L = patch_len + k * stride`` (Section 12.3 tests extrapolation), as far as its
    positional encoding allows.

    ``backbone`` (`BACKBONES`): ``"book"`` (LayerNorm, ReLU, no padding, RevIN with its
    learned scale and shift) or ``"patchtst"``, PatchTST's: BatchNorm of each feature over
    every token (`labsupport.layers.TokenBatchNorm`), GELU, the window's last value
    repeated ``stride`` times at its end (one more patch: 42 instead of 41 for L = 336,
    patches of 16, stride 8), RevIN without the affine map. ``attn_dropout`` acts on the
    attention weights (default: ``dropout``, which also acts on the residual branches and
    in the FFN); on a CPU it costs about a third of the training speed, since the fused
    SDPA kernels do not drop weights and each layer falls back to the explicit L x L path.
    `patchtst` builds PatchTST's published model (`PATCHTST`).
    """

    BACKBONES = MappingProxyType({
        "book": MappingProxyType(dict(norm="layer", activation="relu", pad_end=False, revin_affine=True)),
        "patchtst": MappingProxyType(dict(norm="batch", activation="gelu", pad_end=True, revin_affine=False)),
    })
    # PatchTST/42 (Nie et al. 2023; the official code's defaults and its L = 336 scripts'
    # default model): bidirectional post-norm encoder, flatten head, no attention dropout.
    PATCHTST = MappingProxyType(dict(
        patch_len=16, stride=8, d_model=128, n_heads=16, n_layers=3, d_ff=256, dropout=0.2,
        attn_dropout=0.0, pos_encoding="learned", causal=False, norm_first=False, head="flatten",
        revin=True, backbone="patchtst"))

    def __init__(self, *, lookback: int, horizon: int, channels: int = 1, patch_len: int = 24,
                 stride: int = 12, d_model: int = 64, n_heads: int = 4, n_layers: int = 2,
                 d_ff: int | None = 128, dropout: float = 0.1, attn_dropout: float | None = None,
                 pos_encoding: str = "learned", kernel="sdpa", causal: bool = True, revin: bool = True,
                 norm_first: bool = True, head: str = "last", time_features: int = 0,
                 backbone: str = "book"):
        spec = self._backbone(backbone)
        super().__init__(lookback=lookback, horizon=horizon, channels=channels, revin=revin,
                         revin_affine=spec["revin_affine"])
        patch_len, stride, d_model, n_heads, n_layers = (check_positive_int(name, value) for name, value in (
            ("patch_len", patch_len), ("stride", stride), ("d_model", d_model), ("n_heads", n_heads),
            ("n_layers", n_layers)))
        d_ff = None if d_ff is None else check_positive_int("d_ff", d_ff)
        if self.lookback < patch_len or (self.lookback - patch_len) % stride:
            raise ValueError(f"lookback {self.lookback} does not split into patches of {patch_len} "
                             f"with stride {stride}: need lookback = {patch_len} + k * {stride}")
        if head not in ("last", "flatten", "mean"):
            raise ValueError(f"head must be 'last', 'flatten' or 'mean', got {head!r}")
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        dropout = check_dropout("dropout", dropout)
        attn_dropout = dropout if attn_dropout is None else check_dropout("attn_dropout", attn_dropout)
        self.patch_len, self.stride, self.head_kind, self.backbone = patch_len, stride, head, backbone
        self.causal, norm_first = check_bool("causal", causal), check_bool("norm_first", norm_first)
        self.pos_encoding, self.pad_end = pos_encoding, spec["pad_end"]
        self.time_features = check_nonnegative_int("time_features", time_features)
        self.n_patches = (self.lookback + self.pad_end * stride - patch_len) // stride + 1
        self._check_kernel(kernel)                      # fail here, not in the first forward
        self.embed = nn.Linear(patch_len, d_model)
        self.position = make_positional_encoding(pos_encoding, d_model=d_model, max_len=self.n_patches)
        in_attention = make_attention_position(pos_encoding, n_heads=n_heads,
                                               head_dim=d_model // n_heads, causal=self.causal)
        self.encoder = TransformerEncoder(d_model, n_heads, n_layers, d_ff, dropout, norm_first=norm_first,
                                          kernel=kernel, position=in_attention, norm=spec["norm"],
                                          activation=spec["activation"], attn_dropout=attn_dropout)
        width = self.n_patches * d_model if head == "flatten" else d_model
        self.head = nn.Linear(width, self.horizon)
        if self.time_features:
            self.time_in = nn.Linear(self.time_features, d_model)               # each token's calendar
            self.time_out = nn.Linear(self.horizon * self.time_features, width)  # the horizon's calendar

    @classmethod
    def patchtst(cls, *, lookback: int, horizon: int, channels: int = 1, **overrides) -> "PatchTransformer":
        """PatchTST's published model (`PATCHTST`), with ``overrides`` replacing any of its
        options: e.g. the hourly ETT scripts' ``d_model=16, n_heads=4, d_ff=128, dropout=0.3``.

        >>> PatchTransformer.patchtst(lookback=336, horizon=96, channels=7).n_patches
        42
        """
        return cls(lookback=lookback, horizon=horizon, channels=channels, **(dict(cls.PATCHTST) | overrides))

    @classmethod
    def _backbone(cls, name):
        if name not in cls.BACKBONES:
            raise ValueError(f"backbone must be one of {', '.join(map(repr, cls.BACKBONES))}, got {name!r}")
        return cls.BACKBONES[name]

    def _check_kernel(self, kernel) -> None:
        """The kernel's spec must allow this model: causal if it is causal, and a kernel
        built for one length (Linformer) built for the number of patch tokens."""
        spec, name = kernel_spec(kernel), kernel_name(kernel)
        if spec.fixed_length and kernel.seq_len != self.n_patches:
            raise ValueError(f"kernel {name}(seq_len={kernel.seq_len}) does not fit this model's "
                             f"{self.n_patches} patch tokens; build it with "
                             f"{name}(seq_len={self.n_patches}, ...)")
        if self.causal and not spec.causal:
            raise ValueError(f"kernel {name!r} cannot be causal; pass causal=False: the head still "
                             "forecasts only from the window, so nothing leaks")

    def _check(self, x, time):
        """The window must be (B, lookback, C); the last-token and mean heads also read other
        lengths that split into whole patches. Time features must cover L + T steps."""
        L = x.shape[1] if isinstance(x, torch.Tensor) and x.dim() == 3 else self.lookback
        fits = L >= self.patch_len and (L - self.patch_len) % self.stride == 0
        self.check_window(x, length=L if fits and self.head_kind != "flatten" else self.lookback)
        if self.time_features:
            expected = (x.shape[0], L + self.horizon, self.time_features)
            if not isinstance(time, torch.Tensor) or tuple(time.shape) != expected:
                got = tuple(time.shape) if isinstance(time, torch.Tensor) else time
                raise ValueError(f"time must be (B, L + T, F) = {expected}: calendar features of "
                                 f"the window and the horizon, got {got}")
        elif time is not None:
            raise ValueError("this model was built with time_features=0; pass time=None")

    def patches(self, x):
        """Cut the last axis into the model's patches: (..., L) -> (..., N, patch_len); with
        PatchTST's backbone the last value is first repeated ``stride`` times (its padding)."""
        if self.pad_end:
            x = torch.cat([x, x[..., -1:].expand(*x.shape[:-1], self.stride)], dim=-1)   # (..., L + stride)
        return patchify(x, self.patch_len, self.stride)                                 # (..., N, P)

    def encode(self, tokens, *, positions=None, return_weights=False):
        """Positional encoding and encoder: (N, P_tokens, d_model) -> same shape."""
        return self.encoder(self.position(tokens, positions), is_causal=self.causal,
                            positions=positions, return_weights=return_weights)

    def forward(self, x, time=None, positions=None, *, return_weights=False):
        self._check(x, time)
        z, stats = self._normalise(x)                                     # (B, L, C)
        out = self._forecast(z, time, positions, return_weights=return_weights)
        if not return_weights:
            return self._denormalise(out, stats)                          # (B, T, C)
        y, weights = out
        return self._denormalise(y, stats), weights

    def _forecast(self, x, time=None, positions=None, *, return_weights=False):
        """Steps 2-6 on the normalised window x (B, L, C): the forecast (B, T, C), with the
        attention weights of every layer when ``return_weights``."""
        B, L, C = x.shape
        series = x.transpose(1, 2).reshape(B * C, L)                   # (B*C, L): channels apart
        tokens = self.embed(self.patches(series))                       # (B*C, N, d_model)
        if positions is not None and positions.dim() == 2:
            positions = positions.repeat_interleave(C, dim=0)         # (B*C, N)
        if self.time_features:
            past = self.patches(time[:, :L].transpose(1, 2))          # (B, F, N, P)
            tokens = tokens + self.time_in(past.mean(-1).transpose(1, 2)).repeat_interleave(C, dim=0)
        encoded = self.encode(tokens, positions=positions, return_weights=return_weights)
        if return_weights:
            encoded, weights = encoded
        features = {"last": lambda: encoded[:, -1], "mean": lambda: encoded.mean(1),
                    "flatten": lambda: encoded.flatten(1)}[self.head_kind]()     # (B*C, width)
        if self.time_features:
            future = time[:, L:].flatten(1)                            # (B, T*F)
            features = features + self.time_out(future).repeat_interleave(C, dim=0)
        y = self.head(features).view(B, C, self.horizon).transpose(1, 2)   # (B, T, C)
        return (y, weights) if return_weights else y
