import math

import numpy as np
import pytest
import torch

from helpers import tol
from labsupport.attention import KERNELS, causal_mask, kernel_spec, sdpa
from labsupport.layers import MultiHeadAttention
from labsupport.models import PatchTransformer
from labsupport.positional import (
    KINDS,
    ALiBi,
    LearnedPositionalEncoding,
    RelativePositionBias,
    RotaryEmbedding,
    Time2Vec,
    XLRelativePosition,
    alibi_bias,
    alibi_slopes,
    interleave_halves,
    relative_position_bucket,
    sinusoidal_encoding,
)


def test_sinusoidal_matches_its_formula():
    table = sinusoidal_encoding(50, 16, dtype=torch.float64)
    for p in (0, 7, 49):
        for i in range(8):
            angle = p / 10000 ** (2 * i / 16)
            assert table[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-12)
            assert table[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-12)
    with pytest.raises(ValueError, match="d_model must be even"):
        sinusoidal_encoding(4, 5)


def test_sinusoidal_shift_is_one_linear_map_for_every_position():
    d, k = 16, 5
    table = sinusoidal_encoding(300, d, dtype=torch.float64)
    M = torch.zeros(d, d, dtype=torch.float64)          # rotate each (sin, cos) pair by k * w_i
    for i in range(d // 2):
        a = k / 10000 ** (2 * i / d)
        M[2 * i:2 * i + 2, 2 * i:2 * i + 2] = torch.tensor([[math.cos(a), -math.sin(a)],
                                                            [math.sin(a), math.cos(a)]], dtype=torch.float64)
    torch.testing.assert_close(table[:-k] @ M, table[k:], atol=1e-10, rtol=0)


def test_rope_keeps_norms_and_scores_depend_only_on_the_offset():
    rope = RotaryEmbedding(8)
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(1, 8, generator=g, dtype=torch.float64) for _ in range(2))

    def score(m, n):
        return (rope(q, torch.tensor([m])) * rope(k, torch.tensor([n]))).sum().item()

    for m, n in ((3, 1), (10, 2), (7, 7)):
        for shift in (1, 25, 1000):
            assert score(m + shift, n + shift) == pytest.approx(score(m, n), abs=1e-9)
    assert score(5, 2) != pytest.approx(score(5, 3), abs=1e-6)
    x = torch.randn(2, 3, 11, 8, generator=g)
    torch.testing.assert_close(rope(x).norm(dim=-1), x.norm(dim=-1))
    batch_positions = torch.arange(11.0).expand(2, 11) + 0.5
    assert rope(x, batch_positions).shape == x.shape
    with pytest.raises(ValueError, match="head_dim must be even"):
        RotaryEmbedding(7)
    with pytest.raises(ValueError, match=r"x must be \(\.\.\., L, 8\)"):
        rope(torch.randn(2, 4, 6))


# Every kernel that computes softmax attention exactly and takes a score bias: naive, sdpa, flash.
EXACT = [name for name in KERNELS if kernel_spec(name).exact and kernel_spec(name).bias]


@pytest.mark.parametrize("kernel", EXACT)
@pytest.mark.parametrize("position", ["rope", "alibi", "relative", "xl"])
def test_every_in_attention_encoding_is_its_formula_with_every_exact_kernel(position, kernel):
    """Output and weights against attention written out in float64: the position module's
    rotation and bias, a causal softmax with `helpers.reference`'s einsum, the projections."""
    torch.manual_seed(0)
    pos = {"rope": lambda: RotaryEmbedding(4), "alibi": lambda: ALiBi(4),
           "relative": lambda: RelativePositionBias(4), "xl": lambda: XLRelativePosition(4, 4)}[position]()
    if position == "xl":
        torch.nn.init.normal_(pos.u)
        torch.nn.init.normal_(pos.v)
    mha = MultiHeadAttention(16, 4, kernel=kernel, position=pos).double().eval()
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    at = torch.arange(9)
    q, k, v = (mha.split_heads(proj(x)) for proj in (mha.q_proj, mha.k_proj, mha.v_proj))  # (B, H, L, hd)
    q, k = pos.rotate(q, k, at, at)
    scores = torch.einsum("bhld,bhsd->bhls", q, k) / 4 ** 0.5                             # (B, H, L, S)
    bias = pos.bias(q, k, at, at)
    scores = scores if bias is None else scores + bias
    weights = scores.masked_fill(~causal_mask(9), float("-inf")).softmax(-1)
    expected = mha.out_proj(mha.merge_heads(weights @ v))                                 # (B, L, d_model)
    assert (bias is not None) == pos.needs_bias
    torch.testing.assert_close(mha(x, is_causal=True), expected, **tol(torch.float64))
    out, got = mha(x, is_causal=True, return_weights=True)
    torch.testing.assert_close(out, expected, **tol(torch.float64))
    torch.testing.assert_close(got, weights, **tol(torch.float64))


def test_a_bias_needs_a_kernel_that_takes_one():
    def no_bias_kernel(q, k, v, *, mask=None, is_causal=False):
        return sdpa(q, k, v, mask=mask, is_causal=is_causal)
    MultiHeadAttention(8, 2, kernel=no_bias_kernel, position=RotaryEmbedding(4))    # fine
    with pytest.raises(ValueError, match="ALiBi adds a bias to the scores, which kernel 'no_bias_kernel'"):
        MultiHeadAttention(8, 2, kernel=no_bias_kernel, position=ALiBi(2))


def test_alibi_slopes_follow_the_papers_geometric_sequence():
    for n in (1, 2, 4, 8, 16):
        expected = [2 ** (-8 * (i + 1) / n) for i in range(n)]
        np.testing.assert_allclose(alibi_slopes(n).numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(alibi_slopes(6).numpy(),
                               [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3])
    bias = alibi_bias(4, 5)
    assert bias.shape == (4, 5, 5)
    assert bias[1, 4, 1].item() == pytest.approx(-3 * 2 ** -4) and bias[0, 2, 2] == 0
    assert alibi_bias(2, 3, 7)[0, 0, 4] == 0                 # queries are the last three keys


def test_t5_buckets():
    offsets = torch.arange(0, 300)
    buckets = relative_position_bucket(offsets, num_buckets=32, max_distance=128)
    assert buckets[:16].tolist() == list(range(16))                 # exact for small distances
    assert (buckets.diff() >= 0).all() and buckets.max() == 31       # then logarithmic, capped
    assert (buckets[128:] == 31).all()                               # one bucket beyond max_distance
    assert (relative_position_bucket(torch.tensor([-1, -50])) == 0).all()    # causal: future -> 0
    both = relative_position_bucket(torch.tensor([-3, 3]), bidirectional=True)
    assert both[0] != both[1]
    bias = RelativePositionBias(3).bias(torch.zeros(1, 3, 6, 4), torch.zeros(1, 3, 6, 4),
                                        torch.arange(6), torch.arange(6))
    assert bias.shape == (3, 6, 6)


def test_xl_relative_scores_match_their_four_terms_and_ignore_absolute_position():
    torch.manual_seed(0)
    xl = XLRelativePosition(n_heads=2, head_dim=4)
    torch.nn.init.normal_(xl.u)
    torch.nn.init.normal_(xl.v)
    q, k = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4)
    q_pos, k_pos = torch.arange(2, 5), torch.arange(5)
    bias = xl.bias(q, k, q_pos, k_pos)
    from labsupport.positional import sinusoidal_features
    for h in range(2):
        for i in range(3):
            for j in range(5):
                offset = torch.tensor([float(q_pos[i] - k_pos[j])])
                r = xl.r_proj(sinusoidal_features(offset, xl.d_pos).float())
                r = r.view(2, 4)[h]
                expected = (q[0, h, i] @ r + xl.u[h] @ k[0, h, j] + xl.v[h] @ r) / 2.0
                assert bias[0, h, i, j].item() == pytest.approx(expected.item(), abs=1e-5)
    torch.testing.assert_close(xl.bias(q, k, q_pos + 100, k_pos + 100), bias)


def test_learned_encoding_stops_at_max_len():
    enc = LearnedPositionalEncoding(10, 4)
    assert enc(torch.zeros(2, 10, 4)).shape == (2, 10, 4)
    with pytest.raises(ValueError, match="12 tokens is longer than the learned table's max_len 10"):
        enc(torch.zeros(2, 12, 4))
    with pytest.raises(ValueError, match="cannot take arbitrary positions"):
        enc(torch.zeros(1, 3, 4), torch.arange(3))


def test_time2vec_has_a_linear_and_periodic_part():
    t2v = Time2Vec(5)
    t = torch.linspace(0, 10, 7)
    f = t2v.features(t)
    assert f.shape == (7, 5)
    slope = (f[1:, 0] - f[:-1, 0]) / (t[1:] - t[:-1])
    torch.testing.assert_close(slope, slope[0].expand(6))
    assert f[:, 1:].abs().max() <= 1


@pytest.mark.parametrize("kind", KINDS)
def test_every_encoding_keeps_the_forecaster_causal(kind):
    model = PatchTransformer(lookback=48, horizon=6, patch_len=8, stride=4, d_model=16, n_heads=2,
                             pos_encoding=kind, dropout=0.0).eval()
    tokens = torch.randn(2, model.n_patches, 16)
    for t in (0, 5):
        later = tokens.clone()
        later[:, t + 1:] += 1.0
        torch.testing.assert_close(model.encode(tokens)[:, : t + 1], model.encode(later)[:, : t + 1])
    assert model(torch.randn(3, 48, 1)).shape == (3, 6, 1)


@pytest.mark.parametrize("kind", KINDS)
def test_position_breaks_permutation_symmetry_except_none(kind):
    model = PatchTransformer(lookback=48, horizon=6, patch_len=8, stride=4, d_model=16, n_heads=2,
                             pos_encoding=kind, dropout=0.0, causal=False).eval()
    tokens = torch.randn(1, model.n_patches, 16)
    perm = torch.randperm(model.n_patches, generator=torch.Generator().manual_seed(0))
    equivariant = torch.allclose(model.encode(tokens[:, perm]), model.encode(tokens)[:, perm], atol=1e-5)
    assert equivariant == (kind == "none")


def test_time_features_and_positions_in_the_forecaster():
    model = PatchTransformer(lookback=48, horizon=6, patch_len=8, stride=4, d_model=16, n_heads=2,
                             time_features=7, pos_encoding="sinusoidal", channels=2)
    x, time = torch.randn(3, 48, 2), torch.randn(3, 54, 7)
    assert model(x, time=time).shape == (3, 6, 2)
    other_future = time.clone()
    other_future[:, 48:] += 1.0
    assert not torch.allclose(model(x, time=time), model(x, time=other_future))
    with pytest.raises(ValueError, match=r"time must be \(B, L \+ T, F\) = \(3, 54, 7\)"):
        model(x, time=time[:, :48])
    with pytest.raises(ValueError, match="time_features=0"):
        PatchTransformer(lookback=48, horizon=6, patch_len=8, stride=4)(x[..., :1], time=time)
    positions = torch.cumsum(torch.rand(3, model.n_patches) + 0.5, dim=1)       # irregular times
    assert model(x, time=time, positions=positions).shape == (3, 6, 2)


# --- conventions, checked against independent formulas ---------------------------------

def rope_meta(x, positions, base=10000.0):
    """RoPE as Meta's LLaMA code writes it: pairs (2i, 2i+1) as complex numbers times
    exp(i p theta_i), theta_i = base^(-2i/D)."""
    D = x.shape[-1]
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    turn = torch.polar(torch.ones(len(positions), D // 2, dtype=torch.float64),
                       positions.double()[:, None] * theta)                    # (L, D/2)
    pairs = torch.view_as_complex(x.double().unflatten(-1, (D // 2, 2)).contiguous())
    return torch.view_as_real(pairs * turn).flatten(-2)


def rope_rotate_half(x, positions, base=10000.0):
    """RoPE as Hugging Face writes it: ``x cos + rotate_half(x) sin``, pairs (i, i + D/2)."""
    D = x.shape[-1]
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    angles = positions.double()[:, None] * theta                               # (L, D/2)
    cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return x * cos + torch.cat((-x2, x1), -1) * sin


def test_rope_pairs_2i_2i_plus_1_as_meta_and_maps_to_rotate_half_by_a_permutation():
    D, positions = 8, torch.tensor([0, 3, 17, 250])
    x = torch.randn(2, 3, 4, D, dtype=torch.float64)
    rope = RotaryEmbedding(D)
    torch.testing.assert_close(rope(x, positions), rope_meta(x, positions), **tol(torch.float64))
    halves = torch.cat((torch.arange(0, D, 2), torch.arange(1, D, 2)))       # (0, 2, 4, 6, 1, 3, 5, 7)
    torch.testing.assert_close(rope(x, positions)[..., halves], rope_rotate_half(x[..., halves], positions),
                               **tol(torch.float64))
    assert not torch.allclose(rope(x, positions), rope_rotate_half(x, positions))   # they do differ
    # porting rotate_half weights: interleave each head's halves, q . k is then unchanged
    q, k = torch.randn(4, D, dtype=torch.float64), torch.randn(4, D, dtype=torch.float64)
    assert interleave_halves(D).tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    ported = interleave_halves(D)
    ours = (rope(q[:, ported], positions) * rope(k[:, ported], positions)).sum(-1)
    theirs = (rope_rotate_half(q, positions) * rope_rotate_half(k, positions)).sum(-1)
    torch.testing.assert_close(ours, theirs, **tol(torch.float64))


def test_alibi_bias_follows_the_dtype_it_is_given():
    assert alibi_bias(4, 3).dtype == torch.get_default_dtype()
    slopes = 2.0 ** (-8 * torch.arange(1, 17, dtype=torch.float64) / 16)     # the paper's, for 16 heads
    exact = -slopes[:, None, None] * torch.arange(4095, -1, -1, dtype=torch.float64)   # (H, 1, S)
    torch.testing.assert_close(alibi_bias(16, 1, 4096, dtype=torch.float64), exact, **tol(torch.float64))
    assert (alibi_bias(16, 1, 4096).double() - exact).abs().max() > 1e-5     # float32 rounds
    assert alibi_slopes(16, dtype=torch.float64).dtype == torch.float64
    q, k = torch.zeros(1, 16, 1, 2, dtype=torch.float64), torch.zeros(1, 16, 4096, 2, dtype=torch.float64)
    bias = ALiBi(16).bias(q, k, torch.tensor([4095]), torch.arange(4096))
    assert bias.dtype == torch.float64
    torch.testing.assert_close(bias, exact, **tol(torch.float64))


def t5_bucket(relative_position, bidirectional, num_buckets, max_distance):
    """T5's ``_relative_position_bucket`` as published (``relative_position = key - query``)."""
    buckets = 0
    if bidirectional:
        num_buckets //= 2
        buckets += (relative_position > 0).long() * num_buckets
        relative_position = relative_position.abs()
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    large = max_exact + (torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).long()
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(relative_position < max_exact, relative_position, large)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (16, 64), (64, 256)])
def test_t5_buckets_match_the_published_function(bidirectional, num_buckets, max_distance):
    offset = torch.arange(-1000, 1001)                                       # query - key
    ours = relative_position_bucket(offset, bidirectional=bidirectional, num_buckets=num_buckets,
                                    max_distance=max_distance)
    assert torch.equal(ours, t5_bucket(-offset, bidirectional, num_buckets, max_distance))


def test_relative_bias_is_bidirectional_by_default_and_refuses_to_see_the_future_unidirectionally():
    q_pos = k_pos = torch.arange(6)
    buckets = relative_position_bucket(q_pos[:, None] - k_pos, bidirectional=True)
    assert RelativePositionBias(4).buckets["bidirectional"]
    assert len(set(buckets[2].tolist())) == 6                  # past, present and future keys apart
    x = torch.randn(2, 6, 16)
    encoder = MultiHeadAttention(16, 4, position=RelativePositionBias(4))
    assert encoder(x).shape == (2, 6, 16)                     # non-causal: fine by default
    causal_only = MultiHeadAttention(16, 4, position=RelativePositionBias(4, bidirectional=False))
    assert causal_only(x, is_causal=True).shape == (2, 6, 16)
    assert causal_only(x, mask=torch.ones(6, 6, dtype=torch.bool).tril()).shape == (2, 6, 16)
    for call in (lambda: causal_only(x), lambda: causal_only(x, mask=torch.ones(6, 6, dtype=torch.bool))):
        with pytest.raises(ValueError, match=r"bidirectional=False.*key after its query.*bidirectional=True"):
            call()


def xl_original_bias(q, k, W_R, u, v, q_pos, k_pos):
    """Transformer-XL's terms (b), (c), (d) as the original code builds them: sinusoid
    features ``cat(sin, cos)`` of the offset, projected by r_net's weight W_R (H*D, d_pos)."""
    H, D = u.shape
    d_pos = W_R.shape[1]
    inv_freq = 1 / (10000 ** (torch.arange(0.0, d_pos, 2.0) / d_pos))
    offsets = (q_pos[:, None] - k_pos[None, :]).float()                       # (L, S)
    angles = offsets[..., None] * inv_freq                                    # (L, S, d_pos/2)
    r = torch.cat((angles.sin(), angles.cos()), -1) @ W_R.T                   # (L, S, H*D)
    r = r.view(*offsets.shape, H, D).permute(2, 0, 1, 3)                      # (H, L, S, D)
    bd = ((q[0][:, :, None] + v[:, None, None]) * r).sum(-1)                  # (H, L, S)
    c = (k[0] * u[:, None]).sum(-1)[:, None]                                  # (H, 1, S)
    return (bd + c) / D ** 0.5


def test_xl_interleaves_sin_cos_and_maps_to_the_originals_halves():
    torch.manual_seed(0)
    xl = XLRelativePosition(n_heads=2, head_dim=4)
    torch.nn.init.normal_(xl.u)
    torch.nn.init.normal_(xl.v)
    W_R = torch.randn(8, xl.d_pos)                                           # the original's r_net weight
    with torch.no_grad():
        xl.r_proj.weight.copy_(W_R[:, interleave_halves(xl.d_pos)])
    q, k = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4)
    q_pos, k_pos = torch.arange(2, 5), torch.arange(5)
    expected = xl_original_bias(q, k, W_R, xl.u.detach(), xl.v.detach(), q_pos, k_pos)
    torch.testing.assert_close(xl.bias(q, k, q_pos, k_pos)[0], expected, atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        xl.r_proj.weight.copy_(W_R)                                          # unpermuted: not the same
    assert not torch.allclose(xl.bias(q, k, q_pos, k_pos)[0], expected, atol=1e-3)
