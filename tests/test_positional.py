import math

import numpy as np
import pytest
import torch

from labsupport.attention import naive_attention, sdpa
from labsupport.layers import MultiHeadAttention
from labsupport.models import PatchTransformer
from labsupport.positional import (KINDS, ALiBi, LearnedPositionalEncoding, RelativePositionBias,
                                   RotaryEmbedding, Time2Vec, XLRelativePosition, alibi_bias,
                                   alibi_slopes, relative_position_bucket, sinusoidal_encoding,
                                   time_features)


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
    q, k = torch.randn(1, 8, generator=g, dtype=torch.float64), torch.randn(1, 8, generator=g, dtype=torch.float64)

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


@pytest.mark.parametrize("position", ["rope", "alibi", "relative", "xl"])
def test_every_in_attention_encoding_gives_the_same_result_with_every_exact_kernel(position):
    def build(kernel):
        torch.manual_seed(0)
        pos = {"rope": lambda: RotaryEmbedding(4), "alibi": lambda: ALiBi(4),
               "relative": lambda: RelativePositionBias(4), "xl": lambda: XLRelativePosition(4, 4)}[position]()
        if position == "xl":
            torch.nn.init.normal_(pos.u)
            torch.nn.init.normal_(pos.v)
        return MultiHeadAttention(16, 4, kernel=kernel, position=pos).eval()
    x = torch.randn(2, 9, 16)
    ours = build("naive")(x, is_causal=True)
    torch.testing.assert_close(build("sdpa")(x, is_causal=True), ours, atol=1e-5, rtol=1e-5)
    out, weights = build("sdpa")(x, is_causal=True, return_weights=True)
    torch.testing.assert_close(out, ours, atol=1e-5, rtol=1e-5)


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
    np.testing.assert_allclose(alibi_slopes(6).numpy(), [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3])
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
                r = xl.r_proj(sinusoidal_features(torch.tensor([float(q_pos[i] - k_pos[j])]), xl.d_pos).float())
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


def test_time_features_ranges_and_periods():
    stamps = np.arange(np.datetime64("2014-01-06T00:00"), np.datetime64("2014-02-06T00:00"),
                       np.timedelta64(1, "h"))                          # 2014-01-06 is a Monday
    f = time_features(stamps)
    assert f.shape == (len(stamps), 6) and f.dtype == np.float32
    assert np.abs(f).max() <= 1.0 + 1e-6
    np.testing.assert_allclose(f[0, :4], [0, 1, 0, 1], atol=1e-6)      # midnight, Monday
    np.testing.assert_allclose(f[24, :2], f[0, :2], atol=1e-5)        # hour repeats every 24 h
    np.testing.assert_allclose(f[24 * 7, 2:4], f[0, 2:4], atol=1e-5)  # weekday every 7 days
    assert not np.allclose(f[24, 2:4], f[0, 2:4])
    np.testing.assert_allclose(np.hypot(f[:, 4], f[:, 5]), 1, atol=1e-6)
    with_holiday = time_features(stamps[:3], holiday=[1, 0, 0])
    assert with_holiday.shape == (3, 7) and with_holiday[:, 6].tolist() == [1, 0, 0]
    with pytest.raises(ValueError, match=r"holiday must be \(T,\)"):
        time_features(stamps[:3], holiday=[1, 0])


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
