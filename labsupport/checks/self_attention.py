"""Self-checks for the exercises of 12.1 Self-Attention."""
from __future__ import annotations

import torch

from . import reference
from .core import Hint, check, close, expect_number, expect_tensor


def _qk(L=5, S=7, D=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 3, L, D, generator=g, dtype=torch.float64)
    k = torch.randn(2, 3, S, D, generator=g, dtype=torch.float64)
    return q, k


def _weights(q, k, scale):
    return (q @ k.transpose(-2, -1) * scale).softmax(dim=-1)


@check("12.1 exercise 1: attention weights")
def attention_weights(fn):
    for L, S in ((5, 7), (1, 4)):
        q, k = _qk(L, S)
        d = q.shape[-1]
        w = fn(q, k)
        if isinstance(w, torch.Tensor) and tuple(w.shape) == (2, 3, S, L) and L != S:
            raise Hint(f"got shape (..., S, L) = {tuple(w.shape)}: rows are queries, so the scores "
                       "are q @ k.transpose(-2, -1), shape (..., L, S)")
        expect_tensor(w, (2, 3, L, S), "attention_weights(q, k)")
        if close(w, reference.attention_weights(q, k)):
            continue
        if not torch.allclose(w.double().sum(-1), torch.ones(2, 3, L, dtype=torch.float64), atol=1e-6):
            raise Hint("the rows do not sum to one: softmax over the key axis (dim=-1)?")
        for scale, hint in ((1.0, "scale the scores by 1 / sqrt(d) before the softmax"),
                            (1.0 / d, "divide the scores by sqrt(d), not by d"),
                            (d ** 0.5, "divide the scores by sqrt(d); you multiplied")):
            if close(w, _weights(q, k, scale)):
                raise Hint(hint)
        raise Hint("rows sum to one, but the weights differ from softmax(q k^T / sqrt(d)): "
                   "check the scores q @ k.transpose(-2, -1)")
    return "weights equal softmax(q k^T / sqrt(d)) over the keys, for L != S and L = 1"


@check("12.1 exercise 2: causal attention")
def causal_attention(fn):
    L, D = 6, 8
    q, k = _qk(L, L, D, seed=1)
    eye = torch.eye(L, dtype=torch.float64).repeat(2, 3, 1, 1)       # v = I: the output IS the weights
    w = expect_tensor(fn(q, k, eye), (2, 3, L, L), "causal_attention(q, k, v) with v (2, 3, 6, 6)",
                      finite=False).double()
    if not torch.isfinite(w).all():
        raise Hint("the output holds NaN: a query with every key masked (position 0 has only itself: "
                   "keep the diagonal, tril rather than tril(diagonal=-1))")
    upper = torch.ones(L, L, dtype=torch.bool).triu(1)
    if w[..., upper].abs().max() > 1e-9:
        if w[..., ~upper].abs().max() < 1e-9 or w[..., upper.T].abs().max() < 1e-9:
            raise Hint("the mask is flipped: query i may see keys j <= i (lower triangle), never j > i")
        raise Hint("weights above the diagonal are not zero: position i is seeing the future j > i")
    if w.diagonal(dim1=-2, dim2=-1).abs().min() < 1e-9:
        raise Hint("a position may attend to itself: keep the diagonal (tril, not tril(diagonal=-1))")
    if not torch.allclose(w.sum(-1), torch.ones(2, 3, L, dtype=torch.float64), atol=1e-6):
        raise Hint("rows do not sum to one: set masked scores to -inf before the softmax, "
                   "rather than zeroing weights after it")
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    scores = (q @ k.transpose(-2, -1)).masked_fill(~causal, float("-inf"))
    if close(w, (scores / D ** 0.5).softmax(-1)):
        g = torch.Generator().manual_seed(2)
        v = torch.randn(2, 3, L, 4, generator=g, dtype=torch.float64)
        if not close(fn(q, k, v), (scores / D ** 0.5).softmax(-1) @ v):
            raise Hint("the weights are right but the output is not weights @ v")
        return "no weight on the future, rows sum to one, and the output equals the masked softmax times v"
    if close(w, scores.softmax(-1)):
        raise Hint("the mask is right; now scale the scores by 1 / sqrt(d)")
    raise Hint("the causal pattern is right but the weights differ from softmax(q k^T / sqrt(d))")


@check("12.1 exercise 3: the size of the score matrix")
def score_matrix_bytes(fn):
    cases = ((1, 1, 1024, torch.float32), (8, 4, 512, torch.float16), (2, 8, 2048, torch.float64))
    for batch, heads, length, dtype in cases:
        right = reference.score_matrix_bytes(batch, heads, length, dtype)
        got = expect_number(fn(batch, heads, length, dtype), "a number of bytes")
        if got == right:
            continue
        call = f"score_matrix_bytes({batch}, {heads}, {length}, {dtype})"
        if got == right // (batch * heads) and batch * heads > 1:
            raise Hint(f"{call}: one L x L matrix per batch element and per head: multiply by batch * heads")
        if got == right // length:
            raise Hint(f"{call}: the score matrix has L * L entries, not L")
        if got == right * 8:
            raise Hint(f"{call}: that is bits; count bytes (element_size())")
        if got == batch * heads * length * length * 4:
            raise Hint(f"{call}: the element size depends on the dtype (float16: 2 bytes, float64: 8)")
        raise Hint(f"{call} returned {got}, expected {right}")
    return "batch * heads * L * L * element size, for float16, float32 and float64"


@check("12.1 exercise 4: splitting heads")
def split_heads(fn):
    B, L, H, hd = 2, 5, 3, 4
    x = torch.arange(B * L * H * hd, dtype=torch.float32).view(B, L, H * hd)
    out = expect_tensor(fn(x, H), (B, H, L, hd), "split_heads(x (2, 5, 12), n_heads=3)")
    right = x.view(B, L, H, hd).transpose(1, 2)
    if torch.equal(out, right):
        return "(B, L, H * hd) -> (B, H, L, hd), each head reading its own slice of every position"
    if torch.equal(out, x.view(B, H, L, hd)):
        raise Hint("reshaping straight to (B, H, L, hd) mixes positions into heads: "
                   "view as (B, L, H, hd), then transpose(1, 2)")
    raise Hint("head h at position t should hold x[b, t, h*hd:(h+1)*hd]")


PEAK_SIZES = dict(batch=2, heads=4, length=1024, head_dim=64)     # exercise 12.1.5
PEAK_TOLERANCE = 0.05


def measured_naive_peak(batch, heads, length, head_dim):
    """The measured forward peak of `naive_attention` (float32, no mask), on the CPU; None
    where the platform cannot measure it."""
    from ..attention import naive_attention
    from ..timing import attention_inputs, peak_memory

    q, k, v = attention_inputs(length, batch=batch, heads=heads, head_dim=head_dim)
    with torch.no_grad():
        return peak_memory(naive_attention, q, k, v)


@check("12.1 exercise 5: predict the peak, then measure it")
def predicted_peak(fn):
    B, H, L, d = PEAK_SIZES.values()
    guess = expect_number(fn(), "a number of bytes")
    measured = measured_naive_peak(B, H, L, d)
    if measured is None:
        measured = (2 * B * H * L * L + B * H * L * d) * 4
        where = "the byte model (this platform cannot measure the peak)"
    else:
        where = "the measured peak"
    ratio = guess / measured
    if abs(ratio - 1) <= PEAK_TOLERANCE:
        return (f"your prediction is within {PEAK_TOLERANCE:.0%} of {where}: the scores and their "
                "softmax, two (B, H, L, L) float32 matrices, are alive together, then the output")
    one_matrix = B * H * L * L * 4
    if abs(guess / one_matrix - 1) <= PEAK_TOLERANCE:
        raise Hint("that is one (B, H, L, L) float32 matrix; naive attention holds two at once: the "
                   "scores are still alive while softmax writes the weights")
    if abs(guess / (2 * L * L * 4) - 1) <= PEAK_TOLERANCE:
        raise Hint("two L x L matrices, but for one sequence and one head: every batch element and "
                   "every head has its own scores")
    if abs(guess / (measured / 4) - 1) <= PEAK_TOLERANCE * 4 or abs(guess / (measured * 4) - 1) <= 0.2:
        raise Hint("off by a factor of about 4: count bytes, and float32 takes 4 bytes per number")
    raise Hint(f"your prediction is {ratio:.2f} times {where}; count the (B, H, L, L) matrices "
               "that are alive at the same time, in bytes")
