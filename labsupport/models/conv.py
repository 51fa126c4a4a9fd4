"""Convolutional forecasters (Chapter 11's family): causal dilated convolutions, a TCN."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..validation import (
    check_dropout,
    check_positive_int,
)
from .base import Forecaster


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
