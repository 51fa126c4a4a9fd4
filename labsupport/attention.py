"""Attention kernels with one signature, and a registry that modules use by name.

Every kernel takes ``q (..., L, D)``, ``k (..., S, D)``, ``v (..., S, Dv)``, usually
``(B, H, L, D)``, and returns ``(..., L, Dv)``, exactly like
``torch.nn.functional.scaled_dot_product_attention``. Boolean masks mean
``True`` = may attend (the SDPA convention), broadcastable to ``(..., L, S)``.
Note that ``nn.MultiheadAttention`` reads boolean masks the other way round
(``True`` = blocked); `labsupport.layers` converts where it talks to it.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Callable

import torch
import torch.nn.functional as F

from .validation import check_attention_inputs, check_positive_int

Kernel = Callable[..., torch.Tensor]


def causal_mask(L: int, S: int | None = None, *, device=None) -> torch.Tensor:
    """Boolean ``(L, S)`` mask, True where query i may attend key j, i.e. j <= i.

    Aligned at the top left, as ``is_causal=True`` in SDPA: with S > L the last
    S - L keys are never seen.

    >>> causal_mask(3).int()
    tensor([[1, 0, 0],
            [1, 1, 0],
            [1, 1, 1]], dtype=torch.int32)
    """
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).tril()


def _allowed(mask, is_causal: bool, L: int, S: int, device) -> torch.Tensor | None:
    """Combine an optional mask and causality into one boolean mask (or None)."""
    if not is_causal:
        return mask
    causal = causal_mask(L, S, device=device)
    return causal if mask is None else mask & causal


def naive_attention(q, k, v, *, mask=None, is_causal=False, scale=None, bias=None, dropout_p=0.0,
                    return_weights=False):
    """Textbook scaled dot-product attention with the explicit ``L x S`` score matrix.

    Math: ``softmax(Q K^T * scale + bias, masked to -inf where not allowed) V``, ``scale = 1/sqrt(D)``.
    Cost: time O(L S D); memory O(L S): the scores and weights are materialised.
    Shapes: q (..., L, D), k (..., S, D), v (..., S, Dv) -> out (..., L, Dv),
    and with ``return_weights`` also the weights (..., L, S).
    A query with no allowed key gets weights of zero (and an output of zero), as SDPA does.
    ``bias``: an optional float tensor broadcastable to (..., L, S), added to the
    scaled scores (ALiBi and relative position biases); ``dropout_p`` drops
    attention weights (pass 0.0 in evaluation, as for SDPA).

    >>> q = k = v = torch.ones(1, 1, 2, 4)
    >>> naive_attention(q, k, v, is_causal=True).shape
    torch.Size([1, 1, 2, 4])
    """
    check_attention_inputs(q, k, v, mask, bias)
    L, S = q.shape[-2], k.shape[-2]
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale                      # (..., L, S)
    if bias is not None:
        scores = scores + bias
    allowed = _allowed(mask, is_causal, L, S, q.device)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = scores.softmax(dim=-1)                                 # (..., L, S)
    if allowed is not None:                                          # rows with no key: 0, not NaN
        weights = weights.masked_fill(~allowed.any(dim=-1, keepdim=True), 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    out = weights @ v                                                # (..., L, Dv)
    return (out, weights) if return_weights else out


def _tile(t, rows: slice, cols: slice):
    """The (rows, cols) tile of a mask or bias broadcastable to (..., L, S)."""
    if t is None:
        return None
    r = rows if t.shape[-2] > 1 else slice(None)
    c = cols if t.shape[-1] > 1 else slice(None)
    return t[..., r, c]


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
    Shapes: q (..., L, D), k (..., S, D), v (..., S, Dv) -> (..., L, Dv).

    >>> q = k = v = torch.randn(1, 2, 5, 4)
    >>> torch.allclose(flash_attention(q, k, v, block_size=2), naive_attention(q, k, v), atol=1e-6)
    True
    """
    check_attention_inputs(q, k, v, mask, bias)
    check_positive_int("block_size", block_size)
    L, S = q.shape[-2], k.shape[-2]
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    blocks = [_flash_query_block(q, k, v, slice(i, min(i + block_size, L)), mask, bias,
                                 is_causal, scale, block_size)
              for i in range(0, L, block_size)]
    return torch.cat(blocks, dim=-2)                                      # (..., L, Dv)


def _flash_query_block(q, k, v, rows, mask, bias, is_causal, scale, block_size):
    """Attention output for the queries in ``rows``, visiting key tiles one at a time."""
    q_block = q[..., rows, :] * scale                                     # (..., Bq, D)
    m = q.new_full(q_block.shape[:-1], float("-inf"))                     # (..., Bq) running max
    l = q.new_zeros(q_block.shape[:-1])                                   # (..., Bq) normaliser
    acc = q.new_zeros(*q_block.shape[:-1], v.shape[-1])                   # (..., Bq, Dv)
    S = k.shape[-2]
    last_key = min(rows.stop, S) if is_causal else S                      # keys j <= i only
    for j in range(0, last_key, block_size):
        cols = slice(j, min(j + block_size, last_key))
        s = q_block @ k[..., cols, :].transpose(-2, -1)                   # (..., Bq, Bk) one tile
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
        acc = acc * correction[..., None] + p @ v[..., cols, :]
        m = m_new
    return acc / l.clamp_min(torch.finfo(l.dtype).tiny)[..., None]        # rows with no key: 0


_BACKENDS = {
    "math": "MATH",
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
}


def _backend_context(backend: str | None):
    if backend is None:
        return contextlib.nullcontext()
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {sorted(_BACKENDS)} or None, got {backend!r}")
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(getattr(SDPBackend, _BACKENDS[backend]))


def sdpa(q, k, v, *, mask=None, is_causal=False, scale=None, bias=None, dropout_p=0.0, backend=None):
    """``F.scaled_dot_product_attention``, optionally forced to one backend.

    Math: the same function as `naive_attention`.
    Cost: time O(L S D); memory O(L S) on the math backend, O(L) on the fused
    ``flash``/``efficient`` backends (which never store the score matrix).
    Shapes: q (..., L, D), k (..., S, D), v (..., S, Dv) -> (..., L, Dv).
    ``bias`` (float, broadcastable to (..., L, S)) is added to the scaled scores;
    SDPA takes it as a float ``attn_mask``, into which a boolean mask and causality are
    folded as -inf.
    ``backend``: None (PyTorch chooses), "math", "flash", "efficient" or "cudnn";
    a backend that cannot run these inputs on this device raises ``RuntimeError``.
    """
    check_attention_inputs(q, k, v, mask, bias)
    if bias is not None:                                            # one additive float mask
        allowed = _allowed(mask, is_causal, q.shape[-2], k.shape[-2], q.device)
        mask = bias if allowed is None else bias.masked_fill(~allowed, float("-inf"))
        is_causal = False
    elif mask is not None and is_causal:                            # SDPA takes one or the other
        mask, is_causal = _allowed(mask, True, q.shape[-2], k.shape[-2], q.device), False
    with _backend_context(backend):
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale
        )


def sdpa_backends(q, k, v, *, is_causal=False) -> dict[str, bool]:
    """Which SDPA backends can run these inputs here: ``{"flash": False, "math": True, ...}``."""
    usable = {}
    for name in _BACKENDS:
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sdpa(q, k, v, is_causal=is_causal, backend=name)
            usable[name] = True
        except (RuntimeError, AttributeError):
            usable[name] = False
    return usable


KERNELS: dict[str, Kernel] = {
    "naive": naive_attention,
    "sdpa": sdpa,
    "flash": flash_attention,
}


def get_kernel(kernel: str | Kernel) -> Kernel:
    """Resolve a kernel given by name (a key of `KERNELS`) or as a callable."""
    if callable(kernel):
        return kernel
    if kernel not in KERNELS:
        raise ValueError(f"unknown attention kernel {kernel!r}; expected one of {sorted(KERNELS)}")
    return KERNELS[kernel]
