"""Kernelized attention (12.5): softmax's ``exp(q.k)`` replaced by ``phi(q).phi(k)`` so that
the product can be reordered and the (L, S) scores are never formed. Linear attention
(elu + 1 features, with its step-by-step RNN form) and Performer (FAVOR+ positive
orthogonal random features).
"""
from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from ..validation import (
    check_attention_inputs,
    check_no_mask,
    check_positive_int,
    check_self_attention,
    check_shape,
)
from .precision import working_dtype
from .spec import attention_kernel

_NO_MASK = "kernelized attention never forms the (L, S) scores, so an arbitrary mask cannot apply"


def _nonzero(den: torch.Tensor) -> torch.Tensor:
    """Guard a normaliser against underflow to 0 (changes nothing otherwise)."""
    return den.clamp_min(torch.finfo(den.dtype).tiny)


def _kernelized(phi_q, phi_k, v) -> torch.Tensor:
    """Non-causal ``phi(Q) (phi(K)^T V) / phi(Q) (phi(K)^T 1)``: no (L, S) matrix.
    Shapes: phi_q (..., L, m), phi_k (..., S, m), v (..., S, Dv) -> (..., L, Dv)."""
    kv = phi_k.transpose(-2, -1) @ v                                       # (..., m, Dv)
    z = phi_k.sum(dim=-2).unsqueeze(-1)                                    # (..., m, 1)
    return (phi_q @ kv) / _nonzero(phi_q @ z)                              # (..., L, Dv)


def _kernelized_causal(phi_q, phi_k, v, *, chunk_size: int) -> torch.Tensor:
    """Causal kernelized attention by chunked prefix sums (linear attention).

    Within a chunk, the masked (c, c) product ``tril(phi(Q_c) phi(K_c)^T)``; across chunks,
    the running state ``S = sum_j phi(k_j) v_j^T`` (m, Dv) and ``z = sum_j phi(k_j)`` (m, 1).
    Memory per head O(c^2 + c m + m Dv) without autograd (with it, one state per chunk).
    Queries and keys align at the top left.
    Shapes: phi_q (..., L, m), phi_k (..., S, m), v (..., S, Dv) -> (..., L, Dv).
    """
    *batch, L, m = phi_q.shape
    S, z = phi_q.new_zeros(*batch, m, v.shape[-1]), phi_q.new_zeros(*batch, m, 1)
    outs = []
    for t in range(0, L, chunk_size):
        qc = phi_q[..., t:t + chunk_size, :]                                # (..., c, m)
        kc, vc = phi_k[..., t:t + chunk_size, :], v[..., t:t + chunk_size, :]  # (..., c', m), (..., c', Dv)
        scores = (qc @ kc.transpose(-2, -1)).tril()                         # (..., c, c'): j <= i
        num = qc @ S + scores @ vc                                          # (..., c, Dv)
        den = qc @ z + scores.sum(dim=-1, keepdim=True)                     # (..., c, 1)
        outs.append(num / _nonzero(den))
        S = S + kc.transpose(-2, -1) @ vc                                   # (..., m, Dv)
        z = z + kc.sum(dim=-2).unsqueeze(-1)                                # (..., m, 1)
    if not outs:                                                            # L = 0
        return v.new_zeros(*batch, 0, v.shape[-1])
    return torch.cat(outs, dim=-2)                                          # (..., L, Dv)


def _elu_features(q, k, scale):
    """phi(x) = elu(x) + 1 > 0 of ``q * scale`` and ``k`` (scale None: 1, as in the paper)."""
    q = q if scale is None else q * scale
    return F.elu(q) + 1, F.elu(k) + 1


@attention_kernel(causal=True)
def linear_attention(q, k, v, *, mask=None, is_causal=False, scale=None, chunk_size: int = 64):
    """Linear attention (Katharopoulos et al. 2020): softmax's ``exp(q.k)`` replaced by
    ``phi(q).phi(k)`` with ``phi(x) = elu(x) + 1``, so the product can be reordered.

    Math: ``out_i = phi(q_i)^T sum_j phi(k_j) v_j^T / phi(q_i)^T sum_j phi(k_j)``, sums over
    all j, or j <= i when causal (top-left aligned, as SDPA; chunked prefix sums,
    `linear_attention_recurrent` is the same function step by step).
    Cost: time O((L + S) D Dv), plus O(L c D) causal; memory O(D Dv + L Dv), causal per
    chunk O(c^2 + c D + D Dv); never O(L S).
    Shapes: q (..., L, D), k (..., S, D), v (..., S, Dv) -> (..., L, Dv).
    ``scale`` multiplies q before the feature map (default None: 1, not 1/sqrt(D));
    ``chunk_size``: positions per chunk of the causal prefix sums. No ``mask``: the (L, S)
    scores are never formed.
    Precision: half-precision inputs are computed in float32 (`working_dtype`): the sums
    ``sum_j phi(k_j) v_j^T`` grow with S and overflow float16 (65504) once the features
    are large, while the output, a weighted mean of the values, always fits the input
    dtype it is rounded to.
    """
    check_attention_inputs(q, k, v, scale=scale, is_causal=is_causal)
    check_no_mask("linear_attention", mask, _NO_MASK)
    chunk_size = check_positive_int("chunk_size", chunk_size)
    work = working_dtype(q.dtype)
    phi_q, phi_k = _elu_features(q.to(work), k.to(work), scale)            # (..., L, D), (..., S, D)
    if is_causal:
        return _kernelized_causal(phi_q, phi_k, v.to(work), chunk_size=chunk_size).to(q.dtype)
    return _kernelized(phi_q, phi_k, v.to(work)).to(q.dtype)


class LinearAttentionState(NamedTuple):
    """The constant-size memory of causal linear attention after some steps."""

    S: torch.Tensor   # (..., D, Dv): sum_j phi(k_j) v_j^T
    z: torch.Tensor   # (..., D): sum_j phi(k_j)


def linear_attention_recurrent(q, k, v, *, state: LinearAttentionState | None = None, scale=None,
                               return_state: bool = False):
    """Causal `linear_attention` as an RNN: one step per position, a state of constant size.

    Math: ``S_t = S_{t-1} + phi(k_t) v_t^T``, ``z_t = z_{t-1} + phi(k_t)``,
    ``out_t = S_t^T phi(q_t) / z_t . phi(q_t)``, ``phi(x) = elu(x) + 1``.
    Cost: time O(L D Dv); memory O(D Dv) for the state whatever L (plus the outputs).
    Shapes: q (..., L, D), k (..., L, D), v (..., L, Dv) -> (..., L, Dv); with
    ``return_state`` also the final `LinearAttentionState`, which a later call takes as
    ``state`` to continue the stream. The state is kept in `working_dtype` (float32 for
    half-precision inputs: its sums grow with every step), the output in the input dtype.

    >>> q = k = v = torch.randn(1, 1, 6, 4)
    >>> out, st = linear_attention_recurrent(q[..., :3, :], k[..., :3, :], v[..., :3, :], return_state=True)
    >>> rest = linear_attention_recurrent(q[..., 3:, :], k[..., 3:, :], v[..., 3:, :], state=st)
    >>> torch.allclose(torch.cat([out, rest], -2), linear_attention(q, k, v, is_causal=True), atol=1e-6)
    True
    """
    check_attention_inputs(q, k, v, scale=scale)
    check_self_attention("linear_attention_recurrent", q, k, v)
    *batch, L, D = q.shape
    work = working_dtype(q.dtype)
    if state is None:
        zeros = dict(dtype=work, device=q.device)
        state = LinearAttentionState(torch.zeros(*batch, D, v.shape[-1], **zeros),
                                     torch.zeros(*batch, D, **zeros))
    check_shape("state.S", state.S, (*batch, D, v.shape[-1]), "(..., D, Dv)")
    check_shape("state.z", state.z, (*batch, D), "(..., D)")
    phi_q, phi_k = _elu_features(q.to(work), k.to(work), scale)            # (..., L, D) each
    v = v.to(work)
    S, z = state.S.to(work), state.z.to(work)
    outs = []
    for t in range(L):
        S = S + phi_k[..., t, :, None] * v[..., t, None, :]                 # (..., D, Dv)
        z = z + phi_k[..., t, :]                                            # (..., D)
        num = (phi_q[..., t, :, None] * S).sum(dim=-2)                      # (..., Dv)
        den = (phi_q[..., t, :] * z).sum(dim=-1, keepdim=True)              # (..., 1)
        outs.append(num / _nonzero(den))
    out = torch.stack(outs, dim=-2) if outs else v.new_zeros(*batch, 0, v.shape[-1])  # (..., L, Dv)
    out = out.to(q.dtype)
    return (out, LinearAttentionState(S, z)) if return_state else out


def _as_generator(generator):
    """None (the global RNG), a torch.Generator, or an int seed for a fresh CPU generator."""
    if generator is None or isinstance(generator, torch.Generator):
        return generator
    if isinstance(generator, numbers.Integral) and not isinstance(generator, (bool, np.bool_)):
        return torch.Generator().manual_seed(int(generator))                 # np.int64 from an array too
    raise TypeError("generator must be None, a torch.Generator or an int seed, "
                    f"got {type(generator).__name__}")


def orthogonal_random_features(num_features: int, dim: int, *, generator=None, dtype=None,
                               device=None) -> torch.Tensor:
    """FAVOR+ projections ``W (num_features, dim)``: blocks of ``dim`` orthogonal rows (QR of
    a Gaussian matrix), each row's norm redrawn from chi(dim) so that rows are marginally
    ``N(0, I)``, as in Choromanski et al. (2021). Drawn in float64 on the generator's device.
    ``generator``: None (global RNG), a ``torch.Generator`` or an int seed.
    """
    num_features, dim = check_positive_int("num_features", num_features), check_positive_int("dim", dim)
    gen = _as_generator(generator)
    where = gen.device if gen is not None else torch.device("cpu")
    gauss = torch.randn(-(-num_features // dim), dim, dim, generator=gen, dtype=torch.float64,
                        device=where)                                      # (blocks, D, D)
    Q, R = torch.linalg.qr(gauss)
    Q = Q * R.diagonal(dim1=-2, dim2=-1).sign().unsqueeze(-2)              # fix QR's signs: Haar
    rows = Q.transpose(-2, -1).reshape(-1, dim)[:num_features]             # (m, D), unit rows
    norms = torch.randn(num_features, dim, generator=gen, dtype=torch.float64,
                        device=where).norm(dim=-1, keepdim=True)           # (m, 1) ~ chi(D)
    return (rows * norms).to(device=device, dtype=dtype or torch.get_default_dtype())


def _favor_log(x, w):
    """log phi(x) = ``w x - |x|^2 / 2 - log(m) / 2``. Shapes: x (..., L, D), w (m, D) -> (..., L, m)."""
    return x @ w.transpose(-2, -1) - x.pow(2).sum(dim=-1, keepdim=True) / 2 - math.log(w.shape[0]) / 2


def favor_features(x, w):
    """FAVOR+ positive random features ``phi(x) = exp(w x - |x|^2 / 2) / sqrt(m)``, unbiased:
    ``E[phi(x) . phi(y)] = exp(x . y)`` for rows of w drawn N(0, I). Unstabilised (for
    analysis; `performer_attention` works with its logarithms). Shapes: x (..., L, D), w (m, D)
    -> (..., L, m)."""
    return torch.exp(_favor_log(x, w))


def _favor(log_q, log_k, v) -> torch.Tensor:
    """Non-causal FAVOR+ from log-features, every exponential normalised:
    ``softmax_m(log phi(q) + K) (softmax_j(log phi(k_j))^T V)`` with ``K_m = logsumexp_j
    log phi(k_j)_m``: the ratio ``phi(q) sum_j phi(k_j) v_j^T / phi(q) sum_j phi(k_j)``
    exactly, for features of any magnitude. Shapes: log_q (..., L, m), log_k (..., S, m),
    v (..., S, Dv) -> (..., L, Dv)."""
    means = log_k.softmax(dim=-2).transpose(-2, -1) @ v                    # (..., m, Dv): a mean per feature
    mass = log_k.logsumexp(dim=-2).unsqueeze(-2)                           # (..., 1, m): log sum_j phi(k_j)
    return (log_q + mass).softmax(dim=-1) @ means                          # (..., L, Dv)


def _favor_causal(log_q, log_k, v, *, chunk_size: int) -> torch.Tensor:
    """Causal FAVOR+ from log-features, chunk by chunk, every exponential normalised.

    Query i of a chunk weighs, in one softmax, the m features of the keys before the chunk
    (log-weight ``log phi(q_i)_m + log sum_j phi(k_j)_m``, value their mean of v) and the
    chunk's keys j <= i (log-weight ``log phi(q_i) . phi(k_j)``, value v_j). The state holds,
    per feature, the running maximum of the log-features and the sums below it (``S`` (m, Dv),
    ``z`` (m), 0 or >= 1). Memory per head O(c^2 + c m + m Dv), as `_kernelized_causal`.
    Shapes: log_q (..., L, m), log_k (..., S, m), v (..., S, Dv) -> (..., L, Dv).
    """
    *batch, L, m = log_q.shape
    top = log_q.new_full((*batch, 1, m), float("-inf"))                   # (..., 1, m) running max
    S, z = log_q.new_zeros(*batch, m, v.shape[-1]), log_q.new_zeros(*batch, m)
    outs = []
    for t in range(0, L, chunk_size):
        lq, lk = log_q[..., t:t + chunk_size, :], log_k[..., t:t + chunk_size, :]  # (..., c, m), (..., c', m)
        vc = v[..., t:t + chunk_size, :]                                    # (..., c', Dv)
        seen = torch.where(z > 0, top.squeeze(-2) + z.clamp_min(1).log(), float("-inf"))  # (..., m)
        means = S / z.clamp_min(1).unsqueeze(-1)                            # (..., m, Dv)
        later = ~torch.ones(lq.shape[-2], lk.shape[-2], dtype=torch.bool, device=lq.device).tril()  # j > i
        within = _log_products(lq, lk).masked_fill(later, float("-inf"))    # (..., c, c')
        weights = _softmax_or_zero(torch.cat([lq + seen.unsqueeze(-2), within], dim=-1))  # (..., c, m + c')
        outs.append(weights[..., :m] @ means + weights[..., m:] @ vc)       # (..., c, Dv)
        if lk.shape[-2]:
            new_top = torch.maximum(top, lk.detach().amax(dim=-2, keepdim=True))  # (..., 1, m)
            shrink, e = torch.exp(top - new_top), torch.exp(lk - new_top)   # <= 1: (..., 1, m), (..., c', m)
            S = S * shrink.transpose(-2, -1) + e.transpose(-2, -1) @ vc     # (..., m, Dv)
            z = z * shrink.squeeze(-2) + e.sum(dim=-2)                      # (..., m)
            top = new_top
    return torch.cat(outs, dim=-2)                                          # (..., L, Dv)


def _log_products(log_a, log_b) -> torch.Tensor:
    """``log sum_m exp(log_a_im + log_b_jm)`` (..., c, c'): a product of features each scaled by
    its row's maximum, or, where a product so scaled falls near underflow (the pair's
    features far apart), the (c, c', m) log-sum-exp itself."""
    top_a = log_a.detach().amax(dim=-1, keepdim=True)                      # (..., c, 1)
    top_b = log_b.detach().amax(dim=-1, keepdim=True)                      # (..., c', 1)
    products = torch.exp(log_a - top_a) @ torch.exp(log_b - top_b).transpose(-2, -1)  # (..., c, c')
    if (products < torch.finfo(products.dtype).tiny ** 0.25).any():         # a pair may have underflowed
        return torch.logsumexp(log_a.unsqueeze(-2) + log_b.unsqueeze(-3), dim=-1)   # (..., c, c')
    return top_a + top_b.transpose(-2, -1) + products.log()


def _softmax_or_zero(logits) -> torch.Tensor:
    """Softmax over the last dim; a row with nothing finite (no key yet) gets zeros, not NaN."""
    some = torch.isfinite(logits).any(dim=-1, keepdim=True)
    return logits.masked_fill(~some, 0.0).softmax(dim=-1).masked_fill(~some, 0.0)


@attention_kernel(causal=True)
def performer_attention(q, k, v, *, num_features: int, mask=None, is_causal=False, generator=None,
                        scale=None, chunk_size: int = 64):
    """Performer attention (FAVOR+, Choromanski et al. 2021): softmax attention estimated with
    positive orthogonal random features, in linear time.

    Math: ``exp(q.k * scale) ~= phi(q').phi(k')`` with ``x' = x sqrt(scale)`` (scale 1/sqrt(D):
    x D^-1/4) and ``phi`` = `favor_features` over `orthogonal_random_features`; then as
    `linear_attention`, ``phi(q) sum_j phi(k_j) v_j^T / phi(q) sum_j phi(k_j)``, causal
    (top-left aligned) by chunked prefix sums. Computed from the features' logarithms with
    every exponential normalised (two softmaxes, over the keys per feature and over the
    features per query; `_favor`), so that features of any magnitude neither overflow nor
    underflow: the ratio is exact, however far apart the exponents.
    Cost: time O((L + S) m D + (L + S) m Dv), plus O(L c m) causal; memory O((L + S) m + m Dv),
    never O(L S); m = num_features.
    Shapes: q (..., L, D), k (..., S, D), v (..., S, Dv) -> (..., L, Dv).
    ``generator``: None draws fresh features from the global RNG on every call; a
    ``torch.Generator`` continues its stream; an int seed gives the same features every call.
    No ``mask``: the (L, S) scores are never formed.
    Precision: half-precision inputs are computed in float32 (`working_dtype`): the log
    features hold ``|x|^2 / 2``, beyond float16's range for large inputs, and the stabilised
    exponentials span more than half precision resolves; the output is rounded to the
    input dtype.
    """
    check_attention_inputs(q, k, v, scale=scale, is_causal=is_causal)
    check_no_mask("performer_attention", mask, _NO_MASK)
    chunk_size = check_positive_int("chunk_size", chunk_size)
    if 0 in (q.shape[-2], k.shape[-2]):                                     # no query or no key
        return v.new_zeros(*q.shape[:-1], v.shape[-1])                      # (..., L, Dv), as SDPA
    D, work = q.shape[-1], working_dtype(q.dtype)
    root = (D ** -0.5 if scale is None else scale) ** 0.5                   # half the scale on q, half on k
    w = orthogonal_random_features(num_features, D, generator=generator, dtype=work, device=q.device)
    log_q = _favor_log(q.to(work) * root, w)                               # (..., L, m)
    log_k = _favor_log(k.to(work) * root, w)                               # (..., S, m)
    if is_causal:
        return _favor_causal(log_q, log_k, v.to(work), chunk_size=chunk_size).to(q.dtype)
    return _favor(log_q, log_k, v.to(work)).to(q.dtype)
