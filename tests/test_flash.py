"""flash_attention (12.4): exact against the float64 reference, tiles and all."""
import pytest
import torch

from helpers import qkv, reference, tol
from labsupport.attention import causal_mask, flash_attention, naive_attention
from labsupport.timing import cpu_peak_supported, fit_power_law, peak_memory

CASES = [  # (L, S, block_size): multiples, remainders, L = 1, block > L, L != S
    (16, 16, 4), (7, 7, 3), (5, 11, 4), (11, 5, 4), (1, 1, 8), (1, 9, 2), (9, 1, 2),
    (33, 20, 8), (20, 33, 64), (64, 64, 128),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("L,S,block", CASES)
@pytest.mark.parametrize("causal", [False, True])
def test_flash_matches_reference(dtype, L, S, block, causal):
    q, k, v = qkv(L, S, dtype=dtype)
    out = flash_attention(q, k, v, is_causal=causal, block_size=block)
    allowed = causal_mask(L, S) if causal else None
    assert out.shape == (2, 3, L, 6) and out.dtype == dtype
    torch.testing.assert_close(out.double(), reference(q, k, v, allowed), **tol(dtype))


@pytest.mark.parametrize("causal", [False, True])
def test_flash_with_mask_bias_and_empty_rows(causal):
    q, k, v = qkv(10, 13, dtype=torch.float64)
    g = torch.Generator().manual_seed(5)
    mask = torch.rand(2, 1, 10, 13, generator=g) > 0.5
    mask[:, :, 3] = False                                 # a query with no key at all
    bias = torch.randn(1, 3, 10, 13, generator=g, dtype=torch.float64)
    got = flash_attention(q, k, v, mask=mask, bias=bias, is_causal=causal, block_size=4)
    want = naive_attention(q, k, v, mask=mask, bias=bias, is_causal=causal)
    torch.testing.assert_close(got, want, **tol(torch.float64))
    assert got[:, :, 3].abs().max() == 0


def test_flash_gradients_match_reference():
    q, k, v = (t.requires_grad_() for t in qkv(13, 13, dtype=torch.float64))
    flash_attention(q, k, v, is_causal=True, block_size=4).pow(2).sum().backward()
    got = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    reference(q, k, v, causal_mask(13)).pow(2).sum().backward()
    for g, t in zip(got, (q, k, v)):
        torch.testing.assert_close(g, t.grad, **tol(torch.float64))


def test_flash_is_stable_with_huge_scores():
    q, k, v = qkv(9, 9, dtype=torch.float32)
    got = flash_attention(q * 300, k * 300, v, block_size=2)   # exp would overflow unshifted
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, naive_attention(q * 300, k * 300, v), atol=1e-4, rtol=1e-4)


def test_flash_validates_its_inputs():
    q, k, v = qkv(4, 4)
    with pytest.raises(ValueError, match="block_size"):
        flash_attention(q, k, v, block_size=0)
    with pytest.raises(ValueError, match="head_dim"):
        flash_attention(q, k[..., :3], v)


@pytest.mark.skipif(not cpu_peak_supported(), reason="CPU peak resident set is Linux-only")
@pytest.mark.slow
def test_flash_forward_memory_grows_linearly_not_quadratically():
    lengths, peaks = [2048, 4096, 8192], []
    for L in lengths:
        q, k, v = (torch.randn(1, 4, L, 32) for _ in range(3))
        with torch.no_grad():
            peaks.append(peak_memory(flash_attention, q, k, v, is_causal=True, block_size=512))
    exponent, _ = fit_power_law(lengths, peaks)
    assert exponent < 1.3, (exponent, peaks)
    assert max(peaks) < 8192 ** 2 * 4 / 4               # far below one score matrix


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_in_half_precision_matches_the_reference(dtype, causal):
    q, k, v = (t.to(dtype) for t in qkv(33, 40))
    out = flash_attention(q, k, v, is_causal=causal, block_size=8)
    assert out.dtype == dtype
    allowed = causal_mask(33, 40) if causal else None
    torch.testing.assert_close(out.double(), reference(q, k, v, allowed), **tol(dtype))


def test_flash_in_bfloat16_keeps_its_statistics_in_float32():
    """One query, 1024 keys, a key tile at a time: the first key scores 0, the others -6, so
    each adds e^-6 = 0.0025 to a normaliser that starts at 1. In bfloat16 (8 significant
    bits, a step of 0.0078 at 1) every such sum would round back to 1 and the output would
    be about 1, not 0.72; FlashAttention keeps m, l and acc in float32."""
    S = 1024
    q = torch.ones(1, 1, 1, 1, dtype=torch.bfloat16)
    k = torch.full((1, 1, S, 1), -6.0, dtype=torch.bfloat16)
    k[..., 0, :] = 0.0
    v = torch.ones(1, 1, S, 1, dtype=torch.bfloat16)
    v[..., 0, :] = 0.0
    out = flash_attention(q, k, v, scale=1.0, block_size=1)
    p = torch.tensor(-6.0).exp().item()
    expected = (S - 1) * p / (1 + (S - 1) * p)                        # 0.717
    assert abs(out.item() - expected) < 0.01, (out.item(), expected)
