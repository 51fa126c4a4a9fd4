"""The lab's race: the forecaster the student builds (`LabForecaster`), the recurrent and
convolutional forecasters it races, built by name, width and patch length (`build`), and one
training step of any of them (`train_step`, what the speed question times).

Every racer reads the window cut into patches of ``patch_len`` hours, one token each, aligned so
that the newest hour ends the last patch: a day (24, 14 tokens) in the race, an hour (1, 336
tokens) when the speed question compares them at the hourly resolution. The Transformer reads
the tokens with causal attention, the GRU one after the other, the TCN with dilated causal
convolutions over them; each forecasts from its last token with a linear head. Letters: B batch,
L lookback, N tokens, P patch length, H hidden width, T horizon.
"""
from __future__ import annotations

import dataclasses
from types import MappingProxyType

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ...data import LOOKBACK, book_task, load_vic_elec, patchify
from ...layers import TransformerEncoder
from ...models import Forecaster, PatchGRUForecaster, TemporalBlock
from ...validation import check_dropout, check_positive_int
from . import reference
from .record import SWEEP

__all__ = ["LabForecaster", "PatchTCNForecaster", "LinearMap", "NAMES", "DAY", "TOLERANCE", "WIDTHS",
           "chosen_width", "lab_task", "origin_hours", "build", "train_step"]

DAY = 24                                  # hours per token in the race


class LabForecaster(Forecaster):
    """The lab's Transformer forecaster (the brief's ``PatchTransformer``): each patch of the
    window embedded linearly (``embed``), a learned position added (``pos``, one row per token),
    a causal pre-norm encoder (``encoder``, `labsupport.layers.TransformerEncoder`, its attention
    kernel swappable), and a linear head on the newest token (``head``), inside RevIN.

    ``forward`` is the function that runs those parts on a normalised window, ``forward(model, z
    (B, L, 1)) -> (B, T, 1)``: the student's own once it passes its check, else the book's
    (`reference.forecast`). Shapes: x (B, L, 1) -> (B, T, 1).

    >>> LabForecaster(lookback=336, horizon=24)(torch.zeros(2, 336, 1)).shape
    torch.Size([2, 24, 1])
    """

    def __init__(self, *, lookback: int, horizon: int, patch_len: int = DAY, d_model: int = 32,
                 n_heads: int = 4, n_layers: int = 2, d_ff: int | None = None, dropout: float = 0.1,
                 kernel="sdpa", revin: bool = True, forward=None):
        super().__init__(lookback=lookback, horizon=horizon, channels=1, revin=revin)
        self.patch_len = check_positive_int("patch_len", patch_len)
        self.n_patches = self.lookback // self.patch_len
        d_model = check_positive_int("d_model", d_model)
        self.embed = nn.Linear(self.patch_len, d_model)
        self.pos = nn.Parameter(0.02 * torch.randn(self.n_patches, d_model))           # (N, d)
        self.encoder = TransformerEncoder(d_model, n_heads, n_layers, 2 * d_model if d_ff is None else d_ff,
                                          check_dropout("dropout", dropout), kernel=kernel, attn_dropout=0.0)
        self.head = nn.Linear(d_model, self.horizon)
        self.forward_fn = reference.forecast if forward is None else forward

    def _forecast(self, z: torch.Tensor) -> torch.Tensor:
        return self.forward_fn(self, z)                                                # (B, T, 1)


class PatchTCNForecaster(Forecaster):
    """A temporal convolutional network over patch tokens: each patch embedded linearly,
    dilated causal residual blocks (`labsupport.models.TemporalBlock`, Bai et al. 2018) over the
    tokens, with dilations 1, 2, 4, ... until the receptive field covers every token, and a
    linear head on the last token's features. Shapes: x (B, L, 1) -> (B, T, 1).

    >>> PatchTCNForecaster(lookback=336, horizon=24).dilations
    (1, 2, 4)
    """

    def __init__(self, *, lookback: int, horizon: int, patch_len: int = DAY, hidden: int = 32,
                 kernel_size: int = 3, dropout: float = 0.0, revin: bool = True):
        super().__init__(lookback=lookback, horizon=horizon, channels=1, revin=revin)
        self.patch_len = check_positive_int("patch_len", patch_len)
        if self.patch_len > self.lookback:
            raise ValueError(f"patch_len={patch_len} is longer than the lookback ({self.lookback}): "
                             "a window must hold at least one patch")
        self.n_patches = self.lookback // self.patch_len
        hidden = check_positive_int("hidden", hidden)
        if check_positive_int("kernel_size", kernel_size) < 2:
            raise ValueError(f"kernel_size must be >= 2 for the receptive field to grow, got {kernel_size}")
        dilations = [1]
        while 1 + 2 * (kernel_size - 1) * sum(dilations) < self.n_patches:
            dilations.append(2 * dilations[-1])
        self.dilations = tuple(dilations)
        self.embed = nn.Linear(self.patch_len, hidden)
        dropout = check_dropout("dropout", dropout)
        self.blocks = nn.Sequential(*(TemporalBlock(hidden, hidden, kernel_size, d, dropout)
                                      for d in self.dilations))
        self.head = nn.Linear(hidden, self.horizon)

    def _forecast(self, z: torch.Tensor) -> torch.Tensor:
        tokens = self.embed(patchify(z[..., 0], self.patch_len))                       # (B, N, H)
        features = self.blocks(tokens.transpose(1, 2))                                 # (B, H, N)
        return self.head(features[..., -1]).unsqueeze(-1)                              # (B, T, 1)


def origin_hours(lookback: int = LOOKBACK, horizon: int = 24) -> np.ndarray:
    """The hour of day (0-23) at which the forecast of each training window of
    ``book_task(lookback=..., horizon=...)`` (every window) starts: its first target's hour."""
    times = load_vic_elec().timestamps
    first_targets = times[lookback:len(times)]                                    # window n: n + lookback
    hours = (first_targets.astype("datetime64[h]").astype(np.int64) % 24)
    return hours


def lab_task(*, horizon: int = 24, every: int = 4, lookback: int = LOOKBACK):
    """The book's task with the training windows whose forecast starts at a multiple of ``every``
    hours after midnight (``every=24``: at midnight only, as every validation and test forecast),
    the same for every model and the ridge."""
    task = book_task(lookback=lookback, horizon=horizon)
    x, y = task.train
    keep = torch.from_numpy(origin_hours(lookback, horizon)[:len(x)] % every == 0).nonzero()[:, 0]
    return dataclasses.replace(task, train=(x[keep], y[keep]))


class LinearMap(Forecaster):
    """The ridge's own model, to be trained: inside RevIN without its learned scale and shift (as
    the ridge normalises), one linear map from the window's hours to the horizon's,
    ``y = W (R z) + b``; ``rotation`` R (L, L), fixed, re-expresses the window in other
    coordinates (None: the hours themselves). Shapes: x (B, L, 1) -> (B, T, 1)."""

    def __init__(self, *, lookback: int, horizon: int, rotation: torch.Tensor | None = None,
                 revin: bool = True):
        super().__init__(lookback=lookback, horizon=horizon, channels=1, revin=revin, revin_affine=False)
        self.register_buffer("rotation", None if rotation is None else rotation.float(), persistent=False)
        self.map = nn.Linear(self.lookback, self.horizon)

    def _forecast(self, z: torch.Tensor) -> torch.Tensor:
        hours = z[..., 0]                                                              # (B, L)
        if self.rotation is not None:
            hours = hours @ self.rotation                                              # (B, L)
        return self.map(hours).unsqueeze(-1)                                           # (B, T, 1)


NAMES = ("Transformer", "GRU", "TCN")
TOLERANCE = 0.01      # a wider network races only if it lowers the validation error by more than 1%


def chosen_width(horizon: int, name: str, rows=SWEEP) -> int:
    """The width ``name`` races at, ``horizon`` hours ahead: the smallest of the sweep's widths
    whose mean validation MSE lies within `TOLERANCE` of the lowest (`record.SWEEP`)."""
    tried = {r[2]: r[4] for r in rows if r[0] == horizon and r[1] == name}
    if not tried:
        raise ValueError(f"the sweep has no {name} at {horizon} hours ahead")
    best = min(tried.values())
    return min(w for w, val in tried.items() if val <= best * (1 + TOLERANCE))


# Width per horizon (hours ahead) and network; the sweep tried each network at 16, 32, 64, 128
# and, where the validation error still fell, wider.
WIDTHS = MappingProxyType({h: MappingProxyType({n: chosen_width(h, n) for n in NAMES}) for h in (24, 168)})


def build(name: str, *, lookback: int, horizon: int, width: int, patch_len: int = DAY, revin: bool = True,
          **options) -> nn.Module:
    """The racer ``name`` (`NAMES`) at ``width`` (the Transformer's d_model, the others' hidden
    width) reading tokens of ``patch_len`` hours; ``options`` go to its constructor (the
    Transformer's ``forward``, ``kernel``, ...). The Transformer: 4 heads, 2 pre-norm blocks,
    d_ff = 2 width, dropout 0.1 on the sub-layers; the GRU one layer; the TCN kernel 3."""
    sizes = dict(lookback=lookback, horizon=horizon, revin=revin)
    if name == "Transformer":
        return LabForecaster(**sizes, patch_len=patch_len, d_model=width, **options)
    if name == "GRU":
        return PatchGRUForecaster(**sizes, patch_len=patch_len, stride=patch_len, hidden=width, **options)
    if name == "TCN":
        return PatchTCNForecaster(**sizes, patch_len=patch_len, hidden=width, **options)
    raise ValueError(f"no racer {name!r}; the racers are {', '.join(NAMES)}")


def train_step(model: nn.Module, batch: tuple, optimiser: torch.optim.Optimizer) -> None:
    """One training step as `labsupport.train.fit` takes it: forward, MSE, backward, gradients
    clipped to norm 1, an Adam step. ``batch``: (x (B, L, 1), y (B, T, 1)) on the model's device."""
    x, y = batch
    optimiser.zero_grad(set_to_none=True)
    F.mse_loss(model(x), y).backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimiser.step()

