"""The lab's race: every forecaster it trains, built by name and width, and the patch TCN.

The lab races a patch Transformer against a recurrent and a convolutional forecaster that
read the same day tokens (one patch of 24 hours per token, aligned to the forecast origin),
so that the race compares what reads the tokens (attention, a recurrence, a convolution)
and not how the window was cut. `build` makes any racer at a width; `SIZES` holds the width
each one was raced at, chosen on the validation windows by
``tools/experiments/lab_widths.py`` (its numbers are in ``tools/experiments/README.md``);
`train_step` is one Adam step of a model on one batch, what the lab times repeatedly.
Letters: B batch, L lookback, N tokens, P patch length, H hidden width, T horizon.
"""
from __future__ import annotations

import json
from importlib import resources
from types import MappingProxyType

import torch
import torch.nn.functional as F
from torch import nn

from ...data import patch_grid, patchify
from ...models import (
    Forecaster,
    GRUForecaster,
    LinearForecaster,
    PatchGRUForecaster,
    PatchTransformer,
    TCNForecaster,
    TemporalBlock,
)
from ...validation import check_dropout, check_positive_int

__all__ = ["PatchTCNForecaster", "DAY", "NAMES", "WIDTHS", "SIZES", "width_sweep", "build", "train_step"]

DAY = MappingProxyType(dict(patch_len=24, stride=24))      # one token per day of the window


class PatchTCNForecaster(Forecaster):
    """A temporal convolutional network over patch tokens: each patch of the window is
    embedded linearly, dilated causal residual blocks (`TemporalBlock`, Bai et al. 2018) run
    over the tokens, and a linear head forecasts from the last token's features. It reads
    the same tokens as `PatchTransformer` and `PatchGRUForecaster`, with a convolution
    instead of attention or a recurrence. Channels are independent.

    Math: ``e_n = W_e p_n + b_e``; features = blocks(e) with dilations 1, 2, 4, ... until
    the receptive field ``1 + 2 (k - 1) sum(dilations)`` covers every token; ``y = W f_N + b``.
    Shapes: x (B, L, C) -> (B, T, C).

    >>> tcn = PatchTCNForecaster(lookback=336, horizon=24)
    >>> tcn.n_patches, tcn.dilations
    (14, (1, 2, 4))
    """

    def __init__(self, *, lookback: int, horizon: int, channels: int = 1, patch_len: int = 24,
                 stride: int = 24, hidden: int = 32, kernel_size: int = 3, dropout: float = 0.0,
                 revin: bool = False):
        super().__init__(lookback=lookback, horizon=horizon, channels=channels, revin=revin)
        self.patch_len, self.stride, self.n_patches = patch_grid(self.lookback, patch_len, stride)
        hidden = check_positive_int("hidden", hidden)
        self.kernel_size = check_positive_int("kernel_size", kernel_size)
        if kernel_size < 2:
            raise ValueError(f"kernel_size must be >= 2 for the receptive field to grow, got {kernel_size}")
        dropout = check_dropout("dropout", dropout)
        dilations = [1]
        while 1 + 2 * (self.kernel_size - 1) * sum(dilations) < self.n_patches:
            dilations.append(2 * dilations[-1])
        self.dilations = tuple(dilations)
        self.embed = nn.Linear(self.patch_len, hidden)
        self.blocks = nn.Sequential(*(TemporalBlock(hidden, hidden, self.kernel_size, d, dropout)
                                      for d in self.dilations))
        self.head = nn.Linear(hidden, self.horizon)

    def _forecast(self, x: torch.Tensor) -> torch.Tensor:
        B, L, C = x.shape
        series = x.transpose(1, 2).reshape(B * C, L)                         # (B*C, L)
        tokens = self.embed(patchify(series, self.patch_len, self.stride))    # (B*C, N, H)
        features = self.blocks(tokens.transpose(1, 2))                       # (B*C, H, N)
        y = self.head(features[..., -1])                                     # (B*C, T)
        return y.view(B, C, self.horizon).transpose(1, 2)                    # (B, T, C)


# The racers by name: what each is built from, and what its width means.
NAMES = ("PatchTransformer", "patch GRU", "patch TCN", "DLinear")
# The widths the sweep tried for each network (DLinear has none: two maps from the window).
WIDTHS = MappingProxyType({"PatchTransformer": (16, 32, 64), "patch GRU": (16, 32, 64),
                           "patch TCN": (16, 32, 64)})
# The width each network races at, per horizon (hours ahead): the one with the lowest mean
# validation MSE over 3 seeds in tools/experiments/lab_widths.py (cpu profile's windows).
SIZES = MappingProxyType({
    24: MappingProxyType({"PatchTransformer": 32, "patch GRU": 64, "patch TCN": 32}),
    168: MappingProxyType({"PatchTransformer": 64, "patch GRU": 64, "patch TCN": 64}),
})


def width_sweep() -> dict:
    """The width sweep that chose `SIZES` (``labsupport/datasets/lab_widths.json``): ``rows``,
    one dict per (horizon, network, width) with ``params``, ``val_mse`` (mean over seeds of the
    best validation MSE), ``test_mse``, ``epochs`` and ``stopped`` per seed; ``chosen``, the
    width of lowest ``val_mse`` per horizon (a str key) and network, which `SIZES` holds; and
    ``training``, the settings every run used."""
    text = resources.files("labsupport.datasets").joinpath("lab_widths.json").read_text()
    return json.loads(text)


def build(name: str, *, lookback: int, horizon: int, width: int | None = None, revin: bool = True,
          **options) -> nn.Module:
    """The racer ``name`` (`NAMES`, or ``"GRU"`` / ``"TCN"``: the hourly recurrent and
    convolutional forecasters, which read the 336 hours one by one) at ``width`` (d_model,
    or the hidden width; ignored by DLinear); ``options`` go to its constructor.
    The Transformer: 4 heads, 2 pre-norm blocks, d_ff = 2 d_model, dropout 0.1 on the
    sub-layers and none on the attention weights, a learned positional encoding, causal."""
    sizes = dict(lookback=lookback, horizon=horizon, revin=revin)
    if name == "DLinear":
        return LinearForecaster(**sizes, **options)
    width = check_positive_int("width", width)
    if name == "PatchTransformer":
        settings = dict(DAY, d_model=width, n_heads=4, n_layers=2, d_ff=2 * width, dropout=0.1,
                        attn_dropout=0.0)
        return PatchTransformer(**sizes, **{**settings, **options})
    makers = {"patch GRU": lambda: PatchGRUForecaster(**sizes, **DAY, hidden=width, **options),
              "patch TCN": lambda: PatchTCNForecaster(**sizes, **DAY, hidden=width, **options),
              "GRU": lambda: GRUForecaster(**sizes, hidden=width, **options),
              "TCN": lambda: TCNForecaster(**sizes, hidden=width, **options)}
    if name not in makers:
        raise ValueError(f"no racer {name!r}; racers are {', '.join(NAMES + ('GRU', 'TCN'))}")
    return makers[name]()


def train_step(model: nn.Module, batch: tuple, optimiser: torch.optim.Optimizer) -> None:
    """One training step as `labsupport.train.fit` takes it: forward, MSE, backward,
    gradients clipped to norm 1, an Adam step. ``batch``: (x (B, L, C), y (B, T, C))."""
    x, y = batch
    optimiser.zero_grad(set_to_none=True)
    F.mse_loss(model(x), y).backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimiser.step()
