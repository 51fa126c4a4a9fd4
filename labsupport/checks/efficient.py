"""Self-checks for the exercises of 12.5 Efficient and Sparse Attention."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..attention import linear_attention, local_attention, naive_attention, performer_attention
from ..timing import LargestTensor, fit_power_law
from .core import Hint, check, close, expect_number, expect_tensor


def _features(x, w, *, norm=True, sqrt_m=True):
    """Positive random features, right and typically wrong, in float64."""
    log = x @ w.T - (x.pow(2).sum(-1, keepdim=True) / 2 if norm else 0.0)
    return torch.exp(log) / (math.sqrt(w.shape[0]) if sqrt_m else 1.0)


@check("12.5 exercise 1: positive random features")
def positive_features(fn):
    g = torch.Generator().manual_seed(0)
    x = 0.3 * torch.randn(5, 4, generator=g, dtype=torch.float64)         # (N, D)
    w = torch.randn(7, 4, generator=g, dtype=torch.float64)               # (m, D)
    got = expect_tensor(fn(x, w), (5, 7), "positive_features(x (5, 4), w (7, 4))")
    if not close(got, _features(x, w)):
        if close(got, _features(x, w, sqrt_m=False)):
            raise Hint("divide by sqrt(m): then phi(x) . phi(y) is the average of the m "
                       "features' products, not their sum")
        if close(got, _features(x, w, norm=False)) or close(got, _features(x, w, norm=False,
                                                                          sqrt_m=False)):
            raise Hint("subtract |x|^2 / 2 in the exponent: E[exp(w.x) exp(w.y)] is "
                       "exp(|x + y|^2 / 2), and the two corrections turn it into exp(x . y)")
        if bool((got <= 0).any()):
            raise Hint("the features must be positive (exponentials): sin/cos features can make "
                       "the attention normaliser negative")
        raise Hint("phi(x) = exp(w x - |x|^2 / 2) / sqrt(m), one column per row of w")
    # the property the formula is for: an unbiased estimate of the softmax kernel
    w_big = torch.randn(20000, 4, generator=g, dtype=torch.float64)
    phi = fn(x, w_big)
    estimate = phi @ phi.T                                                  # (N, N)
    if not torch.allclose(estimate.double(), torch.exp(x @ x.T), rtol=0.05):
        raise Hint("with 20,000 Gaussian features, phi(x) . phi(y) should be within 5% of "
                   "exp(x . y); check the formula")
    return ("phi(x) = exp(w x - |x|^2 / 2) / sqrt(m); with 20,000 features phi(x) . phi(y) "
            "is within 5% of exp(x . y)")


def _blocks_wrong(q, k, v, block, *, previous=True, band=True):
    """Causal attention within each block and (optionally) the block before it, with or
    without the band limit i - block <= j: the typical wrong versions, via masks."""
    L = q.shape[-2]
    i = torch.arange(L)
    lag = i[:, None] - i[None, :]                                          # (L, L): i - j
    same = (i[:, None] // block) - (i[None, :] // block)                    # block distance
    allowed = (lag >= 0) & (same <= (1 if previous else 0))
    if band:
        allowed &= lag <= block
    return naive_attention(q, k, v, mask=allowed)


@check("12.5 exercise 2: local attention through SDPA, block by block")
def blocked_local_attention(fn):
    g = torch.Generator().manual_seed(0)
    B, H, L, D, block = 2, 3, 64, 8, 8
    q, k, v = (torch.randn(B, H, L, D, generator=g) for _ in range(3))
    right = local_attention(q, k, v, window=block, is_causal=True)
    probe = LargestTensor()
    got = fn(q, k, v, block, within=probe)                                # the copies are not counted
    got = expect_tensor(got, (B, H, L, D), f"blocked_local_attention(q (2, 3, {L}, 8), ..., "
                        f"block={block})")
    if not close(got, right, tol=1e-5):
        if close(got, naive_attention(q, k, v, is_causal=True), tol=1e-5):
            raise Hint("this is full causal attention: each query may see only the `block` "
                       "keys before it and itself")
        if close(got, _blocks_wrong(q, k, v, block, previous=False, band=False), tol=1e-5):
            raise Hint("each block must also see the block before it: the first query of a "
                       "block needs the `block` keys that precede it")
        if close(got, _blocks_wrong(q, k, v, block, band=False), tol=1e-5):
            raise Hint("mask the band inside the two blocks: query i sees keys i - block .. i, "
                       "not the whole previous block")
        later = v.clone()
        later[..., 37:, :] += 1.0
        if not close(fn(q, k, later, block)[..., :37, :], got[..., :37, :], tol=1e-5):
            raise Hint("outputs before position 37 changed when values after it changed: the "
                       "mask must also hide keys j > i (the future)")
        raise Hint("query i should attend to keys i - block .. i (softmax over those only)")
    if probe.numel >= B * H * L * L // 2:
        raise Hint(f"the values are right, but a tensor of {probe.numel} elements was built, "
                   f"as big as the full (L, L) scores ({B * H * L * L}): cut q into blocks and "
                   "give each block only its two key blocks")
    return (f"equal to local_attention(window={block}, is_causal=True); the largest tensor "
            f"had {probe.numel} elements, against {B * H * L * L} for the full scores")


def _decayed(q, k, v, gamma, *, phi=True, decay_z=True, include_now=True):
    """Decayed causal linear attention by its explicit weights, right and typically wrong."""
    fq, fk = (F.elu(q) + 1, F.elu(k) + 1) if phi else (q, k)
    L = q.shape[-2]
    i = torch.arange(L, dtype=q.dtype)
    lag = i[:, None] - i[None, :]                                          # (L, L): i - j
    visible = (lag >= 0) if include_now else (lag >= 1)
    decay = torch.where(visible, gamma ** lag.clamp_min(0), torch.zeros(()))
    scores = (fq @ fk.T) * decay                                           # (L, L)
    num = scores @ v
    den = (fq @ fk.T) * (decay if decay_z else visible.to(q.dtype))
    return num / den.sum(-1, keepdim=True)


@check("12.5 exercise 3: linear attention with a decay, as a recurrence")
def decayed_linear_attention(fn):
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(12, 4, generator=g, dtype=torch.float64) for _ in range(2))
    v = torch.randn(12, 3, generator=g, dtype=torch.float64)
    got = expect_tensor(fn(q, k, v, 1.0), (12, 3), "decayed_linear_attention(q (12, 4), "
                        "k (12, 4), v (12, 3), gamma=1.0)")
    if not close(got, linear_attention(q[None], k[None], v[None], is_causal=True)[0]):
        if close(got, _decayed(q, k, v, 1.0, phi=False)):
            raise Hint("apply the feature map phi(x) = elu(x) + 1 to queries and keys first; "
                       "raw dot products can be negative")
        if close(got[1:], _decayed(q, k, v, 1.0, include_now=False)[1:]):
            raise Hint("add token t to the state before reading it: position t attends to "
                       "itself as well as to the past")
        raise Hint("with gamma = 1 the result should equal causal linear_attention: "
                   "S_t = S_{t-1} + phi(k_t) v_t^T, z_t = z_{t-1} + phi(k_t), "
                   "out_t = phi(q_t)^T S_t / phi(q_t)^T z_t")
    got = expect_tensor(fn(q, k, v, 0.8), (12, 3), "decayed_linear_attention(..., gamma=0.8)")
    if not close(got, _decayed(q, k, v, 0.8)):
        if close(got, _decayed(q, k, v, 0.8, decay_z=False)):
            raise Hint("decay the normaliser z as well as S: otherwise the weights no longer "
                       "sum to one")
        if close(got, _decayed(q, k, v, 1.0)):
            raise Hint("gamma changed nothing: multiply the old state by gamma at every step, "
                       "S_t = gamma S_{t-1} + phi(k_t) v_t^T, not the new token's term")
        raise Hint("S_t = gamma S_{t-1} + phi(k_t) v_t^T and z_t = gamma z_{t-1} + phi(k_t): "
                   "key j's weight is scaled by gamma^(t - j)")
    return ("gamma = 1 gives causal linear attention; gamma = 0.8 weights key j by "
            "0.8^(t - j): a linear state-space recurrence with A = gamma I")


FEATURE_COUNTS = (16, 64, 256, 1024)     # exercise 12.5.4: m, four times apart
EXPONENT_TOLERANCE = 0.1
SMALL_SCALE, LARGE_SCALE = 0.25, 1.0     # queries and keys drawn as scale * N(0, I)


def performer_error(scale: float, *, features=FEATURE_COUNTS, length: int = 64,
                    head_dim: int = 16, draws: int = 16) -> list[float]:
    """The share of attention `performer_attention` misplaces (total-variation distance of
    its implied rows from exact attention's, averaged over the rows) for each number of
    random features m, averaged over ``draws`` fixed feature draws; on fixed seeded queries
    and keys ``scale * N(0, I)`` of shape (length, head_dim), in float64. Deterministic."""
    g = torch.Generator().manual_seed(0)
    q, k = (scale * torch.randn(1, 1, length, head_dim, generator=g, dtype=torch.float64)
            for _ in range(2))
    eye = torch.eye(length, dtype=torch.float64)[None, None]           # V = I: the weights
    exact = naive_attention(q, k, eye)[0, 0]                           # (L, L)
    errors = []
    for m in features:
        misplaced = [0.5 * (performer_attention(q, k, eye, num_features=m, generator=1000 + d)[0, 0]
                            - exact).abs().sum(-1).mean().item() for d in range(draws)]
        errors.append(sum(misplaced) / draws)
    return errors


def measured_error_exponent(scale: float) -> float:
    """The fitted p of error ~ m^p over `FEATURE_COUNTS` (`performer_error`)."""
    return fit_power_law(FEATURE_COUNTS, performer_error(scale))[0]


@check("12.5 exercise 4: predict how fast the Performer's error falls")
def performer_error_exponent(fn):
    guess = expect_number(fn(), "an exponent p, for an error that falls as m^p")
    small = measured_error_exponent(SMALL_SCALE)
    if abs(guess - small) <= EXPONENT_TOLERANCE:
        large = measured_error_exponent(LARGE_SCALE)
        return (f"your exponent {guess:+.2f} is within {EXPONENT_TOLERANCE} of the measured "
                f"{small:+.2f} on small queries and keys (0.25 N(0, I), m = 16 to 1024); at "
                f"four times their size the same fit gives {large:+.2f}: the Monte Carlo rule "
                "needs estimates whose relative variance is small")
    if abs(guess) <= EXPONENT_TOLERANCE:
        raise Hint("on small inputs the error does fall with m: each feature is an independent, "
                   "unbiased estimate of exp(q . k), and m of them are averaged")
    if guess > 0:
        raise Hint("more features must give a smaller error: the exponent is negative")
    if abs(guess + 1) <= EXPONENT_TOLERANCE:
        raise Hint("1/m is how the variance of an average of m independent estimates falls; the "
                   "error is of the size of a standard deviation, its square root")
    raise Hint(f"your exponent {guess:+.2f} is more than {EXPONENT_TOLERANCE} from the measured "
               f"{small:+.2f}: how does the spread of an average of m independent estimates "
               "shrink with m?")
