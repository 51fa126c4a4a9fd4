"""Exact softmax attention: the textbook kernel with its explicit ``L x S`` matrix, and
``F.scaled_dot_product_attention`` (optionally forced to one backend).
"""
from __future__ import annotations

import contextlib
import warnings

import torch
import torch.nn.functional as F

from ..devices import quiet_stderr
from ..validation import check_attention_inputs
from .masks import _allowed, _at_least_2d
from .spec import attention_kernel


def _softmax_explicit(q, k, v, *, mask=None, is_causal=False, scale=None, bias=None, dropout_p=0.0,
                      block_size=None, backend=None):
    """The explicit form of the exact kernels: `naive_attention` and its weights (a block
    size or an SDPA backend changes how the same function is computed, not its weights)."""
    return naive_attention(q, k, v, mask=mask, is_causal=is_causal, scale=scale, bias=bias,
                           dropout_p=dropout_p, return_weights=True)


@attention_kernel(mask=True, bias=True, causal=True, dropout=True, exact=True, explicit=_softmax_explicit)
def naive_attention(q, k, v, *, mask=None, is_causal=False, scale=None, bias=None, dropout_p=0.0,
                    return_weights=False):
    """Textbook scaled dot-product attention with the explicit ``L x S`` score matrix.

    Math: ``softmax(Q K^T * scale + bias, masked to -inf where not allowed) V``, ``scale = 1/sqrt(D)``.
    Cost: time O(L S D); memory O(L S): the scores and weights are materialised.
    Shapes: q (..., L, D), k (..., S, D), v (..., S, Dv) -> out (..., L, Dv),
    and with ``return_weights`` also the weights (..., L, S).
    ``is_causal``: query i sees keys j <= i, aligned at the top left as SDPA (`causal_mask`).
    A query with no allowed key (masked, or a bias of -inf everywhere) gets weights of zero
    and an output of zero, as SDPA does. NaN or inf in q, k or v is refused by position
    (every kernel does): a mask would not hide it, since a weight of 0 times NaN is NaN.
    ``bias``: an optional float tensor broadcastable to (..., L, S), added to the
    scaled scores (ALiBi and relative position biases); ``dropout_p`` drops
    attention weights (pass 0.0 in evaluation, as for SDPA).
    Precision: q is scaled before the product, as SDPA does, so that float16 never holds
    the unscaled ``q . k`` (beyond 65504 it is inf). The scores are held in the input
    dtype (their memory is the lesson): in float16 or bfloat16 each is rounded to that
    dtype, so the weights' error grows with the logits' size (about ``|s| eps``); `sdpa`
    and `flash_attention` compute in float32 and keep half-precision accuracy.

    >>> q = k = v = torch.ones(1, 1, 2, 4)
    >>> naive_attention(q, k, v, is_causal=True).shape
    torch.Size([1, 1, 2, 4])
    """
    check_attention_inputs(q, k, v, mask, bias, scale=scale, dropout_p=dropout_p, is_causal=is_causal)
    L, S = q.shape[-2], k.shape[-2]
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (q * scale) @ k.transpose(-2, -1)                      # (..., L, S)
    if bias is not None:
        scores = scores + bias
    allowed = _allowed(mask, is_causal, L, S, q.device)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    no_key = None                                                    # (..., L, 1): rows with no key
    if bias is not None:                                             # a bias of -inf hides keys too
        no_key = torch.isneginf(scores).all(dim=-1, keepdim=True)
    elif allowed is not None:
        no_key = ~allowed.any(dim=-1, keepdim=True)
    if no_key is not None and not no_key.any():
        no_key = None                                                # the usual case: no copies
    if no_key is not None:
        scores = scores.masked_fill(no_key, 0.0)                     # a finite softmax there ...
    weights = scores.softmax(dim=-1)                                 # (..., L, S)
    if no_key is not None:
        weights = weights.masked_fill(no_key, 0.0)                   # ... then 0, not NaN, as SDPA
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    out = weights @ v                                                # (..., L, Dv)
    return (out, weights) if return_weights else out


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


@attention_kernel(mask=True, bias=True, causal=True, dropout=True, exact=True, explicit=_softmax_explicit)
def sdpa(q, k, v, *, mask=None, is_causal=False, scale=None, bias=None, dropout_p=0.0, backend=None):
    """``F.scaled_dot_product_attention``, optionally forced to one backend.

    Math: the same function as `naive_attention`.
    Cost: time O(L S D); memory O(L S) on the math backend, O(L) on the fused
    ``flash``/``efficient`` backends (which never store the score matrix).
    Shapes: q (..., L, D), k (..., S, D), v (..., S, Dv) -> (..., L, Dv).
    ``bias`` (float, broadcastable to (..., L, S)) is added to the scaled scores;
    SDPA takes it as a float ``attn_mask``, into which a boolean mask and causality are
    folded as -inf. ``is_causal`` is SDPA's, aligned at the top left (`causal_mask`).
    ``backend``: None (PyTorch chooses), "math", "flash", "efficient" or "cudnn";
    a backend that cannot run these inputs on this device raises ``RuntimeError``.
    """
    check_attention_inputs(q, k, v, mask, bias, scale=scale, dropout_p=dropout_p, is_causal=is_causal)
    is_causal, scale = bool(is_causal), None if scale is None else float(scale)    # SDPA takes no NumPy
    mask, bias = _at_least_2d(mask), _at_least_2d(bias)
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


_BACKEND_OPS = {           # the aten op each SDPA backend dispatches to
    "flash": "flash_attention", "efficient": "efficient_attention",
    "cudnn": "cudnn_attention", "math": "attention_math",
}


def sdpa_backend_used(q, k, v, *, is_causal=False) -> str:
    """Which backend ``F.scaled_dot_product_attention`` ran for these inputs, as the
    profiler saw it: ``"flash"``, ``"efficient"``, ``"cudnn"`` or ``"math"``
    (``"unknown"`` if none of their ops ran).

    >>> q = k = v = torch.randn(1, 1, 8, 4)
    >>> sdpa_backend_used(q, k, v, is_causal=True) in ("flash", "efficient", "cudnn", "math")
    True
    """
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if q.is_cuda:
        activities.append(ProfilerActivity.CUDA)
    with torch.no_grad(), quiet_stderr(), profile(activities=activities) as prof:
        sdpa(q, k, v, is_causal=is_causal)
    names = {event.name for event in prof.events()}
    for backend, op in _BACKEND_OPS.items():
        if any(op in name for name in names):
            return backend
    return "unknown"
