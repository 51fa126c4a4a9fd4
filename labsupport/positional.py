"""Position and time encodings: how a permutation-equivariant attention learns order.

Additive encodings are modules mapping token embeddings ``x (B, L, d_model)`` to
``x + PE[:L]``.
"""
from __future__ import annotations

import torch
from torch import nn

from .validation import check_positive_int


def sinusoidal_encoding(length: int, d_model: int, base: float = 10000.0, *, device=None,
                        dtype=torch.float32) -> torch.Tensor:
    """The fixed sinusoidal table of Vaswani et al. (2017), shape (length, d_model).

    Math: ``PE[p, 2i] = sin(p / base^(2i/d))``, ``PE[p, 2i+1] = cos(p / base^(2i/d))``.

    >>> sinusoidal_encoding(3, 4)[0].tolist()
    [0.0, 1.0, 0.0, 1.0]
    """
    check_positive_int("length", length)
    check_positive_int("d_model", d_model)
    if d_model % 2:
        raise ValueError(f"d_model must be even for sine/cosine pairs, got {d_model}")
    position = torch.arange(length, device=device, dtype=torch.float64)[:, None]        # (L, 1)
    inv_freq = base ** (-torch.arange(0, d_model, 2, device=device, dtype=torch.float64) / d_model)
    angles = position * inv_freq                                                         # (L, d/2)
    table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)                # (L, d)
    return table.to(dtype)


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the sinusoidal table; defined for any length (nothing is learned)."""

    def __init__(self, d_model: int, base: float = 10000.0):
        super().__init__()
        self.d_model, self.base = d_model, base

    def forward(self, x):                                   # x (B, L, d_model)
        return x + sinusoidal_encoding(x.shape[-2], self.d_model, self.base,
                                       device=x.device, dtype=x.dtype)


class LearnedPositionalEncoding(nn.Module):
    """Adds a learned vector per position, for positions ``0 .. max_len - 1`` only.

    A position never seen in training has no trained vector, and one past ``max_len``
    has no vector at all: that raises ``ValueError``.
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        check_positive_int("max_len", max_len)
        self.max_len = max_len
        self.table = nn.Parameter(0.02 * torch.randn(max_len, d_model))

    def forward(self, x):                                   # x (B, L, d_model)
        L = x.shape[-2]
        if L > self.max_len:
            raise ValueError(f"sequence of {L} tokens is longer than the learned table's max_len "
                             f"{self.max_len}: positions {self.max_len}..{L - 1} have no embedding")
        return x + self.table[:L]


class NoPositionalEncoding(nn.Module):
    """No position at all: attention sees a set, not a sequence."""

    def forward(self, x):
        return x


def make_positional_encoding(kind: str, *, d_model: int, max_len: int) -> nn.Module:
    """Build an additive encoding by name: ``none``, ``sinusoidal`` or ``learned``."""
    builders = {
        "none": lambda: NoPositionalEncoding(),
        "sinusoidal": lambda: SinusoidalPositionalEncoding(d_model),
        "learned": lambda: LearnedPositionalEncoding(max_len, d_model),
    }
    if kind not in builders:
        raise ValueError(f"pos_encoding must be one of {sorted(builders)}, got {kind!r}")
    return builders[kind]()

