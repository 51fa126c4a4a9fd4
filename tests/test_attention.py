import pytest
import torch

from conftest import tol
from labsupport.attention import KERNELS, causal_mask, get_kernel, naive_attention, sdpa, sdpa_backends


def reference(q, k, v, allowed=None):
    """float64 attention written with einsum, independent of the kernels under test."""
    q, k, v = q.double(), k.double(), v.double()
    scores = torch.einsum("...ld,...sd->...ls", q, k) / q.shape[-1] ** 0.5
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.einsum("...ls,...sd->...ld", scores.softmax(-1), v)


def qkv(L, S, D=16, Dv=8, B=2, H=3, dtype=torch.float32):
    g = torch.Generator().manual_seed(L * 1000 + S)
    return (torch.randn(B, H, L, D, generator=g, dtype=dtype),
            torch.randn(B, H, S, D, generator=g, dtype=dtype),
            torch.randn(B, H, S, Dv, generator=g, dtype=dtype))


SHAPES = [(7, 7), (5, 11), (1, 1), (1, 9), (33, 20)]


@pytest.mark.parametrize("kernel", ["naive", "sdpa"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("L,S", SHAPES)
@pytest.mark.parametrize("causal", [False, True])
def test_kernels_match_float64_reference(kernel, dtype, L, S, causal):
    q, k, v = qkv(L, S, dtype=dtype)
    out = KERNELS[kernel](q, k, v, is_causal=causal)
    allowed = causal_mask(L, S) if causal else None
    assert out.shape == (2, 3, L, 8) and out.dtype == dtype
    torch.testing.assert_close(out.double(), reference(q, k, v, allowed), **tol(dtype))


@pytest.mark.parametrize("kernel", ["naive", "sdpa"])
@pytest.mark.parametrize("causal", [False, True])
def test_kernels_with_a_boolean_mask(kernel, causal):
    q, k, v = qkv(6, 9)
    mask = torch.rand(2, 1, 6, 9, generator=torch.Generator().manual_seed(3)) > 0.4
    mask[..., 0] = True                                   # every query keeps one key
    out = KERNELS[kernel](q, k, v, mask=mask, is_causal=causal)
    allowed = mask & causal_mask(6, 9) if causal else mask
    torch.testing.assert_close(out.double(), reference(q, k, v, allowed), **tol(torch.float32))


@pytest.mark.parametrize("kernel", ["naive", "sdpa"])
def test_gradients_match_reference(kernel):
    q, k, v = (t.requires_grad_() for t in qkv(9, 9, dtype=torch.float64))
    KERNELS[kernel](q, k, v, is_causal=True).pow(2).sum().backward()
    got = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    reference(q, k, v, causal_mask(9)).pow(2).sum().backward()
    for g, t in zip(got, (q, k, v)):
        torch.testing.assert_close(g, t.grad, **tol(torch.float64))


@pytest.mark.parametrize("kernel", ["naive", "sdpa"])
def test_changing_the_future_leaves_the_past_unchanged(kernel):
    q, k, v = qkv(12, 12)
    out = KERNELS[kernel](q, k, v, is_causal=True)
    t = 5
    q2, k2, v2 = (x.clone() for x in (q, k, v))
    for x in (q2, k2, v2):
        x[..., t + 1:, :] += 10 * torch.randn_like(x[..., t + 1:, :])
    out2 = KERNELS[kernel](q2, k2, v2, is_causal=True)
    torch.testing.assert_close(out2[..., : t + 1, :], out[..., : t + 1, :])
    assert not torch.allclose(out2[..., t + 1:, :], out[..., t + 1:, :])


def test_weights_are_a_causal_distribution():
    q, k, v = qkv(8, 8)
    _, w = naive_attention(q, k, v, is_causal=True, return_weights=True)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 8))
    assert w[..., ~causal_mask(8)].abs().max() == 0


def test_a_query_with_no_key_gets_zero_not_nan():
    q, k, v = qkv(3, 4)
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[1] = False
    out, w = naive_attention(q, k, v, mask=mask, return_weights=True)
    assert torch.isfinite(out).all() and out[..., 1, :].abs().max() == 0 and w[..., 1, :].abs().max() == 0


def test_causal_mask():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert causal_mask(2, 4).shape == (2, 4) and causal_mask(2, 4)[0].tolist() == [True, False, False, False]


def test_scale_argument():
    q, k, v = qkv(4, 4)
    torch.testing.assert_close(naive_attention(q, k, v, scale=1.0), naive_attention(q * 16 ** 0.5, k, v))


def test_sdpa_math_backend_runs_and_reports():
    q, k, v = qkv(8, 8)
    torch.testing.assert_close(sdpa(q, k, v, backend="math"), naive_attention(q, k, v))
    usable = sdpa_backends(q, k, v)
    assert usable["math"] is True and set(usable) == {"math", "flash", "efficient", "cudnn"}


@pytest.mark.parametrize("kernel", ["naive", "sdpa"])
def test_bad_inputs_are_named(kernel):
    fn = KERNELS[kernel]
    q, k, v = qkv(4, 6)
    with pytest.raises(ValueError, match=r"k head_dim 8 != q head_dim 16.*\(2, 3, 4, 16\), \(2, 3, 6, 8\)"):
        fn(q, k[..., :8], v)
    with pytest.raises(ValueError, match="v length 5 != k length 6"):
        fn(q, k, v[..., :5, :])
    with pytest.raises(ValueError, match="same rank"):
        fn(q[0], k, v)
    with pytest.raises(ValueError, match="batch and head dims differ"):
        fn(q, k[:1], v[:1])
    with pytest.raises(TypeError, match="dtypes differ"):
        fn(q, k.double(), v)
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        fn(q.numpy(), k, v)
    with pytest.raises(TypeError, match="bool tensor"):
        fn(q, k, v, mask=torch.ones(4, 6))
    with pytest.raises(ValueError, match=r"mask shape \(6, 4\) does not broadcast"):
        fn(q, k, v, mask=torch.ones(6, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"mask shape \(5, 2, 3, 4, 6\)"):
        fn(q, k, v, mask=torch.ones(5, 2, 3, 4, 6, dtype=torch.bool))


def test_registry_and_backend_names():
    assert get_kernel("naive") is naive_attention and get_kernel(sdpa) is sdpa
    with pytest.raises(ValueError, match="unknown attention kernel 'nope'"):
        get_kernel("nope")
    q, k, v = qkv(2, 2)
    with pytest.raises(ValueError, match="backend must be one of"):
        sdpa(q, k, v, backend="fast")
