"""Kernelized attention (12.5): softmax's ``exp(q.k)`` replaced by ``phi(q).phi(k)`` so that
the product can be reordered and the (L, S) scores are never formed. Linear attention
(elu + 1 features, with its step-by-step RNN form) and Performer (FAVOR+ positive
orthogonal random features).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..validation import (
    check_attention_inputs,
    check_no_mask,
    check_positive_int,
    check_self_attention,
    check_shape,
)
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


def _kernelized_causal(phi_q, phi_k, v, *, chunk_size: int, log_keys: bool = False) -> torch.Tensor:
    """Causal kernelized attention by chunked prefix sums (linear and Performer attention).

    Within a chunk, the masked (c, c) product ``tril(phi(Q_c) phi(K_c)^T)``; across chunks,
    the running state ``S = sum_j phi(k_j) v_j^T`` (m, Dv) and ``z = sum_j phi(k_j)`` (m, 1).
    Memory per head O(c^2 + c m + m Dv) without autograd (with it, one state per chunk).
    ``log_keys``: phi_k holds log-features, exponentiated chunk by chunk against the running
    maximum so far (the state is rescaled when it grows): stable, it cancels in the ratio,
    and no later chunk can underflow an earlier one. Queries and keys align at the top left.
    Shapes: phi_q (..., L, m), phi_k (..., S, m), v (..., S, Dv) -> (..., L, Dv).
    """
    *batch, L, m = phi_q.shape
    S, z, top = phi_q.new_zeros(*batch, m, v.shape[-1]), phi_q.new_zeros(*batch, m, 1), None
    outs = []
    for t in range(0, L, chunk_size):
        qc = phi_q[..., t:t + chunk_size, :]                                # (..., c, m)
        kc, vc = phi_k[..., t:t + chunk_size, :], v[..., t:t + chunk_size, :]  # (..., c', m), (..., c', Dv)
        if log_keys and kc.shape[-2]:
            kc, S, z, top = _exp_running_max(kc, S, z, top)
        scores = (qc @ kc.transpose(-2, -1)).tril()                         # (..., c, c'): j <= i
        num = qc @ S + scores @ vc                                          # (..., c, Dv)
        den = qc @ z + scores.sum(dim=-1, keepdim=True)                     # (..., c, 1)
        outs.append(num / _nonzero(den))
        S = S + kc.transpose(-2, -1) @ vc                                   # (..., m, Dv)
        z = z + kc.sum(dim=-2).unsqueeze(-1)                                # (..., m, 1)
    if not outs:                                                            # L = 0
        return v.new_zeros(*batch, 0, v.shape[-1])
    return torch.cat(outs, dim=-2)                                          # (..., L, Dv)


def _exp_running_max(log_kc, S, z, top):
    """``exp(log_kc - M)``, M the running max of the log-features so far (detached, it cancels);
    (S, z) rescaled from the old M to the new one."""
    new = log_kc.detach().amax(dim=(-2, -1), keepdim=True)                 # (..., 1, 1)
    if top is not None:
        new = torch.maximum(new, top)
        shrink = torch.exp(top - new)                                       # <= 1
        S, z = S * shrink, z * shrink
    return torch.exp(log_kc - new), S, z, new


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
    """
    check_attention_inputs(q, k, v, scale=scale)
    check_no_mask("linear_attention", mask, _NO_MASK)
    check_positive_int("chunk_size", chunk_size)
    phi_q, phi_k = _elu_features(q, k, scale)                              # (..., L, D), (..., S, D)
    if is_causal:
        return _kernelized_causal(phi_q, phi_k, v, chunk_size=chunk_size)
    return _kernelized(phi_q, phi_k, v)


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
    ``state`` to continue the stream.

    >>> q = k = v = torch.randn(1, 1, 6, 4)
    >>> out, st = linear_attention_recurrent(q[..., :3, :], k[..., :3, :], v[..., :3, :], return_state=True)
    >>> rest = linear_attention_recurrent(q[..., 3:, :], k[..., 3:, :], v[..., 3:, :], state=st)
    >>> torch.allclose(torch.cat([out, rest], -2), linear_attention(q, k, v, is_causal=True), atol=1e-6)
    True
    """
    check_attention_inputs(q, k, v, scale=scale)
    check_self_attention("linear_attention_recurrent", q, k, v)
    *batch, L, D = q.shape
    if state is None:
        state = LinearAttentionState(q.new_zeros(*batch, D, v.shape[-1]), q.new_zeros(*batch, D))
    check_shape("state.S", state.S, (*batch, D, v.shape[-1]), "(..., D, Dv)")
    check_shape("state.z", state.z, (*batch, D), "(..., D)")
    phi_q, phi_k = _elu_features(q, k, scale)                              # (..., L, D) each
    S, z = state
    outs = []
    for t in range(L):
        S = S + phi_k[..., t, :, None] * v[..., t, None, :]                 # (..., D, Dv)
        z = z + phi_k[..., t, :]                                            # (..., D)
        num = (phi_q[..., t, :, None] * S).sum(dim=-2)                      # (..., Dv)
        den = (phi_q[..., t, :] * z).sum(dim=-1, keepdim=True)              # (..., 1)
        outs.append(num / _nonzero(den))
    out = torch.stack(outs, dim=-2) if outs else v.new_zeros(*batch, 0, v.shape[-1])  # (..., L, Dv)
    return (out, LinearAttentionState(S, z)) if return_state else out


def _as_generator(generator):
    """None (the global RNG), a torch.Generator, or an int seed for a fresh CPU generator."""
    if generator is None or isinstance(generator, torch.Generator):
        return generator
    if isinstance(generator, int) and not isinstance(generator, bool):
        return torch.Generator().manual_seed(generator)
    raise TypeError("generator must be None, a torch.Generator or an int seed, "
                    f"got {type(generator).__name__}")


def orthogonal_random_features(num_features: int, dim: int, *, generator=None, dtype=None,
                               device=None) -> torch.Tensor:
    """FAVOR+ projections ``W (num_features, dim)``: blocks of ``dim`` orthogonal rows (QR of
    a Gaussian matrix), each row's norm redrawn from chi(dim) so that rows are marginally
    ``N(0, I)``, as in Choromanski et al. (2021). Drawn in float64 on the generator's device.
    ``generator``: None (global RNG), a ``torch.Generator`` or an int seed.
    """
    check_positive_int("num_features", num_features)
    check_positive_int("dim", dim)
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
    analysis; `performer_attention` subtracts maxima). Shapes: x (..., L, D), w (m, D) -> (..., L, m)."""
    return torch.exp(_favor_log(x, w))


@attention_kernel(causal=True)
def performer_attention(q, k, v, *, num_features: int, mask=None, is_causal=False, generator=None,
                        scale=None, chunk_size: int = 64):
    """Performer attention (FAVOR+, Choromanski et al. 2021): softmax attention estimated with
    positive orthogonal random features, in linear time.

    Math: ``exp(q.k * scale) ~= phi(q').phi(k')`` with ``x' = x sqrt(scale)`` (scale 1/sqrt(D):
    x D^-1/4) and ``phi`` = `favor_features` over `orthogonal_random_features`; then as
    `linear_attention`, causal (top-left aligned) by the same chunked prefix sums. Maxima are
    subtracted in the exponents for stability (per query, and a running one over the keys):
    they cancel.
    Cost: time O((L + S) m D + (L + S) m Dv), plus O(L c m) causal; memory O((L + S) m + m Dv),
    never O(L S); m = num_features.
    Shapes: q (..., L, D), k (..., S, D), v (..., S, Dv) -> (..., L, Dv).
    ``generator``: None draws fresh features from the global RNG on every call; a
    ``torch.Generator`` continues its stream; an int seed gives the same features every call.
    No ``mask``: the (L, S) scores are never formed.
    """
    check_attention_inputs(q, k, v, scale=scale)
    check_no_mask("performer_attention", mask, _NO_MASK)
    check_positive_int("chunk_size", chunk_size)
    if 0 in (q.shape[-2], k.shape[-2]):                                     # no query or no key
        return v.new_zeros(*q.shape[:-1], v.shape[-1])                      # (..., L, Dv), as SDPA
    D = q.shape[-1]
    root = (D ** -0.5 if scale is None else scale) ** 0.5                   # half the scale on q, half on k
    w = orthogonal_random_features(num_features, D, generator=generator, dtype=q.dtype, device=q.device)
    log_q, log_k = _favor_log(q * root, w), _favor_log(k * root, w)        # (..., L, m), (..., S, m)
    phi_q = torch.exp(log_q - log_q.detach().amax(dim=-1, keepdim=True))   # per-query constant: cancels
    if is_causal:
        return _kernelized_causal(phi_q, log_k, v, chunk_size=chunk_size, log_keys=True)
    phi_k = torch.exp(log_k - log_k.detach().amax(dim=(-2, -1), keepdim=True))  # one per head: cancels
    return _kernelized(phi_q, phi_k, v)
