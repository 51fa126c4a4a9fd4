from functools import partial

import pytest
import torch

from helpers import qkv, reference, tol
from labsupport.attention import (
    KERNELS,
    causal_mask,
    flash_attention,
    get_kernel,
    kernel_spec,
    linear_attention,
    linear_attention_recurrent,
    local_attention,
    longformer_attention,
    naive_attention,
    performer_attention,
    sdpa,
    sdpa_backends,
)

SHAPES = [(7, 7), (5, 11), (1, 1), (1, 9), (33, 20)]


@pytest.mark.parametrize("kernel", ["naive", "sdpa"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("L,S", SHAPES)
@pytest.mark.parametrize("causal", [False, True])
def test_kernels_match_float64_reference(kernel, dtype, L, S, causal):
    q, k, v = qkv(L, S, dtype=dtype)
    out = KERNELS[kernel](q, k, v, is_causal=causal)
    allowed = causal_mask(L, S) if causal else None
    assert out.shape == (2, 3, L, 6) and out.dtype == dtype
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


# Every causal kernel, by its registered defaults, and in forms whose blocks, chunks, windows
# and global tokens fall inside the 14 steps used below (the recurrent form too).
CAUSAL = {name: partial(kernel, is_causal=True) for name, kernel in KERNELS.items()
          if kernel_spec(name).causal}
CAUSAL.update({
    "flash in blocks of 4": partial(flash_attention, block_size=4, is_causal=True),
    "local, window 3 in chunks of 4": partial(local_attention, window=3, block_size=4, is_causal=True),
    "longformer, global tokens 0 and 9": partial(longformer_attention, window=3, global_tokens=[0, 9],
                                                 is_causal=True),
    "linear in chunks of 4": partial(linear_attention, chunk_size=4, is_causal=True),
    "linear, recurrent": linear_attention_recurrent,
    "performer in chunks of 4": partial(performer_attention, num_features=64, generator=0, chunk_size=4,
                                        is_causal=True),
})


@pytest.mark.parametrize("name", CAUSAL)
@pytest.mark.parametrize("t", [0, 5, 7])
def test_changing_the_future_leaves_the_past_unchanged(name, t):
    q, k, v = qkv(14)
    out = CAUSAL[name](q, k, v)
    q2, k2, v2 = (x.clone() for x in (q, k, v))
    for x in (q2, k2, v2):
        x[..., t + 1:, :] = torch.randn_like(x[..., t + 1:, :])
    out2 = CAUSAL[name](q2, k2, v2)
    torch.testing.assert_close(out2[..., : t + 1, :], out[..., : t + 1, :])
    assert not torch.allclose(out2[..., t + 1:, :], out[..., t + 1:, :])      # the future reaches later steps


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
    torch.testing.assert_close(naive_attention(q, k, v, scale=1.0), naive_attention(q * 8 ** 0.5, k, v))


def test_sdpa_math_backend_runs_and_reports():
    q, k, v = qkv(8, 8)
    torch.testing.assert_close(sdpa(q, k, v, backend="math"), naive_attention(q, k, v))
    usable = sdpa_backends(q, k, v)
    assert usable["math"] is True and set(usable) == {"math", "flash", "efficient", "cudnn"}


@pytest.mark.parametrize("kernel", ["naive", "sdpa"])
def test_bad_inputs_are_named(kernel):
    fn = KERNELS[kernel]
    q, k, v = qkv(4, 6)
    with pytest.raises(ValueError, match=r"k head_dim 4 != q head_dim 8.*\(2, 3, 4, 8\), \(2, 3, 6, 4\)"):
        fn(q, k[..., :4], v)
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
