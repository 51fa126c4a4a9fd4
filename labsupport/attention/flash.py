"""FlashAttention's algorithm (12.4) in plain PyTorch: exact attention by tiles and an
online softmax, never holding more than one tile of scores.
"""
from __future__ import annotations

import torch

from ..validation import check_attention_inputs, check_positive_int
from .exact import _softmax_explicit
from .masks import _at_least_2d
from .precision import working_dtype
from .spec import attention_kernel


def _tile(t, rows: slice, cols: slice):
    """The (rows, cols) tile of a mask or bias broadcastable to (..., L, S)."""
    if t is None:
        return None
    r = rows if t.shape[-2] > 1 else slice(None)
    c = cols if t.shape[-1] > 1 else slice(None)
    return t[..., r, c]


@attention_kernel(mask=True, bias=True, causal=True, exact=True, explicit=_softmax_explicit)
def flash_attention(q, k, v, *, mask=None, is_causal=False, scale=None, bias=None,
                    block_size=128):
    """FlashAttention's algorithm in plain PyTorch: tiles and an online softmax.

    Math: the same function as `naive_attention`. For each block of queries, the key
    blocks are visited in turn while a running row maximum ``m``, normaliser ``l`` and
    unnormalised output ``acc`` are kept: with a new tile of scores ``s``,
    ``m' = max(m, rowmax s)``, ``l = l e^(m - m') + rowsum e^(s - m')``,
    ``acc = acc e^(m - m') + e^(s - m') V_tile``; at the end ``out = acc / l``.
    Cost: time O(L S D), as naive attention (exact attention cannot do better); memory
    O(L Dv + block_size^2) in the forward pass: one tile of scores is alive at a time.
    With ``is_causal`` (top-left aligned, as SDPA), tiles entirely above the diagonal
    are skipped, about half the work. ``mask`` (bool) and ``bias`` (float),
    broadcastable to (..., L, S), are cut into the same tiles.
    Gradients: autograd differentiates the loop, but it must keep every tile's
    probabilities for the backward pass, so training memory is O(L S) again. The real
    kernel stores only ``m`` and ``l`` per row and recomputes the tiles backwards.
    Precision: in bfloat16 or float16 each tile is computed in float32 (`working_dtype`):
    the half-precision q, k and v of a tile are read exactly, and the products ``Q K^T``
    and ``P V`` are formed and summed in float32, as FlashAttention's tensor-core products
    do (it also rounds ``P`` to half precision; here it stays float32). The scores, ``m``,
    ``l`` and ``acc`` are float32, which keeps a long row's normaliser exact where a
    half-precision sum would stop growing (bfloat16 holds 8 significant bits); the output
    is rounded to the input dtype.
    Shapes: q (..., L, D), k (..., S, D), v (..., S, Dv) -> (..., L, Dv).

    >>> from labsupport.attention import naive_attention
    >>> q = k = v = torch.randn(1, 2, 5, 4)
    >>> torch.allclose(flash_attention(q, k, v, block_size=2), naive_attention(q, k, v), atol=1e-6)
    True
    """
    check_attention_inputs(q, k, v, mask, bias, scale=scale, is_causal=is_causal)
    block_size = check_positive_int("block_size", block_size)
    mask, bias = _at_least_2d(mask), _at_least_2d(bias)
    L = q.shape[-2]
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    out = q.new_empty(*q.shape[:-1], v.shape[-1])                         # (..., L, Dv)
    for i in range(0, L, block_size):
        rows = slice(i, min(i + block_size, L))
        out[..., rows, :] = _flash_query_block(q, k, v, rows, mask, bias, is_causal, scale,
                                               block_size)
    return out


def _flash_query_block(q, k, v, rows, mask, bias, is_causal, scale, block_size):
    """Attention output for the queries in ``rows``, visiting key tiles one at a time."""
    stats = dict(dtype=working_dtype(q.dtype), device=q.device)           # half: float32
    q_block = q[..., rows, :].to(stats["dtype"]) * scale                  # (..., Bq, D)
    m = torch.full(q_block.shape[:-1], float("-inf"), **stats)            # (..., Bq) running max
    l = torch.zeros(q_block.shape[:-1], **stats)                          # (..., Bq) normaliser
    acc = torch.zeros(*q_block.shape[:-1], v.shape[-1], **stats)          # (..., Bq, Dv)
    S = k.shape[-2]
    last_key = min(rows.stop, S) if is_causal else S                      # keys j <= i only
    for j in range(0, last_key, block_size):
        cols = slice(j, min(j + block_size, last_key))
        s = q_block @ k[..., cols, :].to(m.dtype).transpose(-2, -1)       # (..., Bq, Bk) one tile
        if bias is not None:
            s = s + _tile(bias, rows, cols)
        allowed = _tile(mask, rows, cols)
        if is_causal and cols.stop - 1 > rows.start:                      # tile crosses the diagonal
            i = torch.arange(rows.start, rows.stop, device=q.device)
            diagonal = i[:, None] >= torch.arange(cols.start, cols.stop, device=q.device)
            allowed = diagonal if allowed is None else allowed & diagonal
        if allowed is not None:
            s = s.masked_fill(~allowed, float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1))                          # (..., Bq)
        shift = m_new.masked_fill(m_new == float("-inf"), 0.0)            # rows with no key yet
        p = (s - shift[..., None]).exp()                                  # (..., Bq, Bk)
        correction = (m - shift).exp()                                    # rescales old sums
        l = l * correction + p.sum(dim=-1)
        acc = acc * correction[..., None] + p @ v[..., cols, :].to(m.dtype)
        m = m_new
    # l >= 1 for a row with any key (its maximum adds e^0); a row with none gets 0, with finite grads
    return (acc / l.clamp_min(1.0)[..., None]).to(q.dtype)
