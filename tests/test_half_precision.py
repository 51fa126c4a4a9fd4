"""Every kernel in float16 and bfloat16 on large logits: where SDPA (its CPU math backend,
which computes in float32) is finite, the kernel is finite and as close to a float64
reference as its dtype allows.

The inputs are scaled so that the largest |q . k| / sqrt(D) reaches 1e2, 1e3 or 1e4
(D = 64): float16 cannot hold the unscaled product q . k of the largest (up to 8e4 >
65504), so a kernel that scales after a half-precision product overflows to inf and NaN.
References: exact kernels against float64 softmax attention (`helpers.reference`, an
einsum formula) under their masks; approximations against themselves run on the same
inputs in float64.
"""
from functools import partial

import pytest
import torch

from helpers import reference, seeded, tol
from labsupport.attention import (
    LinformerAttention,
    band_mask,
    causal_mask,
    flash_attention,
    linear_attention,
    linear_attention_recurrent,
    local_attention,
    longformer_attention,
    longformer_mask,
    naive_attention,
    performer_attention,
    sdpa,
)

D, L = 64, 48
LOGITS = [1e2, 1e3, 1e4]
HALF = [torch.float16, torch.bfloat16]


def large_logits(logit: float, dtype, seed: int = 0):
    """q, k (1, 2, L, D) scaled so that max |q . k| / sqrt(D) = ``logit``, v ~ N(0, 1), drawn in
    float64 and rounded to ``dtype``."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 2, L, D, generator=g, dtype=torch.float64) for _ in range(3))
    largest = (q @ k.transpose(-2, -1) / D ** 0.5).abs().max()
    root = (logit / largest) ** 0.5
    return tuple(t.to(dtype) for t in (q * root, k * root, v))


def sdpa_math_is_finite(q, k, v, causal) -> bool:
    return bool(torch.isfinite(sdpa(q, k, v, is_causal=causal, backend="math")).all())


EXACT = {   # name: (kernel, the mask it computes softmax attention under, for L == S)
    "sdpa": (sdpa, lambda causal: causal_mask(L) if causal else None),
    "flash": (partial(flash_attention, block_size=16), lambda causal: causal_mask(L) if causal else None),
    "local": (partial(local_attention, window=5), lambda causal: band_mask(L, 5, is_causal=causal)),
    "longformer": (partial(longformer_attention, window=5, global_tokens=[0, 20]),
                   lambda causal: longformer_mask(L, 5, [0, 20], is_causal=causal)),
}


@pytest.mark.parametrize("name", EXACT)
@pytest.mark.parametrize("logit", LOGITS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_exact_kernels_in_half_precision_match_float64_softmax_attention(name, logit, dtype, causal):
    q, k, v = large_logits(logit, dtype)
    assert sdpa_math_is_finite(q, k, v, causal)
    kernel, allowed = EXACT[name]
    out = kernel(q, k, v, is_causal=causal)
    assert out.dtype == dtype and torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), reference(q, k, v, allowed(causal)), **tol(dtype))


def rounded_scores_reference(q, k, v, causal):
    """float64 softmax attention on the scores rounded to q's dtype: what a kernel that holds
    its (L, S) scores in that dtype can reach at best."""
    scores = (q.double() * D ** -0.5) @ k.double().transpose(-2, -1)          # (..., L, S)
    scores = scores.to(q.dtype).double()
    if causal:
        scores = scores.masked_fill(~causal_mask(L), float("-inf"))
    return scores.softmax(-1) @ v.double()


@pytest.mark.parametrize("logit", LOGITS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_naive_attention_in_half_precision_is_finite_and_as_close_as_its_rounded_scores(logit, dtype, causal):
    """The textbook kernel holds its scores in the input dtype (its memory, 2 L S numbers of
    that dtype, is what the book measures): finite wherever SDPA is, and no further from
    float64 attention than rounding its scores to the dtype takes it (to a factor of 4)."""
    q, k, v = large_logits(logit, dtype)
    assert sdpa_math_is_finite(q, k, v, causal)
    out = naive_attention(q, k, v, is_causal=causal)
    assert out.dtype == dtype and torch.isfinite(out).all()
    exact = reference(q, k, v, causal_mask(L) if causal else None)
    rounding = (rounded_scores_reference(q, k, v, causal) - exact).abs().max().item()
    error = (out.double() - exact).abs().max().item()
    assert error <= 4 * rounding + tol(dtype)["atol"] + tol(dtype)["rtol"] * exact.abs().max().item(), \
        (error, rounding)


APPROXIMATE = {   # name: (kernel, whether it takes is_causal)
    "linear": (linear_attention, True),
    "linear in chunks of 8": (partial(linear_attention, chunk_size=8), True),
    "performer": (partial(performer_attention, num_features=64, generator=0), True),
    "linformer": (seeded(lambda: LinformerAttention(L, 16)), False),
}
APPROXIMATE_CASES = [(name, causal) for name, (_, takes_causal) in APPROXIMATE.items()
                     for causal in ((False, True) if takes_causal else (False,))]


@pytest.mark.parametrize("name, causal", APPROXIMATE_CASES)
@pytest.mark.parametrize("logit", LOGITS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_approximations_in_half_precision_match_themselves_in_float64(name, causal, logit, dtype):
    kernel, _ = APPROXIMATE[name]
    q, k, v = large_logits(logit, dtype)
    assert sdpa_math_is_finite(q, k, v, causal)
    with torch.no_grad():
        out = kernel(q, k, v, is_causal=causal)
        expected = kernel(q.double(), k.double(), v.double(), is_causal=causal)
    assert out.dtype == dtype and torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), expected, **tol(dtype))


@pytest.mark.parametrize("logit", LOGITS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_the_recurrent_form_in_half_precision_matches_causal_linear_attention_in_float64(logit, dtype):
    q, k, v = large_logits(logit, dtype)
    out, state = linear_attention_recurrent(q, k, v, return_state=True)
    assert out.dtype == dtype and torch.isfinite(out).all()
    assert torch.isfinite(state.S).all() and torch.isfinite(state.z).all()
    expected = linear_attention(q.double(), k.double(), v.double(), is_causal=True)
    torch.testing.assert_close(out.double(), expected, **tol(dtype))


@pytest.mark.parametrize("logit", LOGITS)
@pytest.mark.parametrize("causal", [False, True])
def test_performer_in_float32_on_large_logits_matches_itself_in_float64(logit, causal):
    """The features' exponents span far more than float32's range (e^+-88): computed from
    their logarithms, every exponential normalised, the estimator is the same in both, to
    what float32 resolves of exponents of that size (eps 6e-8 times the logit, a few times)."""
    q, k, v = large_logits(logit, torch.float32)
    kernel = partial(performer_attention, num_features=64, generator=0, is_causal=causal, chunk_size=16)
    out = kernel(q, k, v)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), kernel(q.double(), k.double(), v.double()),
                               atol=1e-6 * logit, rtol=1e-6 * logit)


GRADIENTS = {
    "naive": naive_attention, "flash": partial(flash_attention, block_size=16),
    "local": partial(local_attention, window=5), "longformer": partial(longformer_attention, window=5,
                                                                       global_tokens=[0]),
    "linear": linear_attention, "performer": partial(performer_attention, num_features=32, generator=0),
}


@pytest.mark.parametrize("name", GRADIENTS)
@pytest.mark.parametrize("dtype", [torch.float32, *HALF], ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_on_large_logits_are_finite(name, dtype, causal):
    q, k, v = (t.requires_grad_() for t in large_logits(1e3, dtype))
    GRADIENTS[name](q, k, v, is_causal=causal).float().pow(2).mean().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))
