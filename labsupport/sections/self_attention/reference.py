"""The reference version of the attention weights that the lab's step 1 falls back on
(`labsupport.checks.yours_or_reference`) while a student's own version does not pass its check."""
from __future__ import annotations


def attention_weights(q, k):
    """softmax(q k^T / sqrt(d)) over the keys: (..., L, d), (..., S, d) -> (..., L, S)."""
    return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1)
