"""DLinear: a moving-average decomposition and a linear map of each part."""
from __future__ import annotations

from types import MappingProxyType

import torch
import torch.nn.functional as F
from torch import nn

from ..validation import (
    check_bool,
    check_positive_int,
)
from .base import Forecaster


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
