"""Section 12.5 kernels: sliding windows, Longformer, Linformer, linear attention, Performer."""
import pytest
import torch
import torch.nn.functional as F

from helpers import qkv, tol
from labsupport.attention import (
    KERNELS,
    LinearAttentionState,
    LinformerAttention,
    band_mask,
    causal_mask,
    favor_features,
    linear_attention,
    linear_attention_recurrent,
    local_attention,
    longformer_attention,
    longformer_mask,
    naive_attention,
    orthogonal_random_features,
    performer_attention,
)
from labsupport.layers import MultiHeadAttention
from labsupport.positional import ALiBi, RotaryEmbedding
from labsupport.timing import LargestTensor


def golden(q, k, v, allowed=None):
    """float64 softmax attention under a boolean mask, from naive_attention on doubles."""
    return naive_attention(q.double(), k.double(), v.double(), mask=allowed)


def assert_grads_match(fn, ref, inputs):
    """Gradients of sum(fn(...)^2) and sum(ref(...)^2) w.r.t. each input agree (float64)."""
    fn(*inputs).pow(2).sum().backward()
    got = [t.grad.clone() for t in inputs]
    for t in inputs:
        t.grad = None
    ref(*inputs).pow(2).sum().backward()
    for g, t in zip(got, inputs):
        torch.testing.assert_close(g, t.grad, **tol(torch.float64))


# --- local (sliding window) attention -----------------------------------------------------

WINDOWS = [(37, 3, None), (37, 5, 8), (20, 0, None), (9, 9, None), (9, 50, None), (1, 2, None),
           (64, 16, None), (13, 4, 1)]                   # (L, window, block_size)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("L,window,block_size", WINDOWS)
@pytest.mark.parametrize("causal", [False, True])
def test_local_equals_naive_under_the_band_mask(dtype, L, window, block_size, causal):
    q, k, v = qkv(L, dtype=dtype)
    out = local_attention(q, k, v, window=window, is_causal=causal, block_size=block_size)
    assert out.shape == (2, 3, L, 6) and out.dtype == dtype
    torch.testing.assert_close(out.double(), golden(q, k, v, band_mask(L, window, is_causal=causal)),
                               **tol(dtype))


def test_band_mask():
    assert band_mask(4, 1).int().tolist() == [[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]]
    assert band_mask(4, 1, is_causal=True).int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0],
                                                              [0, 1, 1, 0], [0, 0, 1, 1]]
    assert band_mask(3, 5).all() and (band_mask(3, 0) == torch.eye(3, dtype=torch.bool)).all()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("mask_shape", [(2, 1, 19, 19), (19,), (19, 19)])
def test_local_with_a_boolean_mask(causal, mask_shape):
    q, k, v = qkv(19)
    mask = torch.rand(mask_shape, generator=torch.Generator().manual_seed(1)) > 0.4
    if len(mask_shape) > 1:
        mask[..., 4, :] = False                           # a query with no key: zeros, not NaN
    out = local_attention(q, k, v, window=3, mask=mask, is_causal=causal, block_size=4)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), golden(q, k, v, band_mask(19, 3, is_causal=causal) & mask),
                               **tol(torch.float32))


@pytest.mark.parametrize("causal", [False, True])
def test_local_gradients_match_naive(causal):
    inputs = qkv(23, dtype=torch.float64, grad=True)
    allowed = band_mask(23, 4, is_causal=causal)
    assert_grads_match(lambda q, k, v: local_attention(q, k, v, window=4, is_causal=causal, block_size=5),
                       lambda q, k, v: naive_attention(q, k, v, mask=allowed), inputs)


def test_local_with_dropout_drops_and_rescales():
    q, k, v = qkv(16)
    torch.testing.assert_close(local_attention(q, k, v, window=2, dropout_p=0.0),
                               local_attention(q, k, v, window=2))
    assert not torch.allclose(local_attention(q, k, v, window=2, dropout_p=0.5),
                              local_attention(q, k, v, window=2))


def largest_allocation(fn, L):
    q, k, v = qkv(L, D=8, Dv=8, B=1, H=1, grad=True)
    with LargestTensor() as probe:
        fn(q, k, v).sum().backward()
    return probe.nbytes


SUBQUADRATIC = {
    "local": lambda q, k, v: local_attention(q, k, v, window=8),
    "local causal": lambda q, k, v: local_attention(q, k, v, window=8, is_causal=True),
    "longformer": lambda q, k, v: longformer_attention(q, k, v, window=8, global_tokens=[0, 100]),
    "linear causal": lambda q, k, v: linear_attention(q, k, v, is_causal=True),
    "performer causal": lambda q, k, v: performer_attention(q, k, v, num_features=16, is_causal=True,
                                                            generator=0),
    "performer": lambda q, k, v: performer_attention(q, k, v, num_features=16, generator=0),
}


@pytest.mark.parametrize("name", sorted(SUBQUADRATIC))
def test_no_L_by_L_tensor_is_ever_allocated(name):
    L = 1024
    assert largest_allocation(lambda q, k, v: naive_attention(q, k, v), L) >= L * L * 4  # the probe sees it
    # measured: local 24 floats per position (chunk 8 x band 24), longformer 26, linear 8, performer 16
    assert largest_allocation(SUBQUADRATIC[name], L) <= 32 * L * 4


# --- chunks in groups: long windows run a group of chunks at a time ----------------------

@pytest.fixture(params=[1, 700], ids=["one chunk per group", "several chunks per group"])
def small_groups(request, monkeypatch):
    """Make tiny inputs run in several groups, as long sequences do (at least 2^17 scores each)."""
    import labsupport.attention.sparse as sparse
    monkeypatch.setattr(sparse, "_GROUP_SCORES", request.param)
    return request.param


@pytest.mark.parametrize("L,window,block_size", WINDOWS)
@pytest.mark.parametrize("causal", [False, True])
def test_local_in_groups_equals_naive_under_the_band_mask(small_groups, L, window, block_size, causal):
    from labsupport.attention.sparse import _Band
    q, k, v = qkv(L, dtype=torch.float64)
    band = _Band.of(L, window, causal, block_size, batch=6)
    if small_groups == 1:                                                   # really grouped
        assert band.n == 1 or len(list(band.groups())) > 1
    out = local_attention(q, k, v, window=window, is_causal=causal, block_size=block_size)
    torch.testing.assert_close(out, golden(q, k, v, band_mask(L, window, is_causal=causal)),
                               **tol(torch.float64))


@pytest.mark.parametrize("causal", [False, True])
def test_windows_in_groups_with_masks_and_gradients(small_groups, causal):
    q, k, v = qkv(23, dtype=torch.float64, grad=True)
    mask = torch.rand(2, 1, 23, 23, generator=torch.Generator().manual_seed(3)) > 0.3
    allowed = band_mask(23, 4, is_causal=causal)
    torch.testing.assert_close(
        local_attention(q, k, v, window=4, is_causal=causal, mask=mask, block_size=3),
        naive_attention(q, k, v, mask=allowed & mask), **tol(torch.float64))
    assert_grads_match(lambda q, k, v: local_attention(q, k, v, window=4, is_causal=causal, block_size=5),
                       lambda q, k, v: naive_attention(q, k, v, mask=allowed), (q, k, v))
    for t in (q, k, v):
        t.grad = None
    globals_ = [0, 10, 22]
    full = longformer_mask(23, 3, globals_, is_causal=causal)
    torch.testing.assert_close(
        longformer_attention(q, k, v, window=3, global_tokens=globals_, is_causal=causal, mask=mask),
        naive_attention(q, k, v, mask=full & mask), **tol(torch.float64))
    assert_grads_match(
        lambda q, k, v: longformer_attention(q, k, v, window=3, global_tokens=globals_, is_causal=causal),
        lambda q, k, v: naive_attention(q, k, v, mask=full), (q, k, v))


@pytest.mark.skipif(not __import__("labsupport.timing").timing.cpu_peak_supported(),
                    reason="this torch's profiler reports no CPU memory events")
@pytest.mark.parametrize("L", [4096, 16384])
@pytest.mark.parametrize("name", ["local", "local causal", "longformer"])
def test_window_peak_is_within_twice_the_band_scores(name, L):
    """Forward peak (exact, one thread) within 2x the band's scores L (2w + 1) float32 (the
    chunks run in groups, one group's scores alive at a time)."""
    from labsupport.timing import attention_inputs, peak_memory
    w, kernels = 128, {
        "local": lambda q, k, v: local_attention(q, k, v, window=w),
        "local causal": lambda q, k, v: local_attention(q, k, v, window=w, is_causal=True),
        "longformer": lambda q, k, v: longformer_attention(q, k, v, window=w, global_tokens=[0]),
    }
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        q, k, v = attention_inputs(L)                                  # (1, 1, L, 64)
        with torch.no_grad():
            peak = peak_memory(kernels[name], q, k, v)
    finally:
        torch.set_num_threads(threads)
    assert L * 64 * 4 <= peak <= 2 * L * (2 * w + 1) * 4                 # the output <= peak <= 2x


# --- Longformer -----------------------------------------------------------------------------

GLOBALS = [[0], [0, 5, 36], [], torch.tensor([12, 3, 3])]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("global_tokens", GLOBALS)
@pytest.mark.parametrize("window,block_size", [(2, None), (4, 7), (0, None), (40, None)])
@pytest.mark.parametrize("causal", [False, True])
def test_longformer_equals_naive_under_its_mask(dtype, global_tokens, window, block_size, causal):
    q, k, v = qkv(37, dtype=dtype)
    out = longformer_attention(q, k, v, window=window, global_tokens=global_tokens, is_causal=causal,
                               block_size=block_size)
    allowed = longformer_mask(37, window, global_tokens, is_causal=causal)
    torch.testing.assert_close(out.double(), golden(q, k, v, allowed), **tol(dtype))


def test_longformer_mask():
    m = longformer_mask(5, 0, [1])
    assert m.int().tolist() == [[1, 1, 0, 0, 0], [1, 1, 1, 1, 1], [0, 1, 1, 0, 0],
                                [0, 1, 0, 1, 0], [0, 1, 0, 0, 1]]
    assert (longformer_mask(5, 0, [1], is_causal=True) == m & causal_mask(5)).all()


@pytest.mark.parametrize("causal", [False, True])
def test_longformer_with_a_mask_and_gradients(causal):
    q, k, v = qkv(21, dtype=torch.float64, grad=True)
    mask = torch.rand(2, 1, 21, 21, generator=torch.Generator().manual_seed(2)) > 0.3
    allowed = longformer_mask(21, 3, [0, 10], is_causal=causal) & mask
    torch.testing.assert_close(
        longformer_attention(q, k, v, window=3, global_tokens=[0, 10], is_causal=causal, mask=mask),
        naive_attention(q, k, v, mask=allowed), **tol(torch.float64))
    assert_grads_match(
        lambda q, k, v: longformer_attention(q, k, v, window=3, global_tokens=[0, 10], is_causal=causal),
        lambda q, k, v: naive_attention(q, k, v, mask=longformer_mask(21, 3, [0, 10], is_causal=causal)),
        (q, k, v))


def test_longformer_bad_global_tokens():
    q, k, v = qkv(8)
    with pytest.raises(ValueError, match=r"global_tokens must be positions in \[0, 8\).*\[8\]"):
        longformer_attention(q, k, v, window=1, global_tokens=[8])
    with pytest.raises(ValueError, match=r"\[-1, 2\]"):
        longformer_attention(q, k, v, window=1, global_tokens=[2, -1])


# --- linear attention -----------------------------------------------------------------------

def linear_reference(q, k, v, causal):
    """float64 ``phi(Q) phi(K)^T`` with phi = elu + 1, row-normalised: the formula, directly."""
    q, k, v = q.double(), k.double(), v.double()
    a = (F.elu(q) + 1) @ (F.elu(k) + 1).transpose(-2, -1)             # (..., L, S)
    a = a.tril() if causal else a
    return (a @ v) / a.sum(dim=-1, keepdim=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("L,S", [(37, 37), (5, 11), (11, 5), (1, 1), (1, 9), (70, 70)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("chunk_size", [1, 7, 64])
def test_linear_attention_matches_its_formula(dtype, L, S, causal, chunk_size):
    q, k, v = qkv(L, S, dtype=dtype)
    out = linear_attention(q, k, v, is_causal=causal, chunk_size=chunk_size)
    assert out.shape == (2, 3, L, 6) and out.dtype == dtype
    rtol = {torch.float32: 1e-5, torch.float64: 1e-10}[dtype]
    torch.testing.assert_close(out.double(), linear_reference(q, k, v, causal), atol=rtol, rtol=rtol)


@pytest.mark.parametrize("causal", [False, True])
def test_linear_attention_gradients(causal):
    assert_grads_match(lambda q, k, v: linear_attention(q, k, v, is_causal=causal, chunk_size=4),
                       lambda q, k, v: linear_reference(q, k, v, causal),
                       qkv(19, dtype=torch.float64, grad=True))


def test_recurrent_equals_parallel_causal():
    q, k, v = qkv(45, dtype=torch.float64)
    torch.testing.assert_close(linear_attention_recurrent(q, k, v),
                               linear_attention(q, k, v, is_causal=True, chunk_size=8), **tol(torch.float64))


def test_recurrent_streams_across_calls_with_a_constant_state():
    q, k, v = qkv(30, dtype=torch.float64)
    head = (q[..., :13, :], k[..., :13, :], v[..., :13, :])
    first, state = linear_attention_recurrent(*head, return_state=True)
    assert isinstance(state, LinearAttentionState)
    assert state.S.shape == (2, 3, 8, 6) and state.z.shape == (2, 3, 8)     # (B, H, D, Dv), (B, H, D)
    rest = linear_attention_recurrent(q[..., 13:, :], k[..., 13:, :], v[..., 13:, :], state=state)
    torch.testing.assert_close(torch.cat([first, rest], dim=-2), linear_attention_recurrent(q, k, v),
                               **tol(torch.float64))
    with pytest.raises(ValueError, match=r"state.S shape \(2, 3, 8, 6\) != expected \(..., D, Dv\) = "
                                         r"\(2, 3, 8, 5\)"):
        linear_attention_recurrent(q, k, v[..., :5], state=state)


# --- Performer (FAVOR+) ---------------------------------------------------------------------

def mean_error(num_features, causal, seeds=range(4)):
    """Mean |performer - softmax attention| over feature draws; inputs of moderate norm
    (FAVOR+'s variance grows like exp(|q'|^2 + |k'|^2))."""
    q, k, v = (t * s for t, s in zip(qkv(48, D=16, dtype=torch.float64), (0.5, 0.5, 1.0)))
    exact = naive_attention(q, k, v, is_causal=causal)
    return sum((performer_attention(q, k, v, num_features=num_features, is_causal=causal, generator=s)
                - exact).abs().mean().item() for s in seeds) / len(seeds)


@pytest.mark.parametrize("causal", [False, True])
def test_performer_error_shrinks_with_more_features(causal):
    few, many = mean_error(16, causal), mean_error(1024, causal)
    assert many < few / 2.5 and many < 0.02                # measured: ~0.045 -> ~0.009


def test_favor_features_estimate_the_softmax_kernel_without_bias():
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(2, 4, generator=g, dtype=torch.float64) * 0.5
    w = orthogonal_random_features(64000, 4, generator=g, dtype=torch.float64)
    assert (favor_features(x, w) > 0).all()
    # with 1/sqrt(m) inside, phi(x).phi(y) over 64000 rows is the mean of 4000 independent
    # 16-feature estimates; measured relative error 0.3% (under 1% for seeds 0-4)
    torch.testing.assert_close(favor_features(x, w) @ favor_features(y, w), torch.exp(x @ y),
                               rtol=0.04, atol=0)


def test_random_features_are_orthogonal_blocks_with_chi_norms():
    w = orthogonal_random_features(40, 16, generator=3, dtype=torch.float64)
    assert w.shape == (40, 16)
    for block in w.split(16):                                              # 16, 16, 8 rows
        gram = block @ block.T
        torch.testing.assert_close(gram - torch.diag(gram.diagonal()), torch.zeros_like(gram),
                                   atol=1e-10, rtol=0)
    norms2 = orthogonal_random_features(4096, 16, generator=4, dtype=torch.float64).pow(2).sum(-1)
    assert abs(norms2.mean().item() - 16) < 0.5 and abs(norms2.var().item() - 32) < 4  # chi^2(16)


def test_performer_seeding_and_stability():
    q, k, v = qkv(20)
    a = performer_attention(q, k, v, num_features=32, generator=7)
    torch.testing.assert_close(a, performer_attention(q, k, v, num_features=32, generator=7))
    assert not torch.allclose(a, performer_attention(q, k, v, num_features=32))      # fresh draw
    for causal in (False, True):                                       # exp(~400) would overflow
        assert torch.isfinite(performer_attention(q * 30, k * 30, v, num_features=32, is_causal=causal,
                                                  generator=0)).all()


def test_performer_future_outlier_keys_cannot_underflow_the_past():
    q, k, v = qkv(32)
    out = performer_attention(q, k, v, num_features=32, is_causal=True, generator=1, chunk_size=8)
    k2 = k.clone()
    k2[..., 16:, :] *= 40                                          # huge keys after chunk 1
    out2 = performer_attention(q, k2, v, num_features=32, is_causal=True, generator=1, chunk_size=8)
    torch.testing.assert_close(out2[..., :16, :], out[..., :16, :])


# --- Linformer ------------------------------------------------------------------------------

def test_linformer_shapes_and_parameters():
    lin = LinformerAttention(12, 4)
    q, k, v = qkv(7, 12)
    assert lin(q, k, v).shape == (2, 3, 7, 6)
    assert lin.E.shape == lin.F.shape == (4, 12) and len(list(lin.parameters())) == 2
    shared = LinformerAttention(12, 4, share_kv=True)
    assert shared.F is None and len(list(shared.parameters())) == 1 and shared(q, k, v).shape == (2, 3, 7, 6)


def test_linformer_with_identity_projections_is_full_attention():
    lin = LinformerAttention(10, 10).double()
    with torch.no_grad():
        lin.E.copy_(torch.eye(10))
        lin.F.copy_(torch.eye(10))
    q, k, v = qkv(10, dtype=torch.float64)
    torch.testing.assert_close(lin(q, k, v), naive_attention(q, k, v), **tol(torch.float64))


def test_linformer_refuses_causality_masks_and_other_lengths():
    lin = LinformerAttention(12, 4)
    q, k, v = qkv(12)
    with pytest.raises(ValueError, match="cannot be causal.*future"):
        lin(q, k, v, is_causal=True)
    with pytest.raises(ValueError, match="takes no mask"):
        lin(q, k, v, mask=torch.ones(12, 12, dtype=torch.bool))
    q, k, v = qkv(9)
    with pytest.raises(ValueError, match=r"built for seq_len 12, got k length 9.*\(2, 3, 9, 8\)"):
        lin(q, k, v)


def test_linformer_trains_inside_multi_head_attention():
    lin = LinformerAttention(10, 4)
    mha = MultiHeadAttention(16, 4, kernel=lin, dropout=0.1)
    assert mha.kernel is lin and any(p is lin.E for p in mha.parameters())
    assert mha.spec.dropout                                         # declared by LinformerAttention
    mha(torch.randn(2, 10, 16)).sum().backward()
    assert lin.E.grad is not None and lin.E.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="cannot be causal"):
        mha(torch.randn(2, 10, 16), is_causal=True)


# --- registry and MultiHeadAttention ---------------------------------------------------------

NEW = ["local", "longformer", "linear", "performer"]


@pytest.mark.parametrize("name", NEW)
@pytest.mark.parametrize("causal", [False, True])
def test_multi_head_attention_with_each_registered_kernel(name, causal):
    mha = MultiHeadAttention(16, 4, kernel=name)
    x = torch.randn(2, 40, 16, requires_grad=True)
    out = mha(x, is_causal=causal)
    assert out.shape == (2, 40, 16) and torch.isfinite(out).all()
    out.sum().backward()
    assert torch.isfinite(x.grad).all()
    assert MultiHeadAttention(16, 4, kernel=name, position=RotaryEmbedding(4))(x).shape == (2, 40, 16)


def test_registered_defaults():
    q, k, v = qkv(40)
    torch.testing.assert_close(KERNELS["local"](q, k, v), local_attention(q, k, v, window=16))
    torch.testing.assert_close(KERNELS["longformer"](q, k, v),
                               longformer_attention(q, k, v, window=16, global_tokens=[0]))
    # 128 features drawn from seed 0 on every call: the same as a fresh generator seeded 0, not seed 1
    seeded = performer_attention(q, k, v, num_features=128, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(KERNELS["performer"](q, k, v), seeded)
    torch.testing.assert_close(KERNELS["performer"](q, k, v), seeded)
    assert not torch.allclose(KERNELS["performer"](q, k, v), performer_attention(q, k, v, num_features=128,
                                                                                 generator=1))
    assert KERNELS["linear"] is linear_attention


@pytest.mark.parametrize("name", NEW)
def test_kernels_without_bias_refuse_alibi(name):
    with pytest.raises(ValueError, match="adds a bias to the scores"):
        MultiHeadAttention(16, 4, kernel=name, position=ALiBi(4))


BAD = {
    "local": lambda q, k, v, **kw: local_attention(q, k, v, window=2, **kw),
    "longformer": lambda q, k, v, **kw: longformer_attention(q, k, v, window=2, global_tokens=[0], **kw),
    "linear": linear_attention,
    "performer": lambda q, k, v, **kw: performer_attention(q, k, v, num_features=8, **kw),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_inputs_are_named(name):
    fn = BAD[name]
    q, k, v = qkv(6)
    with pytest.raises(ValueError, match=r"k head_dim 4 != q head_dim 8.*\(2, 3, 6, 8\), \(2, 3, 6, 4\)"):
        fn(q, k[..., :4], v)
    with pytest.raises(ValueError, match="v length 5 != k length 6"):
        fn(q, k, v[..., :5, :])
    with pytest.raises(TypeError, match="dtypes differ"):
        fn(q, k.double(), v)


@pytest.mark.parametrize("fn", [BAD["local"], BAD["longformer"], linear_attention_recurrent])
def test_windows_and_recurrence_need_self_attention(fn):
    q, k, v = qkv(5, 7)
    with pytest.raises(ValueError, match=r"needs self-attention, L == S: k length 7 != q length 5.*"
                                         r"\(2, 3, 5, 8\), \(2, 3, 7, 8\)"):
        fn(q, k, v)


def test_bad_options():
    q, k, v = qkv(6)
    with pytest.raises(ValueError, match="window must be an int >= 0, got -1"):
        local_attention(q, k, v, window=-1)
    with pytest.raises(ValueError, match="block_size must be a positive int, got 0"):
        local_attention(q, k, v, window=1, block_size=0)
    with pytest.raises(ValueError, match=r"linear_attention takes no mask \(got shape \(6, 6\)\)"):
        linear_attention(q, k, v, mask=torch.ones(6, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match="performer_attention takes no mask"):
        performer_attention(q, k, v, num_features=8, mask=torch.ones(6, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match="num_features must be a positive int, got 0"):
        performer_attention(q, k, v, num_features=0)
    with pytest.raises(TypeError, match="generator must be None, a torch.Generator or an int seed"):
        performer_attention(q, k, v, num_features=8, generator="seed")
