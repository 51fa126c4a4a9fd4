"""Reference versions of the exercise functions that later cells build on.

`checks.yours_or_reference` hands these to a notebook while the student's own version
does not pass its check yet, so the rest of the notebook still runs.
"""
from __future__ import annotations

import torch


def attention_weights(q, k):
    """softmax(q k^T / sqrt(d)) over the keys: (..., L, d), (..., S, d) -> (..., L, S)."""
    return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1)


def score_matrix_bytes(batch, heads, length, dtype):
    """Bytes of a (batch, heads, length, length) score tensor of ``dtype``."""
    return batch * heads * length * length * torch.tensor([], dtype=dtype).element_size()
