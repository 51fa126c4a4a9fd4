"""Sparse exact attention (12.5): sliding windows (local) and Longformer's window plus
global tokens. Softmax attention stays exact on the sparse pattern, computed chunk by
chunk, and the L x L matrix is never built (`band_mask` and `longformer_mask` build it
for tests and figures).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..validation import (
    check_attention_inputs,
    check_nonnegative_int,
    check_positive_int,
    check_self_attention,
)
from .exact import naive_attention
from .masks import causal_mask
from .precision import working_dtype
from .spec import attention_kernel


def band_mask(L: int, window: int, *, is_causal: bool = False, device=None) -> torch.Tensor:
    """Boolean ``(L, L)`` sliding-window mask: True where ``|i - j| <= window``
    (causal: ``i - window <= j <= i``). For tests and figures; `local_attention` never builds it.

    >>> band_mask(4, 1).int()
    tensor([[1, 1, 0, 0],
            [1, 1, 1, 0],
            [0, 1, 1, 1],
            [0, 0, 1, 1]], dtype=torch.int32)
    """
    L, window = check_nonnegative_int("L", L), check_nonnegative_int("window", window)
    pos = torch.arange(L, device=device)
    offset = pos[None, :] - pos[:, None]                                # (L, L): j - i
    return (offset >= -window) & (offset <= (0 if is_causal else window))


def longformer_mask(L: int, window: int, global_tokens, *, is_causal: bool = False,
                    device=None) -> torch.Tensor:
    """Boolean ``(L, L)`` mask of `longformer_attention`: the band plus the global tokens'
    rows and columns (causal: then only ``j <= i``). For tests and figures."""
    g = _global_index(global_tokens, L, device)
    allowed = band_mask(L, window, device=device)
    allowed[:, g] = True
    allowed[g, :] = True
    return allowed & causal_mask(L, device=device) if is_causal else allowed


def _global_index(global_tokens, L: int, device) -> torch.Tensor:
    """Sorted, de-duplicated global positions as a long tensor (g,), each an integer in [0, L)."""
    given = torch.as_tensor(global_tokens, device=device)                              # as given
    if given.dtype == torch.bool:
        raise TypeError(f"global_tokens are positions, got a bool tensor of shape {tuple(given.shape)}; for "
                        "a bool mask of the global positions pass mask.nonzero().flatten()")
    if given.numel() and given.is_floating_point():
        shown = np.ravel(np.asarray(given.cpu() if isinstance(global_tokens, torch.Tensor) else global_tokens,
                                    dtype=np.float64)).tolist()                # 2.7, not float32's 2.70000005
        raise TypeError(f"global_tokens are integer positions (token indices in [0, {L})), got floats "
                        f"{shown}: a float would be truncated (2.7 read as 2); pass ints, e.g. "
                        f"{[int(p) for p in shown]} if those are the positions you mean")
    g = given.long().reshape(-1).unique()                                              # (g,)
    if g.numel() and (g.min() < 0 or g.max() >= L):
        raise ValueError(f"global_tokens must be positions in [0, {L}) for L = {L}, got {g.tolist()}")
    return g


def _gather_mask(mask: torch.Tensor, rows, cols, L: int, S: int) -> torch.Tensor:
    """``mask[..., rows, cols]`` of a bool mask broadcastable to (..., L, S), read through a
    broadcast view (never copied to L x S). Out-of-range indices are clamped: mask them yourself."""
    while mask.dim() < 2:
        mask = mask.unsqueeze(0)
    mask = mask.expand(*mask.shape[:-2], L, S)                          # (..., L, S), a view
    return mask[..., rows.clamp(0, L - 1), cols.clamp(0, S - 1)]


def _masked_softmax(scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim where ``allowed``; a row with nothing allowed gets zeros
    (not NaN), with finite gradients."""
    some = allowed.any(dim=-1, keepdim=True)
    scores = scores.masked_fill(~allowed, float("-inf")).masked_fill(~some, 0.0)
    return scores.softmax(dim=-1).masked_fill(~some, 0.0)


_GROUPS = 16              # a sliding window's chunks run in at most 16 groups, one at a time,
_GROUP_SCORES = 2 ** 17   # of at least 2^17 scores each (512 kB in float32): short inputs in one


@dataclass(frozen=True)
class _Band:
    """A sliding window cut into ``n`` chunks of ``c`` queries. Chunk t holds queries
    ``t c ... t c + c - 1`` and sees keys ``t c - left ... t c + c - 1 + right``: its scores
    are ``(c, c + left + right)``. The chunks run in groups of ``per_group``, so only one
    group's scores are alive at a time: up to 16 groups, each with at least 2^17 scores
    (over the batch and heads), so that long sequences keep about 1/16 of the band's
    scores alive and short ones run in one pass, without a Python loop's overhead."""

    n: int
    c: int
    left: int
    right: int
    per_group: int

    @classmethod
    def of(cls, L: int, window: int, is_causal: bool, block_size: int | None,
           batch: int = 1) -> "_Band":
        """The band of ``window`` over L positions; ``batch``: how many (batch x heads) rows
        share it, which sets the group size."""
        w = min(int(window), L - 1)                                     # a wider window sees nothing more
        c = min(L, max(w, 1) if block_size is None else int(block_size))
        n, right = -(-L // c), 0 if is_causal else w
        scores = batch * n * c * (c + w + right)
        groups = min(_GROUPS, n, max(1, scores // _GROUP_SCORES))
        return cls(n, c, w, right, -(-n // groups))

    @property
    def width(self) -> int:
        """Keys each chunk sees: ``c + left + right``."""
        return self.c + self.left + self.right

    def groups(self):
        """``(t0, t1)``: the chunks ``t0 ... t1 - 1`` of each group, in order."""
        for t0 in range(0, self.n, self.per_group):
            yield t0, min(t0 + self.per_group, self.n)

    def chunks(self, x: torch.Tensor, t0: int, t1: int) -> torch.Tensor:
        """(..., L, E) -> (..., t1 - t0, c, E): chunks t0 ... t1 - 1, zero rows past the end."""
        rows = x[..., t0 * self.c:t1 * self.c, :]                       # (..., <= (t1 - t0) c, E)
        rows = F.pad(rows, (0, 0, 0, (t1 - t0) * self.c - rows.shape[-2]))  # (..., (t1 - t0) c, E)
        return rows.unflatten(-2, (t1 - t0, self.c))                     # (..., t1 - t0, c, E)

    def bands(self, x: torch.Tensor, t0: int, t1: int) -> torch.Tensor:
        """(..., L, E) -> (..., t1 - t0, width, E): the rows chunks t0 ... t1 - 1 see, zero
        outside [0, L)."""
        L, lo, hi = x.shape[-2], t0 * self.c - self.left, t1 * self.c + self.right
        rows = x[..., max(lo, 0):min(hi, L), :]                         # (..., inside [0, L), E)
        rows = F.pad(rows, (0, 0, max(-lo, 0), max(hi - L, 0)))         # (..., hi - lo, E)
        return rows.unfold(-2, self.width, self.c).transpose(-2, -1)    # (..., t1 - t0, width, E)

    def positions(self, device, t0: int, t1: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Absolute query positions (t1 - t0, c, 1) and key positions (t1 - t0, 1, width)."""
        qi = torch.arange(t0 * self.c, t1 * self.c, device=device).view(t1 - t0, self.c, 1)  # (t, c, 1)
        kj = qi[:, :1] - self.left + torch.arange(self.width, device=device)             # (t, 1, width)
        return qi, kj

    def allowed(self, L: int, mask, device, t0: int, t1: int) -> torch.Tensor:
        """(t1 - t0, c, width) bool, or (..., t1 - t0, c, width) with a mask: inside the
        window and inside [0, L)."""
        qi, kj = self.positions(device, t0, t1)
        ok = (kj >= qi - self.left) & (kj <= qi + self.right) & (kj >= 0) & (kj < L) & (qi < L)
        return ok if mask is None else ok & _gather_mask(mask, qi, kj, L, L)


def _check_window(name: str, q, k, v, mask, window, block_size, scale=None, dropout_p=0.0,
                  is_causal=False) -> None:
    check_attention_inputs(q, k, v, mask, scale=scale, dropout_p=dropout_p, is_causal=is_causal)
    check_self_attention(name, q, k, v)
    check_nonnegative_int("window", window)
    if block_size is not None:
        check_positive_int("block_size", block_size)


def _local_explicit(q, k, v, *, window, mask=None, is_causal=False, scale=None, block_size=None,
                    dropout_p=0.0):
    """`local_attention` with its weights: `naive_attention` under `band_mask`."""
    _check_window("local_attention", q, k, v, mask, window, block_size, scale, dropout_p, is_causal)
    allowed = band_mask(q.shape[-2], window, is_causal=is_causal, device=q.device)   # (L, L)
    return naive_attention(q, k, v, mask=allowed if mask is None else allowed & mask, scale=scale,
                           dropout_p=dropout_p, return_weights=True)


@attention_kernel(mask=True, causal=True, dropout=True, exact=True, explicit=_local_explicit)
def local_attention(q, k, v, *, window: int, mask=None, is_causal=False, scale=None,
                    block_size: int | None = None, dropout_p: float = 0.0):
    """Sliding-window (local) self-attention: query i sees keys j with ``|i - j| <= window``
    (causal: ``i - window <= j <= i``), computed chunk by chunk, never as an L x L matrix.

    Math: ``softmax(Q K^T * scale, masked to the band) V``: `naive_attention` under `band_mask`.
    Cost: time O(L (c + 2w) D), memory O(L Dv + L (c + 2w) / 16) with w = window and
    c = block_size (default w), against O(L^2) for full attention: a long sequence's chunks
    run in 16 groups, one group's scores alive at a time (the forward peak is then below the
    band's own scores, L (2w + 1) floats); a short one (under 2^17 scores) runs in one pass.
    With autograd every group's weights are kept for the backward pass.
    Shapes: q (..., L, D), k (..., L, D), v (..., L, Dv) -> (..., L, Dv); needs L == S.
    ``block_size``: queries per chunk (default ``max(window, 1)``); ``mask``: optional bool,
    True = may attend, broadcastable to (..., L, L), read only inside the band.
    Precision: half-precision inputs are computed in float32 a group at a time
    (`working_dtype`), the output rounded to the input dtype.

    >>> q = k = v = torch.randn(1, 2, 10, 4)
    >>> local_attention(q, k, v, window=2).shape
    torch.Size([1, 2, 10, 4])
    """
    _check_window("local_attention", q, k, v, mask, window, block_size, scale, dropout_p, is_causal)
    L = q.shape[-2]
    if L == 0:                                                              # nothing to attend: (..., 0, Dv)
        return v.new_zeros(v.shape)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    band = _Band.of(L, window, is_causal, block_size, batch=q[..., 0, 0].numel())
    out = q.new_empty(*q.shape[:-1], v.shape[-1])                          # (..., L, Dv)
    work = working_dtype(q.dtype)                                          # half precision: float32
    for t0, t1 in band.groups():                                           # one group's scores at a time
        q_c = band.chunks(q, t0, t1).to(work) * scale                      # (..., t, c, D)
        scores = q_c @ band.bands(k, t0, t1).to(work).transpose(-2, -1)    # (..., t, c, width)
        weights = _masked_softmax(scores, band.allowed(L, mask, q.device, t0, t1))
        if dropout_p > 0.0:
            weights = F.dropout(weights, p=dropout_p)
        _write_rows(out, weights @ band.bands(v, t0, t1).to(work), t0 * band.c)  # (..., t, c, Dv)
    return out


def _write_rows(out: torch.Tensor, chunks: torch.Tensor, start: int) -> None:
    """Copy (..., t, c, Dv) chunk outputs into rows ``start ...`` of out (..., L, Dv), dropping
    the rows past L."""
    rows = chunks.flatten(-3, -2)                                           # (..., t c, Dv)
    stop = min(start + rows.shape[-2], out.shape[-2])
    out[..., start:stop, :] = rows[..., :stop - start, :].to(out.dtype)


def _longformer_explicit(q, k, v, *, window, global_tokens, mask=None, is_causal=False, scale=None,
                         block_size=None, dropout_p=0.0):
    """`longformer_attention` with its weights: `naive_attention` under `longformer_mask`."""
    _check_window("longformer_attention", q, k, v, mask, window, block_size, scale, dropout_p, is_causal)
    allowed = longformer_mask(q.shape[-2], window, global_tokens, is_causal=is_causal,
                              device=q.device)                                          # (L, L)
    return naive_attention(q, k, v, mask=allowed if mask is None else allowed & mask, scale=scale,
                           dropout_p=dropout_p, return_weights=True)


@attention_kernel(mask=True, causal=True, dropout=True, exact=True, explicit=_longformer_explicit)
def longformer_attention(q, k, v, *, window: int, global_tokens, mask=None, is_causal=False,
                         scale=None, block_size: int | None = None, dropout_p: float = 0.0):
    """Longformer attention: a sliding window plus global tokens that attend to every key and
    that every query attends to (causal: only global tokens in the past, ``j <= i``).

    Math: `naive_attention` under `longformer_mask`; exact, computed in three parts: every
    query against its band (global keys left out) and the g global keys in one softmax,
    then the g global queries against all keys.
    Cost: time O(L (c + 2w + 2g) D), memory O(L Dv + L (c + 2w + g) / 16); c = block_size
    (default w); the chunks run in groups, as in `local_attention`.
    Shapes: q (..., L, D), k (..., L, D), v (..., L, Dv) -> (..., L, Dv); needs L == S.
    ``global_tokens``: positions (a list or a long tensor, each in [0, L)); ``mask`` as in
    `local_attention`. Precision as in `local_attention`: float32 for half-precision inputs.
    """
    _check_window("longformer_attention", q, k, v, mask, window, block_size, scale, dropout_p, is_causal)
    L = q.shape[-2]
    if L == 0:                                                              # nothing to attend: (..., 0, Dv)
        return v.new_zeros(v.shape)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    g = _global_index(global_tokens, L, q.device)                          # (g,)
    band = _Band.of(L, window, is_causal, block_size, batch=q[..., 0, 0].numel())
    work = working_dtype(q.dtype)                                          # half precision: float32
    k_g, v_g = k[..., None, g, :].to(work), v[..., None, g, :].to(work)     # (..., 1, g, D), (..., 1, g, Dv)
    out = q.new_empty(*q.shape[:-1], v.shape[-1])                          # (..., L, Dv)
    # 1. every query: its band without the global keys (so none counts twice), and the global
    #    keys; one group of chunks at a time
    for t0, t1 in band.groups():
        q_c = band.chunks(q, t0, t1).to(work) * scale                      # (..., t, c, D)
        scores = torch.cat([q_c @ band.bands(k, t0, t1).to(work).transpose(-2, -1),
                            q_c @ k_g.transpose(-2, -1)], dim=-1)           # (..., t, c, width + g)
        weights = _masked_softmax(scores, _longformer_allowed(band, g, L, mask, is_causal, q.device,
                                                              t0, t1))
        if dropout_p > 0.0:
            weights = F.dropout(weights, p=dropout_p)
        w_band, w_glob = weights.split([band.width, len(g)], dim=-1)
        chunk_out = w_band @ band.bands(v, t0, t1).to(work) + w_glob @ v_g  # (..., t, c, Dv)
        _write_rows(out, chunk_out, t0 * band.c)
    # 2. the global queries: full rows (in float32 for half-precision inputs, as the bands)
    keys = torch.arange(L, device=q.device)
    rows = keys <= g[:, None] if is_causal else None                       # (g, L)
    if mask is not None:
        picked = _gather_mask(mask, g[:, None], keys, L, L)                 # (..., g, L)
        rows = picked if rows is None else picked & rows
    out_g = naive_attention(q[..., g, :].to(work), k.to(work), v.to(work), mask=rows, scale=scale,
                            dropout_p=dropout_p)                            # (..., g, Dv)
    return out.index_copy_(-2, g, out_g.to(out.dtype))                      # (..., L, Dv)


def _longformer_allowed(band: _Band, g, L: int, mask, is_causal: bool, device, t0: int,
                        t1: int) -> torch.Tensor:
    """(t, c, width + g) bool, or (..., t, c, width + g) with a mask, for chunks t0 ... t1 - 1:
    band keys that are not global, then the global keys (causal: those at or before the query)."""
    qi, kj = band.positions(device, t0, t1)
    is_global = torch.zeros(L, dtype=torch.bool, device=device).index_fill(0, g, True)   # (L,)
    in_band = band.allowed(L, mask, device, t0, t1) & ~is_global[kj.clamp(0, L - 1)]   # (..., t, c, width)
    to_global = (qi < L) & ((g <= qi) | (not is_causal))                                # (t, c, g)
    if mask is not None:
        to_global = to_global & _gather_mask(mask, qi, g, L, L)                          # (..., t, c, g)
    return torch.cat([in_band, to_global], dim=-1)
