"""Every self-check passes a right answer and gives the specific hint for known wrong ones."""
import pytest
import torch

from labsupport import checks
from labsupport.checks import NOT_ANSWERED


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
