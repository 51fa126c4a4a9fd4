"""Boolean masks shared by the kernels: ``True`` = may attend (the SDPA convention).
A mask hides keys from the softmax, not NaN or inf from the arithmetic (0 x NaN is NaN):
the kernels refuse non-finite q, k and v instead.

`causal_mask` is public; `_allowed` folds a mask and causality into one mask and
`_at_least_2d` gives a mask or bias the (L, S) axes that tiling and SDPA index.
"""
from __future__ import annotations

import torch

from ..validation import check_nonnegative_int


def causal_mask(L: int, S: int | None = None, *, bottom_right: bool = False, device=None) -> torch.Tensor:
    """Boolean ``(L, S)`` mask, True where query i may attend key j, i.e. j <= i.

    Aligned at the top left, as ``is_causal=True`` in SDPA and in every kernel here:
    with S > L the last S - L keys are never seen. ``bottom_right=True``: j <= i + S - L,
    the queries being the last L of the S tokens (a cached decoding step; the alignment
    of `labsupport.layers.MultiHeadAttention`'s ``is_causal``); with L > S the first
    L - S queries then see no key. Both agree when L == S.

    >>> causal_mask(3).int()
    tensor([[1, 0, 0],
            [1, 1, 0],
            [1, 1, 1]], dtype=torch.int32)
    >>> causal_mask(2, 4, bottom_right=True).int()
    tensor([[1, 1, 1, 0],
            [1, 1, 1, 1]], dtype=torch.int32)
    """
    L = check_nonnegative_int("L", L)
    S = L if S is None else check_nonnegative_int("S", S)
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(diagonal=S - L if bottom_right else 0)


def _allowed(mask, is_causal: bool, L: int, S: int, device) -> torch.Tensor | None:
    """Combine an optional mask and causality into one boolean mask (or None)."""
    if not is_causal:
        return mask
    causal = causal_mask(L, S, device=device)
    return causal if mask is None else mask & causal


def _at_least_2d(t):
    """A mask or bias of shape (S,) or () as (1, S) or (1, 1): the same broadcast, with the
    (L, S) axes that tiling and SDPA index."""
    if t is None or t.dim() >= 2:
        return t
    return t.reshape((1,) * (2 - t.dim()) + tuple(t.shape))              # (1, S) or (1, 1)
