"""Preparing a series for a model: the temporal split, scaling fitted on the training part only,
forecasting windows and patches."""
from __future__ import annotations

import numbers

import numpy as np
import torch

from ..validation import (
    check_nonnegative_int,
    check_positive_int,
    check_positive_number,
)
from .series import Series, _check_real, _time

# The book's one split (timestamps in AEST): train 2012-2013, validation 2014-01..06,
# test 2014-07..12. Six months of validation and test each cover a summer and a
# winter half, and two training years show every calendar day twice.
TRAIN_END = "2014-01-01T00:00"
VAL_END = "2014-07-01T00:00"


def temporal_split(series: Series, *, train_end: str = TRAIN_END, val_end: str = VAL_END,
                   context: int = 0) -> tuple[Series, Series, Series]:
    """Split by time into (train, validation, test); defaults are the book's one split.

    ``context`` > 0 starts validation and test that many steps before their border,
    so the first windows have a full input history from the part before (pass the
    lookback). The history is the past and is never a target; the targets of the
    three parts stay disjoint as long as ``context`` <= the lookback. Each part holds its
    own copy of its rows: scaling one in place changes neither the others nor ``series``.
    """
    context = check_nonnegative_int("context", context)
    t = series.timestamps
    b1, b2 = (np.searchsorted(t, _time(name, value)) for name, value in (("train_end", train_end),
                                                                          ("val_end", val_end)))
    if not 0 < b1 < b2 < len(series):
        raise ValueError(f"borders {train_end}, {val_end} leave an empty part of {series!r}")
    if context > b1:
        raise ValueError(f"context {context} is longer than the training part ({b1} steps)")

    return series.rows(0, b1), series.rows(b1 - context, b2), series.rows(b2 - context, len(series))


def _is_int(c) -> bool:
    """``c`` is an integer, not a bool."""
    return isinstance(c, numbers.Integral) and not isinstance(c, (bool, np.bool_))


class Standardizer:
    """Per-channel ``(x - mean) / std`` with statistics from the data passed to `fit` only.

    Works on numpy arrays and torch tensors whose last axis is the channel axis, and
    refuses data with another number of channels than it was fitted on (pass
    ``channels`` to scale a subset). A constant training channel (std below ``eps``) gets
    std 1, so it is only centred, never blown up by ``1 / eps``.
    """

    def __init__(self, eps: float = 1e-8):
        self.eps = check_positive_number("eps", eps)
        self.mean: np.ndarray | None = None
        self.std: np.ndarray | None = None

    def fit(self, values) -> "Standardizer":
        x = _check_real(np.asarray(values)).astype(np.float64)
        if x.ndim != 2 or len(x) < 2:
            raise ValueError(f"fit expects values (T, C) with T >= 2, got shape {x.shape}")
        bad = ~np.isfinite(x)
        if bad.any():
            row, channel = np.argwhere(bad)[0]
            raise ValueError(f"fit got {int(bad.sum())} NaN or inf values (first at row {row}, channel "
                             f"{channel}); fill or drop them first (e.g. interpolate), or every "
                             "statistic of that channel would be NaN")
        std = x.std(axis=0)
        self.mean = x.mean(axis=0).astype(np.float32)
        self.std = np.where(std < self.eps, 1.0, std).astype(np.float32)      # constant: centre only
        return self

    def _stats(self, x, channels):
        if self.mean is None:
            raise RuntimeError("Standardizer is not fitted: call fit(train_values) first")
        mean, std = self.mean, self.std
        if channels is not None:
            idx = self._channel_indices(channels)
            mean, std = mean[idx], std[idx]
        shape = tuple(np.shape(x))
        width = shape[-1] if shape else None
        if width != len(mean):
            which = (f"channels {list(channels)} select {len(mean)} channel{'s' * (len(mean) != 1)}"
                     if channels is not None else f"it was fitted on {len(self.mean)} channels")
            raise ValueError(f"Standardizer: {which}, but x has {width} on its last axis (shape "
                             f"{shape}); pass channels=[...] to scale a subset, e.g. "
                             "channels=[0] for the first channel alone")
        if isinstance(x, torch.Tensor):
            return torch.as_tensor(mean, device=x.device), torch.as_tensor(std, device=x.device)
        return mean, std

    def _channel_indices(self, channels) -> list[int]:
        """``channels`` as indices of the fitted channels, else a ValueError naming them."""
        n = len(self.mean)
        expected = (f"channels must be a list of indices of the {n} fitted channels (0-{n - 1}), got "
                    f"{channels!r}; e.g. channels=[0] for the first channel alone")
        if not (isinstance(channels, (list, tuple, np.ndarray)) and all(_is_int(c) for c in channels)):
            raise TypeError(expected)
        if not all(0 <= c < n for c in channels):
            raise ValueError(expected)
        return [int(c) for c in channels]

    def transform(self, x, channels=None):
        """Scale ``x (..., C)``; ``channels`` picks the statistics for a subset of channels."""
        mean, std = self._stats(x, channels)
        return (x - mean) / std

    def inverse_transform(self, x, channels=None):
        """Back to the original unit (e.g. MW)."""
        mean, std = self._stats(x, channels)
        return x * std + mean


def make_windows(values, lookback: int, horizon: int, stride: int = 1):
    """Sliding forecasting windows: inputs (N, lookback, C) and targets (N, horizon, C).

    Window n reads ``values[n*stride : n*stride + lookback]`` and predicts the next
    ``horizon`` steps. Accepts (T,) or (T, C) numpy arrays or tensors and returns the
    same kind (float32, contiguous).
    """
    lookback, horizon, stride = (check_positive_int(arg, val) for arg, val in
                                 (("lookback", lookback), ("horizon", horizon), ("stride", stride)))
    is_torch = isinstance(values, torch.Tensor)
    x = values.detach().cpu().numpy() if is_torch else _check_real(np.asarray(values))
    if x.ndim == 1:
        x = x[:, None]                                                  # (T, 1)
    if x.ndim != 2:
        raise ValueError(f"values must be (T,) or (T, C), got shape {x.shape}")
    span = lookback + horizon
    if len(x) < span:
        raise ValueError(f"series of length {len(x)} is shorter than lookback + horizon = {span}")
    starts = np.arange(0, len(x) - span + 1, stride)
    view = np.lib.stride_tricks.sliding_window_view(x, span, axis=0)[starts]   # (N, C, span)
    view = np.ascontiguousarray(view.transpose(0, 2, 1), dtype=np.float32)      # (N, span, C)
    inputs, targets = view[:, :lookback], view[:, lookback:]
    if is_torch:
        return torch.from_numpy(inputs.copy()), torch.from_numpy(targets.copy())
    return inputs, targets


def patchify(x, patch_len: int, stride: int | None = None):
    """Cut the last axis into patches: (..., L) -> (..., N, patch_len).

    Patches are aligned to the end of the window (the most recent step is always
    in the last patch); ``N = (L - patch_len) // stride + 1`` and the oldest
    ``(L - patch_len) % stride`` steps are dropped. ``stride`` defaults to
    ``patch_len`` (no overlap). Works on numpy arrays and tensors.

    >>> patchify(torch.arange(6.0), 3).tolist()
    [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    """
    patch_len = check_positive_int("patch_len", patch_len)
    stride = patch_len if stride is None else check_positive_int("stride", stride)
    if not np.ndim(x):
        raise ValueError(f"x must have a last axis to cut into patches (..., L), got shape "
                         f"{tuple(np.shape(x))}")
    L = x.shape[-1]
    if L < patch_len:
        raise ValueError(f"window length {L} (last axis of shape {tuple(x.shape)}) "
                         f"is shorter than patch_len {patch_len}")
    offset = (L - patch_len) % stride
    if isinstance(x, torch.Tensor):
        return x[..., offset:].unfold(-1, patch_len, stride)              # (..., N, P)
    view = np.lib.stride_tricks.sliding_window_view(np.asarray(x)[..., offset:], patch_len, axis=-1)
    return view[..., ::stride, :]                                          # (..., N, P)
