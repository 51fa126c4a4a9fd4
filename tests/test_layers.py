import pytest
import torch
from torch import nn

from helpers import policy_error, tol
from labsupport.attention import causal_mask
from labsupport.layers import (
    DecoderBlock,
    FeedForward,
    MultiHeadAttention,
    TransformerBlock,
    TransformerEncoder,
)
from labsupport.positional import ALiBi, RelativePositionBias, RotaryEmbedding, XLRelativePosition


def pair(d_model=16, n_heads=4, kernel="sdpa", bias=True):
    torch_mha = nn.MultiheadAttention(d_model, n_heads, batch_first=True, bias=bias).eval()
    ours = MultiHeadAttention(d_model, n_heads, kernel=kernel, bias=bias).load_torch_weights(torch_mha).eval()
    return ours, torch_mha


@pytest.mark.parametrize("kernel", ["naive", "sdpa"])
@pytest.mark.parametrize("bias", [True, False])
def test_self_attention_matches_torch(kernel, bias):
    ours, ref = pair(kernel=kernel, bias=bias)
    x = torch.randn(3, 10, 16)
    expected, _ = ref(x, x, x, need_weights=False)
    torch.testing.assert_close(ours(x), expected, **tol(torch.float32))


@pytest.mark.parametrize("kernel", ["naive", "sdpa"])
def test_cross_attention_with_L_not_S_matches_torch(kernel):
    ours, ref = pair(kernel=kernel)
    x, context = torch.randn(2, 5, 16), torch.randn(2, 9, 16)
    expected, _ = ref(x, context, context, need_weights=False)
    torch.testing.assert_close(ours(x, context), expected, **tol(torch.float32))


def test_causal_matches_torch_with_its_inverted_mask():
    ours, ref = pair()
    x = torch.randn(2, 7, 16)
    allowed = causal_mask(7)
    expected, _ = ref(x, x, x, attn_mask=~allowed, need_weights=False)   # torch: True = blocked
    torch.testing.assert_close(ours(x, is_causal=True), expected, **tol(torch.float32))
    torch.testing.assert_close(ours(x, mask=allowed), expected, **tol(torch.float32))


def test_per_head_weights_match_torch():
    ours, ref = pair()
    x = torch.randn(2, 6, 16)
    expected_out, expected_w = ref(x, x, x, need_weights=True, average_attn_weights=False)
    out, w = ours(x, return_weights=True)
    assert w.shape == (2, 4, 6, 6)
    torch.testing.assert_close(w, expected_w, **tol(torch.float32))
    torch.testing.assert_close(out, expected_out, **tol(torch.float32))


def test_gradients_flow_and_match_torch():
    ours, ref = pair()
    x = torch.randn(2, 5, 16, requires_grad=True)
    ours(x).sum().backward()
    g_ours = x.grad.clone()
    x.grad = None
    ref(x, x, x, need_weights=False)[0].sum().backward()
    torch.testing.assert_close(g_ours, x.grad, **tol(torch.float32))


def test_bad_configuration_and_inputs():
    with pytest.raises(ValueError, match="d_model 10 is not divisible by n_heads 4"):
        MultiHeadAttention(10, 4)
    with pytest.raises(ValueError, match="n_heads must be a positive int"):
        MultiHeadAttention(8, 0)
    with pytest.raises(ValueError, match="unknown attention kernel"):
        MultiHeadAttention(8, 2, kernel="fast")
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"x must be \(B, L, d_model\) \(3 dims\), got shape \(5, 8\)"):
        mha(torch.randn(5, 8))
    with pytest.raises(ValueError, match=r"expected x \(B, L, 8\)"):
        mha(torch.randn(1, 5, 6))
    with pytest.raises(ValueError, match="embed_dim 16"):
        mha.load_torch_weights(nn.MultiheadAttention(16, 2))
    with pytest.raises(ValueError, match="bias differs"):
        mha.load_torch_weights(nn.MultiheadAttention(8, 2, bias=False))


def test_dropout_only_in_training():
    mha = MultiHeadAttention(8, 2, dropout=0.5, kernel="naive")
    x = torch.randn(1, 6, 8)
    mha.eval()
    torch.testing.assert_close(mha(x), mha(x))
    mha.train()
    assert not torch.allclose(mha(x), mha(x))


# --- causality with fewer queries than keys: bottom-right, as a cache needs ---

POSITIONS = {"none": lambda: None, "rope": lambda: RotaryEmbedding(4), "alibi": lambda: ALiBi(4),
             "relative": lambda: RelativePositionBias(4, bidirectional=False),
             "xl": lambda: XLRelativePosition(4, 4)}


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("kernel", ["naive", "sdpa", "flash"])
def test_a_cached_decoding_step_equals_the_same_step_of_a_full_causal_pass(kernel, position):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, kernel=kernel, position=POSITIONS[position]()).double().eval()
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    full = mha(x, is_causal=True)
    for t in (8, 5, 0):                   # one new token, a chunk of four, every token
        step = mha(x[:, t:], x, is_causal=True)               # queries: the newest tokens; keys: all
        torch.testing.assert_close(step, full[:, t:], **tol(torch.float64))
    out, weights = mha(x[:, 5:], x, is_causal=True, return_weights=True)
    torch.testing.assert_close(out, full[:, 5:], **tol(torch.float64))
    assert weights[..., ~causal_mask(4, 9, bottom_right=True)].abs().max() == 0


def test_causal_with_more_queries_than_keys_is_bottom_right_too():
    mha = MultiHeadAttention(16, 4, kernel="naive").eval()
    x, context = torch.randn(2, 6, 16), torch.randn(2, 4, 16)
    allowed = causal_mask(6, 4, bottom_right=True)                # the first two queries see no key
    assert allowed.sum(-1).tolist() == [0, 0, 1, 2, 3, 4]
    torch.testing.assert_close(mha(x, context, is_causal=True), mha(x, context, mask=allowed))
    padding = torch.tensor([True, True, True, False])           # a user mask is kept, and combined
    torch.testing.assert_close(mha(x, context, mask=padding, is_causal=True),
                               mha(x, context, mask=allowed & padding))


def test_causal_with_fewer_queries_needs_a_kernel_that_takes_a_mask():
    x = torch.randn(1, 6, 16)
    with pytest.raises(ValueError, match="kernel .linear_attention. takes no mask; use naive, sdpa or flash"):
        MultiHeadAttention(16, 4, kernel="linear")(x[:, 4:], x, is_causal=True)


# --- attention dropout: applied by the kernel, or refused by name ---------------------------

def undeclared_kernel(q, k, v, *, mask=None, is_causal=False):
    return v


@pytest.mark.parametrize("kernel", ["flash", "linear", "performer", undeclared_kernel],
                         ids=["flash", "linear", "performer", "undeclared"])
def test_attention_dropout_that_the_kernel_cannot_apply_is_refused(kernel):
    fix = r"dropout=0\.0, or a kernel that applies dropout to its weights: 'sdpa' or 'naive'"
    with pytest.raises(ValueError, match=r"MultiHeadAttention\(dropout=0\.1\): kernel '\w+' does not "
                                         r"apply dropout to its attention weights.*pass " + fix):
        MultiHeadAttention(8, 2, kernel=kernel, dropout=0.1)
    block_refused = r"TransformerBlock\(attn_dropout=0\.1\).*kernel '\w+'.*pass attn_" + fix
    with pytest.raises(ValueError, match=block_refused):
        TransformerBlock(8, 2, 16, dropout=0.1, kernel=kernel)            # attn_dropout defaults to dropout
    with pytest.raises(ValueError, match=r"DecoderBlock\(attn_dropout=0\.2\).*pass attn_" + fix):
        DecoderBlock(8, 2, 16, dropout=0.2, kernel=kernel)
    with pytest.raises(ValueError, match=r"TransformerBlock\(attn_dropout=0\.3\)"):
        TransformerEncoder(8, 2, 2, 16, kernel=kernel, attn_dropout=0.3)
    # no attention dropout: the kernel is fine, and dropout still acts on the sub-layers
    block = TransformerBlock(8, 2, 16, dropout=0.1, attn_dropout=0.0, kernel=kernel)
    assert block.attn.dropout == 0.0 and block.ff.dropout.p == 0.1 and block.drop1.p == 0.1
    assert DecoderBlock(8, 2, 16, dropout=0.1, attn_dropout=0.0, kernel=kernel).drops[0].p == 0.1
    assert MultiHeadAttention(8, 2, kernel=kernel).dropout == 0.0


def test_a_decoder_blocks_attention_dropout_is_its_own_setting():
    block = DecoderBlock(8, 2, 16, dropout=0.0, attn_dropout=0.5, kernel="naive").train()
    x, memory = torch.randn(2, 5, 8), torch.randn(2, 7, 8)
    assert block.self_attn.dropout == block.cross_attn.dropout == 0.5
    assert not torch.allclose(block(x, memory), block(x, memory))
    assert DecoderBlock(8, 2, 16, dropout=0.3).cross_attn.dropout == 0.3     # default: dropout


@pytest.mark.parametrize("build", [
    lambda p: MultiHeadAttention(8, 2, dropout=p),
    lambda p: FeedForward(8, 16, dropout=p),
    lambda p: TransformerBlock(8, 2, 16, dropout=p),
    lambda p: TransformerBlock(8, 2, 16, attn_dropout=p),
    lambda p: TransformerEncoder(8, 2, 1, 16, dropout=p),
    lambda p: DecoderBlock(8, 2, 16, dropout=p),
    lambda p: DecoderBlock(8, 2, 16, attn_dropout=p),
], ids=["MultiHeadAttention", "FeedForward", "TransformerBlock", "attn_dropout", "TransformerEncoder",
        "DecoderBlock", "DecoderBlock attn_dropout"])
@pytest.mark.parametrize("rate", [1.0, -0.1, float("nan"), True, "0.1"], ids=str)
def test_every_module_takes_a_dropout_rate_in_zero_one(build, rate):
    """One validator (validation.check_dropout) in every module: 1.0 would drop everything."""
    with pytest.raises(policy_error(rate), match=r"dropout must be a number in \[0, 1\), got "):
        build(rate)
