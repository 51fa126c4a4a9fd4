"""Recurrent forecasters (Chapter 10's family): a GRU over steps, and over patches."""
from __future__ import annotations

import torch
from torch import nn

from ..data import patchify
from ..validation import (
    check_dropout,
    check_positive_int,
)
from .base import Forecaster


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
