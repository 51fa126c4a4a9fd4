"""Every self-check passes a right answer and gives the specific hint for known wrong ones."""
import pytest
import torch

from labsupport import checks
from labsupport.checks import NOT_ANSWERED
from wrong_answers import WRONG_ANSWERS, missing


def unanswered(*args):
    raise NotImplementedError


def crashes(*args):
    raise IndexError("boom")


def weights(scale_fn=lambda d: d ** -0.5, dim=-1, transpose=False):
    def fn(q, k):
        s = q @ k.transpose(-2, -1) * scale_fn(q.shape[-1])
        w = s.softmax(dim)
        return w.transpose(-2, -1) if transpose else w
    return fn


def expect(result, passed, fragment):
    assert result.passed is passed, str(result)
    assert fragment in result.message, str(result)


@pytest.mark.parametrize("check", list(checks.CHECKS.values()))
def test_every_check_explains_unanswered_and_crashing_code(check):
    expect(check(unanswered), False, NOT_ANSWERED)
    expect(check(crashes), False, "raised IndexError: boom")


@pytest.mark.parametrize("name", sorted(checks.CHECKS))
def test_the_typical_wrong_answer_gets_its_hint(name):
    """The table that tests/test_grading.py writes into nbgrader submissions."""
    assert name in WRONG_ANSWERS, missing(name)
    wrong = WRONG_ANSWERS[name]
    expect(checks.CHECKS[name](wrong.function()), False, wrong.hint)


def test_attention_weights():
    expect(checks.attention_weights(weights()), True, "softmax")
    expect(checks.attention_weights(weights(dim=-2)), False, "softmax over the key axis")
    expect(checks.attention_weights(weights(lambda d: 1.0)), False, "scale the scores by 1 / sqrt(d)")
    expect(checks.attention_weights(weights(lambda d: 1 / d)), False, "not by d")
    expect(checks.attention_weights(weights(lambda d: d ** 0.5)), False, "you multiplied")
    expect(checks.attention_weights(weights(transpose=True)), False, "rows are queries")
    expect(checks.attention_weights(lambda q, k: (k @ q.transpose(-2, -1)).numpy()), False, "torch.Tensor")


def causal(keep=lambda L: torch.ones(L, L, dtype=torch.bool).tril(), scale=True, zero_after=False):
    def fn(q, k, v):
        L = q.shape[-2]
        s = q @ k.transpose(-2, -1) / (q.shape[-1] ** 0.5 if scale else 1.0)
        allowed = keep(L)
        if zero_after:
            return (s.softmax(-1) * allowed) @ v
        return s.masked_fill(~allowed, float("-inf")).softmax(-1) @ v
    return fn


def test_causal_attention():
    expect(checks.causal_attention(causal()), True, "no weight on the future")
    expect(checks.causal_attention(causal(lambda L: torch.ones(L, L, dtype=torch.bool).triu())), False, "flipped")
    expect(checks.causal_attention(causal(lambda L: torch.ones(L, L, dtype=torch.bool))), False, "seeing the future")
    expect(checks.causal_attention(causal(lambda L: torch.ones(L, L, dtype=torch.bool).tril(-1))), False, "NaN")
    first_sees_itself = torch.zeros(6, 6, dtype=torch.bool)
    first_sees_itself[0, 0] = True
    expect(checks.causal_attention(causal(lambda L: torch.ones(L, L, dtype=torch.bool).tril(-1) | first_sees_itself)),
           False, "keep the diagonal")
    expect(checks.causal_attention(causal(zero_after=True)), False, "-inf before the softmax")
    expect(checks.causal_attention(causal(scale=False)), False, "scale the scores")
    right = causal()
    expect(checks.causal_attention(lambda q, k, v: right(q, k, v) if v.shape[-1] == 6 else v[..., :6, :] * 0),
           False, "not weights @ v")


def test_score_matrix_bytes():
    size = lambda dtype: torch.tensor([], dtype=dtype).element_size()
    expect(checks.score_matrix_bytes(lambda b, h, L, dt: b * h * L * L * size(dt)), True, "element size")
    expect(checks.score_matrix_bytes(lambda b, h, L, dt: L * L * size(dt)), False, "batch * heads")
    expect(checks.score_matrix_bytes(lambda b, h, L, dt: b * h * L * size(dt)), False, "L * L entries")
    expect(checks.score_matrix_bytes(lambda b, h, L, dt: b * h * L * L * 8 * size(dt)), False, "bits")
    expect(checks.score_matrix_bytes(lambda b, h, L, dt: b * h * L * L * 4), False, "depends on the dtype")
    expect(checks.score_matrix_bytes(lambda b, h, L, dt: "4 MB"), False, "number of bytes")


def test_split_heads():
    expect(checks.split_heads(lambda x, H: x.view(x.shape[0], x.shape[1], H, -1).transpose(1, 2)), True, "slice")
    expect(checks.split_heads(lambda x, H: x.view(x.shape[0], H, x.shape[1], -1)), False, "transpose(1, 2)")
    expect(checks.split_heads(lambda x, H: x.view(x.shape[0], x.shape[1], H, -1)), False, "shape (2, 3, 5, 4)")
    expect(checks.split_heads(lambda x, H: x.view(x.shape[0], x.shape[1], -1, H).permute(0, 3, 1, 2)),
           False, "head h at position t")


# 12.2 The Transformer architecture

def test_feed_forward():
    right = lambda x, w1, b1, w2, b2: torch.relu(x @ w1.T + b1) @ w2.T + b2
    expect(checks.feed_forward(right), True, "same MLP")
    expect(checks.feed_forward(lambda x, w1, b1, w2, b2: (x @ w1.T + b1) @ w2.T + b2), False, "nonlinearity")
    expect(checks.feed_forward(lambda x, w1, b1, w2, b2: torch.relu(x @ w1.T) @ w2.T), False, "biases")
    expect(checks.feed_forward(lambda x, w1, b1, w2, b2: torch.relu(x @ w1.T + b1) @ w2.T), False, "second bias")
    expect(checks.feed_forward(lambda x, w1, b1, w2, b2: torch.relu(x @ w1.T + b1).mean(1, keepdim=True)
                               @ w2.T + b2 + 0 * x), False, "only on that position")
    expect(checks.feed_forward(lambda x, w1, b1, w2, b2: x * 2), False, "(out_features, in_features)")


def test_pre_norm_block():
    expect(checks.pre_norm_block(lambda x, attn, ff, n1, n2: (lambda h: h + ff(n2(h)))(x + attn(n1(x)))),
           True, "pre-norm")
    expect(checks.pre_norm_block(lambda x, attn, ff, n1, n2: (lambda h: n2(h + ff(h)))(n1(x + attn(x)))),
           False, "post-norm")
    expect(checks.pre_norm_block(lambda x, attn, ff, n1, n2: ff(n2(attn(n1(x))))), False, "residual")
    expect(checks.pre_norm_block(lambda x, attn, ff, n1, n2: (lambda h: h + ff(h))(x + attn(n1(x)))),
           False, "norm2")
    expect(checks.pre_norm_block(lambda x, attn, ff, n1, n2: x), False, "compute x = x + attn")


def peeks_right(model, x, t):
    y = x.clone()
    y[:, t + 1:] += 1.0
    return not torch.allclose(model(x)[:, : t + 1], model(y)[:, : t + 1])


def test_peeks():
    expect(checks.peeks(peeks_right), True, "catches")
    expect(checks.peeks(lambda m, x, t: not peeks_right(m, x, t)), False, "inverted")
    def compares_everything(model, x, t):
        y = x.clone()
        y[:, t + 1:] += 1.0
        return not torch.allclose(model(x), model(y))
    expect(checks.peeks(compares_everything), False, "compare only outputs up to t")
    def perturbs_too_little(model, x, t):
        y = x.clone()
        y[:, -1:] *= 1.0
        return not torch.allclose(model(x)[:, : t + 1], model(y)[:, : t + 1])
    expect(checks.peeks(perturbs_too_little), False, "was not caught")
    expect(checks.peeks(lambda m, x, t: torch.tensor(True)), False, "a bool")


def test_seasonal_naive():
    from labsupport.models import seasonal_naive
    expect(checks.seasonal_naive(seasonal_naive), True, "repeats")
    def off_by_one(x, period, horizon):
        last = x[:, -period - 1:-1]
        return last.repeat(1, -(-horizon // period), 1)[:, :horizon]
    expect(checks.seasonal_naive(off_by_one), False, "off by one")
    expect(checks.seasonal_naive(lambda x, p, h: x[:, -p:][:, :h]), False, "shape (2, 10, 1)")
    expect(checks.seasonal_naive(lambda x, p, h: x[:, -h:] * 0), False, "tile the last period")


def test_heads_peak_ratio_names_the_usual_mistakes():
    """Exercise 12.2.4: B = 2, L = 512, d = 64; q, k, v stay, the scores grow with H."""
    from labsupport.checks.transformer import HEADS_SIZES, heads_peak_model, measured_heads_peaks
    B, L, d = HEADS_SIZES.values()
    peaks, measured = measured_heads_peaks(B, L, d)
    assert measured and peaks == {H: heads_peak_model(B, L, d, H) + (H > 1) * B * L * d * 4 for H in (1, 4)}, \
        "the byte model: q, k, v, two score matrices per head and the output (with 4 heads, one more copy)"
    counted = lambda H: 3 * B * L * d + 2 * B * H * L * L      # noqa: E731 (q, k, v and the scores)
    expect(checks.heads_peak_ratio(lambda: counted(4) / counted(1)), True, "within 5% of the measured ratio")
    expect(checks.heads_peak_ratio(lambda: peaks[4] / peaks[1]), True, "each head keeps its own")
    expect(checks.heads_peak_ratio(lambda: 1), False, "each head keeps its own (B, L, L) score matrix")
    expect(checks.heads_peak_ratio(lambda: 4.0), False, "the q, k, v projections")
    expect(checks.heads_peak_ratio(lambda: counted(1) / counted(4)), False, "1 head over 4 heads")
    expect(checks.heads_peak_ratio(lambda: 16), False, "not 16")
    expect(checks.heads_peak_ratio(lambda: 2.0), False, "count the bytes alive at the peak")
    expect(checks.heads_peak_ratio(lambda: -3.5), False, "positive number")
    expect(checks.heads_peak_ratio(lambda: "3.5"), False, "return a ratio")


def test_block_parameters():
    from labsupport.layers import TransformerBlock
    right = lambda d, h, f: 4 * (d * d + d) + 2 * d * f + f + d + 4 * d
    assert right(64, 4, 128) == sum(p.numel() for p in TransformerBlock(64, 4, 128).parameters())
    expect(checks.block_parameters(right), True, "independent of the heads")
    expect(checks.block_parameters(lambda d, h, f: 4 * d * d + 2 * d * f + 4 * d), False, "bias")
    expect(checks.block_parameters(lambda d, h, f: right(d, h, f) - 4 * d), False, "LayerNorm")
    expect(checks.block_parameters(lambda d, h, f: right(d, h, f) + (h - 1) * 4 * (d * d + d)), False, "share")
    expect(checks.block_parameters(lambda d, h, f: 7), False, "expected")


# 12.3 Positional and temporal encodings

def test_sinusoidal():
    from labsupport.checks.positional import _table
    expect(checks.sinusoidal(lambda L, d: _table(L, d)), True, "PE[p, 2i]")
    expect(checks.sinusoidal(lambda L, d: _table(L, d, swap=True)), False, "swapped")
    expect(checks.sinusoidal(lambda L, d: _table(L, d, halves=True)), False, "interleave")
    expect(checks.sinusoidal(lambda L, d: _table(L, d, freq_step=1)), False, "exponent is 2i/d")
    expect(checks.sinusoidal(lambda L, d: torch.zeros(L, d)), False, "differs")


def test_rotate_pairs():
    from labsupport.checks.positional import _rotate
    expect(checks.rotate_pairs(_rotate), True, "depends only on m - n")
    expect(checks.rotate_pairs(lambda x, p: _rotate(x, p, sign=-1.0)), False, "clockwise")
    expect(checks.rotate_pairs(lambda x, p: _rotate(x, p, halves=True)), False, "neighbours")
    expect(checks.rotate_pairs(lambda x, p: _rotate(x, p, same_angle=True)), False, "own frequency")
    expect(checks.rotate_pairs(lambda x, p: x * 2), False, "is not the rotation")


def test_alibi_slopes_check():
    from labsupport.positional import alibi_slopes
    expect(checks.alibi_slopes(alibi_slopes), True, "geometric")
    expect(checks.alibi_slopes(lambda n: [2 ** (-8 * i / n) for i in range(n)]), False, "off by one")
    expect(checks.alibi_slopes(lambda n: [2 ** (-(i + 1)) for i in range(n)]), False, "number of heads")
    expect(checks.alibi_slopes(lambda n: [0.5] * (n - 1)), False, "one per head")


def test_hour_features():
    import math as m
    right = lambda h: torch.stack([torch.sin(2 * m.pi * h / 24), torch.cos(2 * m.pi * h / 24)], -1)
    expect(checks.hour_features(right), True, "wraps")
    expect(checks.hour_features(lambda h: right(h).flip(-1)), False, "order")
    expect(checks.hour_features(lambda h: torch.stack([torch.sin(h / 24), torch.cos(h / 24)], -1)), False, "2 pi")
    expect(checks.hour_features(lambda h: torch.stack([h / 24, h / 24], -1)), False, "repeat every 24")
    expect(checks.hour_features(lambda h: torch.stack([torch.sin(2 * m.pi * h / 12),
                                                       torch.cos(2 * m.pi * h / 12)], -1)), False, "use sin")


def test_untrained_buckets():
    """12.3 exercise 5: the T5 buckets a 111-token causal window reads and 27 tokens never train."""
    from labsupport.checks.positional import bucket_rows_read
    from labsupport.positional import relative_position_bucket as bucket
    assert bucket_rows_read(27) == set(range(20))                       # offsets 0..26
    assert bucket_rows_read(111) - bucket_rows_read(27) == set(range(20, 31))
    right = lambda: sorted({int(b) for b in bucket(torch.arange(111))} - {int(b) for b in bucket(torch.arange(27))})
    expect(checks.untrained_buckets(right), True, "keep their initial values")
    expect(checks.untrained_buckets(lambda: torch.arange(20, 31)), True, "20-30")
    expect(checks.untrained_buckets(lambda: [20.0 + i for i in range(11)]), True, "20-30")
    expect(checks.untrained_buckets(lambda: list(range(27, 111))), False, "offsets, not buckets")
    expect(checks.untrained_buckets(lambda: list(range(20, 32))), False, "offsets from 113 on")
    expect(checks.untrained_buckets(lambda: [12, 13, 14, 15]), False, "one-sided")
    expect(checks.untrained_buckets(lambda: list(range(10, 31))), False, "already reads")
    expect(checks.untrained_buckets(lambda: list(range(21, 31))), False, "offset 27 is new")
    expect(checks.untrained_buckets(lambda: list(range(20, 26))), False, "55 tokens")
    expect(checks.untrained_buckets(lambda: [20, 22]), False, "missing")
    expect(checks.untrained_buckets(lambda: [20.5]), False, "whole bucket numbers")
    expect(checks.untrained_buckets(lambda: 20), False, "a list of bucket numbers")


# --- 12.4 ------------------------------------------------------------------------------

def online(rescale_acc=True, rescale_l=True, shift=True):
    def step(m, l, acc, scores, v):
        m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
        p = (scores - (m_new if shift else 0)).exp()
        fix = (m - m_new).exp() if shift else torch.ones_like(m)
        l = (l * fix if rescale_l else l) + p.sum(-1, keepdim=True)
        acc = (acc * fix if rescale_acc else acc) + p @ v
        return m_new, l, acc
    return step


def test_online_step():
    expect(checks.online_step(online()), True, "exp(m_old - m_new)")
    expect(checks.online_step(online(rescale_acc=False)), False, "multiply the old l and the old acc")
    expect(checks.online_step(online(rescale_l=False)), False, "multiply the old l and the old acc")
    expect(checks.online_step(online(shift=False)), False, "subtract the running maximum")


def test_compress_mean():
    B = lambda s, r: s.shape[0]
    expect(checks.compress_mean(lambda s, r: s.view(B(s, r), -1, r, s.shape[-1]).mean(2)), True, "mean")
    expect(checks.compress_mean(lambda s, r: s[:, ::r]), False, "every 4th state")
    expect(checks.compress_mean(lambda s, r: s.view(B(s, r), r, -1, s.shape[-1]).mean(1)), False,
           "consecutive")
    expect(checks.compress_mean(lambda s, r: s.view(B(s, r), -1, r, s.shape[-1]).sum(2)), False, "mean")


def test_patch_count():
    expect(checks.patch_count(lambda L, P, S: (L - P) // S + 1), True, "+ 1")
    expect(checks.patch_count(lambda L, P, S: (L - P) // S), False, "one short")
    expect(checks.patch_count(lambda L, P, S: L // S), False, "inside the lookback")


def test_kept_fractions():
    expect(checks.kept_fractions(lambda: {24: 0.0, 168: 0.97, 8766: 1.0}), True, "weekly 0.97")
    expect(checks.kept_fractions(lambda: {24: 0.02, 168: 0.93, 8766: 0.99}), True, "within 0.05")
    expect(checks.kept_fractions(lambda: {24: 1.0, 168: 1.0, 8766: 1.0}), False, "one whole period")
    expect(checks.kept_fractions(lambda: {24: 0.0, 168: 0.0, 8766: 1.0}), False, "a seventh of a week")
    expect(checks.kept_fractions(lambda: {24: 0.0, 168: 0.97, 8766: 0.5}), False, "1/365 of a year")
    expect(checks.kept_fractions(lambda: {24: 0, 168: 97, 8766: 100}), False, "not as a percentage")
    expect(checks.kept_fractions(lambda: [0.0, 0.97, 1.0]), False, "keys 24, 168 and 8766")
    expect(checks.kept_fractions(lambda: {24: 0.0, 168: 0.97}), False, "keys 24, 168 and 8766")
    expect(checks.kept_fractions(lambda: {24: "none", 168: 0.97, 8766: 1.0}), False,
           "a fraction for the daily cycle")


def test_kept_fractions_are_measured_as_the_formula_says():
    """A mean over r consecutive hours keeps |sin(pi r / p) / (r sin(pi / p))| of a cycle
    of p hours (the Dirichlet kernel): 0 for p = r, about 0.967 for a week."""
    import math as m

    from labsupport.checks.long_sequences import measured_kept_fractions
    for period, kept in measured_kept_fractions().items():
        want = abs(m.sin(m.pi * 24 / period) / (24 * m.sin(m.pi / period)))
        assert kept == pytest.approx(want, abs=1e-9), period


def test_stride_saving():
    n1, n12 = (336 - 24) // 1 + 1, (336 - 24) // 12 + 1
    expect(checks.stride_saving(lambda: (n1 / n12) ** 2), True, "within 5%")
    expect(checks.stride_saving(lambda: 134), True, "313 to 27 tokens")
    expect(checks.stride_saving(lambda: 12), False, "square of the token count")
    expect(checks.stride_saving(lambda: n1 / n12), False, "square of the token count")
    expect(checks.stride_saving(lambda: 144), False, "S^2 rule")
    expect(checks.stride_saving(lambda: (n12 / n1) ** 2), False, "fraction of the cost that is left")
    expect(checks.stride_saving(lambda: -3), False, "positive factor")
    expect(checks.stride_saving(lambda: 60), False, "square their ratio")


def test_stride_saving_measures_the_score_matrices():
    """The largest tensor is the (B, H, N, N) scores: the ratio is exactly (313 / 27)^2."""
    from labsupport.checks.long_sequences import measured_stride_saving
    ratio, tokens = measured_stride_saving()
    assert tokens == [313, 27]
    assert ratio == pytest.approx(313 ** 2 / 27 ** 2, rel=1e-12)


def test_elu_feature_map():
    expect(checks.elu_feature_map(lambda x: torch.nn.functional.elu(x) + 1), True, "elu(x) + 1")
    expect(checks.elu_feature_map(torch.nn.functional.elu), False, "add 1")
    expect(checks.elu_feature_map(lambda x: torch.relu(x) + 1), False, "not relu")
    expect(checks.elu_feature_map(lambda x: x), False, "positive")
def test_ridge_weights():
    def solve(extra):
        return lambda X, Y, p: torch.linalg.solve(X.T @ X + extra(X, p), X.T @ Y)
    eye = lambda X: torch.eye(X.shape[1], dtype=X.dtype)       # noqa: E731
    expect(checks.ridge_weights(solve(lambda X, p: p * eye(X))), True, "penalty I")
    expect(checks.ridge_weights(lambda X, Y, p: torch.linalg.inv(X.T @ X + p * eye(X)) @ X.T @ Y), True, "")
    expect(checks.ridge_weights(solve(lambda X, p: 0 * eye(X))), False, "without the penalty")
    expect(checks.ridge_weights(solve(lambda X, p: p)), False, "on the diagonal only")
    expect(checks.ridge_weights(solve(lambda X, p: p ** 2 * eye(X))), False, "not squared")
    expect(checks.ridge_weights(solve(lambda X, p: len(X) * p * eye(X))), False, "not scaled")
    expect(checks.ridge_weights(lambda X, Y, p: solve(lambda X, p: p * eye(X))(X, Y, p).T), False,
           "solve for W, not for W^T")
    expect(checks.ridge_weights(lambda X, Y, p: X.T @ Y), False, "(X^T X + penalty I) W = X^T Y")


def test_step_peak_names_the_usual_mistakes():
    """The check measures the peak of a training step and compares; each typical count of
    the (B, H, N, N) matrices gets its own hint."""
    def matrices(count):
        return lambda b, h, n, layers: count(layers) * b * h * n * n * 4
    expect(checks.step_peak(matrices(lambda n: n + 2)), True, "within 10% of the measured peak")
    expect(checks.step_peak(matrices(lambda n: 3 * n)), False, "keeps only what the backward needs")
    expect(checks.step_peak(matrices(lambda n: 2 * n)), False, "keeps only what the backward needs")
    expect(checks.step_peak(matrices(lambda n: n)), False, "the gradient of its weights")
    expect(checks.step_peak(matrices(lambda n: n + 1)), False, "peak of the forward pass")
    expect(checks.step_peak(matrices(lambda n: 2)), False, "so the layers count")
    expect(checks.step_peak(lambda b, h, n, layers: (layers + 2) * b * h * n * n), False, "factor of 4")
    expect(checks.step_peak(lambda b, h, n, layers: (layers + 2) * n * n * 4), False, "batch * heads")
    expect(checks.step_peak(lambda b, h, n, layers: 1e6), False, "times the measured peak")
    expect(checks.step_peak(lambda b, h, n, layers: "40 MB"), False, "return a number of bytes")


def test_step_peak_measures_what_the_model_says():
    """The reference's (layers + 2) matrices, against the allocator: the N x N matrices
    dominate the narrow encoder the check measures (within 6%, never below the model)."""
    from labsupport.checks.lab import STEP_PEAK_CASES, measured_step_peak
    from labsupport.checks.reference import predicted_step_peak
    from labsupport.timing import cpu_peak_supported
    if not cpu_peak_supported():
        pytest.skip("this platform cannot measure CPU peaks")
    for case in STEP_PEAK_CASES:
        ratio = measured_step_peak(*case) / predicted_step_peak(*case)
        assert 1.0 <= ratio <= 1.06, (case, ratio)


# 12.5 Efficient and sparse attention

def test_positive_features():
    import math as m
    right = lambda x, w: torch.exp(x @ w.T - x.pow(2).sum(-1, keepdim=True) / 2) / m.sqrt(w.shape[0])
    expect(checks.positive_features(right), True, "within 5%")
    expect(checks.positive_features(lambda x, w: right(x, w) * m.sqrt(w.shape[0])), False, "divide by sqrt(m)")
    expect(checks.positive_features(lambda x, w: torch.exp(x @ w.T) / m.sqrt(w.shape[0])), False,
           "subtract |x|^2 / 2")
    expect(checks.positive_features(lambda x, w: torch.sin(x @ w.T) / m.sqrt(w.shape[0])), False, "positive")
    expect(checks.positive_features(lambda x, w: torch.exp(x @ w.T)[:, :3]), False, "shape (5, 7)")
    expect(checks.positive_features(lambda x, w: right(x, w) + 1.0), False, "exp(w x - |x|^2 / 2)")


def blocked(previous=True, band=True, causal=True, full=False):
    """Block-local attention through SDPA, right (defaults) and typically wrong."""
    import torch.nn.functional as F

    def fn(q, k, v, block):
        B, H, L, D = q.shape
        if full:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        n = L // block
        qb = q.view(B, H, n, block, D)                                  # (B, H, n, c, D)
        pad = [F.pad(t, (0, 0, block, 0)).view(B, H, n + 1, block, -1) for t in (k, v)]
        k2, v2 = (torch.cat([t[:, :, :-1], t[:, :, 1:]], dim=-2) for t in pad)  # (B, H, n, 2c, D)
        i = torch.arange(block)[:, None] + block
        j = torch.arange(2 * block)[None, :]
        mask = ((j <= i) | (not causal)) & ((j >= i - block) | (not band))   # (c, 2c)
        if not previous:
            mask = mask & (j >= block)
        mask = mask.expand(n, block, 2 * block).clone()
        mask[0] &= j >= block                                            # no block before the first
        return F.scaled_dot_product_attention(qb, k2, v2, attn_mask=mask).view(B, H, L, -1)
    return fn


def test_blocked_local_attention():
    from labsupport.attention import local_attention, naive_attention
    expect(checks.blocked_local_attention(blocked()), True, "largest tensor")
    expect(checks.blocked_local_attention(blocked(full=True)), False, "full causal attention")
    expect(checks.blocked_local_attention(blocked(previous=False, band=False)), False, "block before it")
    expect(checks.blocked_local_attention(blocked(band=False)), False, "mask the band")
    expect(checks.blocked_local_attention(blocked(causal=False)), False, "(the future)")
    through_full = lambda q, k, v, block: local_attention(q, k, v, window=block, is_causal=True) + 0 * (
        naive_attention(q, k, v).sum())
    expect(checks.blocked_local_attention(through_full), False, "as big as the full (L, L) scores")
    expect(checks.blocked_local_attention(lambda q, k, v, block: v * 0), False, "keys i - block .. i")


def decayed(phi=True, include_now=True, decay_z=True, new_only=False):
    """Decayed causal linear attention by its recurrence, right (defaults) and typically wrong."""
    import torch.nn.functional as F

    def fn(q, k, v, gamma):
        fq, fk = (F.elu(q) + 1, F.elu(k) + 1) if phi else (q, k)
        S, z, outs = q.new_zeros(q.shape[-1], v.shape[-1]), q.new_zeros(q.shape[-1]), []
        for t in range(q.shape[0]):
            if not include_now:
                outs.append(fq[t] @ S / (fq[t] @ z).clamp_min(1e-30))
            if new_only:                                   # decays the new term, not the past
                S, z = S + gamma * torch.outer(fk[t], v[t]), z + gamma * fk[t]
            else:
                S = gamma * S + torch.outer(fk[t], v[t])
                z = (gamma if decay_z else 1.0) * z + fk[t]
            if include_now:
                outs.append(fq[t] @ S / (fq[t] @ z))
        return torch.stack(outs)
    return fn


def test_decayed_linear_attention():
    expect(checks.decayed_linear_attention(decayed()), True, "state-space recurrence")
    expect(checks.decayed_linear_attention(decayed(phi=False)), False, "elu(x) + 1")
    expect(checks.decayed_linear_attention(decayed(include_now=False)), False, "attends to itself")
    expect(checks.decayed_linear_attention(decayed(decay_z=False)), False, "normaliser z")
    expect(checks.decayed_linear_attention(decayed(new_only=True)), False, "gamma changed nothing")
    expect(checks.decayed_linear_attention(lambda q, k, v, g: v * g), False, "causal linear_attention")
    expect(checks.decayed_linear_attention(lambda q, k, v, g: decayed()(q, k, v, g ** 2)), False,
           "gamma^(t - j)")


# --- a check is kind to the notebook (issue 17 item 2, issue 19 items 2, 6, 10) ------------

def _rotate_right(x, position):
    from labsupport.checks.positional import _rotate
    return _rotate(x, position)


def _sinusoidal_right(L, d):
    from labsupport.checks.positional import _table
    return _table(L, d)


RIGHT = {   # one right answer per check, written as a student would
    "attention_weights": weights(),
    "causal_attention": causal(),
    "score_matrix_bytes": lambda b, h, L, dt: b * h * L * L * torch.tensor([], dtype=dt).element_size(),
    "split_heads": lambda x, H: x.view(x.shape[0], x.shape[1], H, -1).transpose(1, 2),
    "feed_forward": lambda x, w1, b1, w2, b2: torch.relu(x @ w1.T + b1) @ w2.T + b2,
    "pre_norm_block": lambda x, attn, ff, n1, n2: (lambda h: h + ff(n2(h)))(x + attn(n1(x))),
    "peeks": peeks_right,
    "seasonal_naive": lambda x, p, h: x[:, -p:].repeat(1, -(-h // p), 1)[:, :h],
    "heads_peak_ratio": lambda: (3 * 2 * 512 * 64 + 4 * 2 * 2 * 512 * 512) / (3 * 2 * 512 * 64 + 2 * 2 * 512 * 512),
    "block_parameters": lambda d, h, f: 4 * (d * d + d) + 2 * d * f + f + d + 4 * d,
    "sinusoidal": _sinusoidal_right,
    "rotate_pairs": _rotate_right,
    "alibi_slopes": lambda n: [2 ** (-8 * (i + 1) / n) for i in range(n)],
    "hour_features": lambda h: torch.stack([(2 * torch.pi * h / 24).sin(), (2 * torch.pi * h / 24).cos()], -1),
    "untrained_buckets": lambda: list(range(20, 31)),
    "online_step": online(),
    "compress_mean": lambda s, r: s.view(s.shape[0], -1, r, s.shape[-1]).mean(2),
    "kept_fractions": lambda: {24: 0.0, 168: 0.97, 8766: 1.0},
    "patch_count": lambda L, P, S: (L - P) // S + 1,
    "stride_saving": lambda: ((336 - 24) // 1 + 1) ** 2 / ((336 - 24) // 12 + 1) ** 2,
    "elu_feature_map": lambda x: torch.nn.functional.elu(x) + 1,
    "positive_features": lambda x, w: torch.exp(x @ w.T - x.pow(2).sum(-1, keepdim=True) / 2) / w.shape[0] ** 0.5,
    "blocked_local_attention": blocked(),
    "decayed_linear_attention": decayed(),
    "predicted_peak": lambda: (2 * 2 * 4 * 1024 * 1024 + 2 * 4 * 1024 * 64) * 4,
    "performer_error_exponent": lambda: -0.5,
    "ridge_weights": lambda X, Y, p: torch.linalg.solve(X.T @ X + p * torch.eye(X.shape[1], dtype=X.dtype), X.T @ Y),
    "step_peak": lambda b, h, n, layers: (layers + 2) * b * h * n * n * 4,
}


def test_every_check_has_a_right_answer_here():
    assert sorted(RIGHT) == sorted(checks.CHECKS)
    for name, answer in RIGHT.items():
        expect(checks.CHECKS[name](answer), True, "")


def scribbles_on_its_inputs(answer):
    """A right answer that then overwrites every tensor it was given (as `x += ...`,
    `q /= sqrt(d)` or `F.elu(x, inplace=True)` do)."""
    def fn(*args):
        result = answer(*args)
        result = result.clone() if isinstance(result, torch.Tensor) else result
        for a in args:
            if isinstance(a, torch.Tensor) and a.is_floating_point():
                a.mul_(-3.0).add_(1.0)
        return result
    return fn


TAKES_TENSORS = [n for n in RIGHT if n not in ("score_matrix_bytes", "block_parameters", "sinusoidal",
                                               "alibi_slopes", "patch_count", "peeks", "predicted_peak",
                                               "heads_peak_ratio", "kept_fractions", "stride_saving",
                                               "untrained_buckets", "performer_error_exponent", "step_peak")]


@pytest.mark.parametrize("name", TAKES_TENSORS)
def test_a_right_answer_that_edits_its_inputs_passes_with_a_note(name):
    result = checks.CHECKS[name](scribbles_on_its_inputs(RIGHT[name]))
    expect(result, True, "changed its input")
    expect(result, True, "in place")


def test_the_in_place_answers_students_write_pass():
    import torch.nn.functional as F

    def pre_norm(x, attn, ff, n1, n2):
        x += attn(n1(x))
        x += ff(n2(x))
        return x

    def weights_in_place(q, k):
        q /= q.shape[-1] ** 0.5
        return (q @ k.transpose(-2, -1)).softmax(-1)

    def compress(states, rate):
        states /= rate
        return states.view(states.shape[0], -1, rate, states.shape[-1]).sum(2)

    expect(checks.pre_norm_block(pre_norm), True, "changed its input `x` in place")
    expect(checks.attention_weights(weights_in_place), True, "changed its input `q` in place")
    expect(checks.elu_feature_map(lambda x: F.elu(x, inplace=True) + 1), True, "`x` in place")
    expect(checks.compress_mean(compress), True, "`states` in place")


def test_an_in_place_mistake_names_the_mistake_and_the_edit():
    def no_residual(x, attn, ff, n1, n2):
        x.zero_()
        return ff(n2(attn(n1(x + 1))))
    result = checks.pre_norm_block(no_residual)
    expect(result, False, "changed its input `x` in place")


def draws_random_numbers(answer):
    import random

    import numpy as np

    def fn(*args):
        torch.randn(3), np.random.rand(), random.random()
        return answer(*args)
    return fn


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_a_check_leaves_every_global_generator_as_it_found_it(name):
    import random

    import numpy as np
    torch.manual_seed(123), np.random.seed(123), random.seed(123)
    expected = torch.rand(2), np.random.rand(2), random.random()
    torch.manual_seed(123), np.random.seed(123), random.seed(123)
    checks.CHECKS[name](draws_random_numbers(RIGHT[name]))
    got = torch.rand(2), np.random.rand(2), random.random()
    assert torch.equal(got[0], expected[0]) and (got[1] == expected[1]).all() and got[2] == expected[2]


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_a_function_that_returns_none_is_told_so(name):
    expect(checks.CHECKS[name](lambda *args: None), False, "returned None: end it with `return")


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_something_else_than_a_function_is_named(name):
    expect(checks.CHECKS[name](None), False, "pass your function itself to the check, got NoneType")
    expect(checks.CHECKS[name](torch.ones(3)), False, "got Tensor")


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_a_function_that_hangs_is_stopped_with_a_hint(name, monkeypatch):
    import time

    from labsupport.checks import core
    monkeypatch.setattr(core, "TIME_LIMIT_S", 0.2)
    start = time.monotonic()
    expect(checks.CHECKS[name](lambda *args: time.sleep(30)), False, "ran longer than 0.2 s")
    assert time.monotonic() - start < 5


def test_the_time_limit_gives_an_outer_timer_back():
    import signal
    import time

    from labsupport.checks import core
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *a: fired.append(True))
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with core._time_limit(5.0):
            pass
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0.5 < left <= 1.0                       # the outer timer still runs, not reset to 5 s
        time.sleep(1.2)
        assert fired == [True]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


NUMBER_CHECKS = ["score_matrix_bytes", "block_parameters", "patch_count", "stride_saving", "step_peak"]


@pytest.mark.parametrize("name", NUMBER_CHECKS)
def test_numpy_and_tensor_numbers_are_numbers(name):
    import numpy as np
    right = RIGHT[name]
    expect(checks.CHECKS[name](lambda *a: np.int64(right(*a))), True, "")
    expect(checks.CHECKS[name](lambda *a: float(right(*a))), True, "")
    expect(checks.CHECKS[name](lambda *a: torch.tensor(right(*a))), True, "")
    expect(checks.CHECKS[name](lambda *a: float("nan")), False, "returned nan")
    expect(checks.CHECKS[name](lambda *a: True), False, "got bool")


def test_numpy_bools_and_sequences_are_accepted():
    import numpy as np
    expect(checks.peeks(lambda m, x, t: np.bool_(peeks_right(m, x, t))), True, "catches")
    slopes = RIGHT["alibi_slopes"]
    expect(checks.alibi_slopes(lambda n: np.array(slopes(n))), True, "geometric")
    expect(checks.alibi_slopes(lambda n: torch.tensor(slopes(n), dtype=torch.float32)), True, "geometric")
    expect(checks.alibi_slopes(lambda n: 0.5), False, "should return a list or a tensor of slopes, got float")


TENSOR_CHECKS = [n for n in TAKES_TENSORS if n != "online_step"] + ["sinusoidal"]


@pytest.mark.parametrize("name", TENSOR_CHECKS)
def test_a_right_float32_answer_passes(name):
    right = RIGHT[name]
    expect(checks.CHECKS[name](lambda *a: right(*a).float()), True, "")


@pytest.mark.parametrize("name", [n for n in TENSOR_CHECKS if n != "causal_attention"])
def test_a_nan_answer_is_told_where_the_nan_is(name):
    right = RIGHT[name]

    def with_nan(*args):
        out = right(*args).contiguous().clone()
        out.view(-1)[1] = float("nan")
        return out
    expect(checks.CHECKS[name](with_nan), False, "holds NaN or inf (first at index")


@pytest.mark.parametrize("name", TENSOR_CHECKS)
def test_a_half_precision_answer_is_told_to_keep_the_dtype(name):
    right = RIGHT[name]
    expect(checks.CHECKS[name](lambda *a: right(*a).half()), False, "keeps about 3 digits")


def test_online_step_names_a_malformed_state():
    expect(checks.online_step(lambda m, l, acc, s, v: (m, l)), False, "tuple (m, l, acc), got tuple")
    expect(checks.online_step(lambda m, l, acc, s, v: acc), False, "tuple (m, l, acc), got Tensor")
    expect(checks.online_step(lambda m, l, acc, s, v: (m, l, acc[:, :1])), False,
           "online_step's acc should have shape (5, 3)")


def test_blocked_local_attention_does_not_count_the_checks_copies():
    """The largest-tensor probe wraps the student's code only: a right answer that builds
    no tensor larger than q sees q's own size at most."""
    result = checks.blocked_local_attention(RIGHT["blocked_local_attention"])
    expect(result, True, "the largest tensor had 6144 elements")


def test_predicted_peak_names_the_usual_mistakes():
    B, H, L = 2, 4, 1024
    one = B * H * L * L * 4
    expect(checks.predicted_peak(lambda: 2 * one), True, "within 5% of the measured peak")
    expect(checks.predicted_peak(lambda: one), False, "naive attention holds two at once")
    expect(checks.predicted_peak(lambda: 2 * L * L * 4), False, "for one sequence and one head")
    expect(checks.predicted_peak(lambda: 2 * B * H * L * L), False, "float32 takes 4 bytes")
    expect(checks.predicted_peak(lambda: "69 MB"), False, "return a number of bytes")


def test_performer_error_exponent_names_the_usual_mistakes():
    from labsupport.checks.efficient import EXPONENT_TOLERANCE, SMALL_SCALE, measured_error_exponent
    measured = measured_error_exponent(SMALL_SCALE)
    assert abs(measured + 0.5) < EXPONENT_TOLERANCE / 2, measured   # the Monte Carlo rule, with room
    expect(checks.performer_error_exponent(lambda: -0.5), True, "within 0.1 of the measured")
    expect(checks.performer_error_exponent(lambda: -1.0), False, "its square root")
    expect(checks.performer_error_exponent(lambda: 0.0), False, "does fall with m")
    expect(checks.performer_error_exponent(lambda: 0.5), False, "the exponent is negative")
    expect(checks.performer_error_exponent(lambda: -0.25), False, "more than 0.1 from the measured")
    expect(checks.performer_error_exponent(lambda: "m^-1/2"), False, "return an exponent p")


def test_the_performer_error_exponent_is_deterministic_and_needs_small_inputs():
    from labsupport.checks.efficient import LARGE_SCALE, SMALL_SCALE, performer_error
    assert performer_error(SMALL_SCALE) == performer_error(SMALL_SCALE)
    from labsupport.checks.efficient import measured_error_exponent
    assert measured_error_exponent(LARGE_SCALE) > -0.3       # far from -1/2 on larger inputs
