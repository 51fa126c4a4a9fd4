import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers import tol
from labsupport.attention import causal_mask
from labsupport.layers import DecoderBlock, FeedForward, TransformerBlock, TransformerEncoder
from labsupport.positional import RotaryEmbedding


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kernel", ["sdpa", "naive"])
def test_block_matches_torch_encoder_layer(norm_first, causal, kernel):
    ref = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    ours = TransformerBlock(32, 4, 64, norm_first=norm_first, kernel=kernel).load_torch_weights(ref).eval()
    x = torch.randn(3, 11, 32)
    if causal:
        expected = ref(x, src_mask=~causal_mask(11), is_causal=True)      # torch: True = blocked
    else:
        expected = ref(x)
    torch.testing.assert_close(ours(x, is_causal=causal), expected, **tol(torch.float32))


@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_block_matches_torch_decoder_layer(norm_first):
    ref = nn.TransformerDecoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    ours = DecoderBlock(32, 4, 64, norm_first=norm_first).load_torch_weights(ref).eval()
    x, memory = torch.randn(2, 7, 32), torch.randn(2, 12, 32)
    expected = ref(x, memory, tgt_mask=~causal_mask(7), tgt_is_causal=True)
    torch.testing.assert_close(ours(x, memory), expected, atol=2e-6, rtol=1e-5)
    out, weights = ours(x, memory, return_weights=True)
    assert weights.shape == (2, 4, 7, 12)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 7))


def test_load_weights_refuses_a_different_norm_placement():
    with pytest.raises(ValueError, match="norm_first differs"):
        TransformerBlock(8, 2, norm_first=True).load_torch_weights(
            nn.TransformerEncoderLayer(8, 2, batch_first=True, norm_first=False))


def perturbed_after(x, t):
    y = x.clone()
    y[:, t + 1:] += 3 * torch.randn_like(y[:, t + 1:])
    return y


@pytest.mark.parametrize("norm_first", [True, False])
def test_causal_block_and_encoder_never_peek(norm_first):
    block = TransformerBlock(16, 4, 32, norm_first=norm_first).eval()
    encoder = TransformerEncoder(16, 4, 3, 32, norm_first=norm_first).eval()
    x = torch.randn(2, 10, 16)
    for module in (block, encoder):
        for t in (0, 4, 8):
            a, b = module(x, is_causal=True), module(perturbed_after(x, t), is_causal=True)
            torch.testing.assert_close(a[:, : t + 1], b[:, : t + 1])
            assert not torch.allclose(a[:, t + 1:], b[:, t + 1:])
        assert not torch.allclose(module(x)[:, :5], module(perturbed_after(x, 4))[:, :5])   # not causal


def test_feed_forward_is_position_wise():
    ff = FeedForward(8, 16)
    x = torch.randn(2, 6, 8)
    perm = torch.randperm(6)
    torch.testing.assert_close(ff(x[:, perm]), ff(x)[:, perm])
    torch.testing.assert_close(ff(x[:, 2:3]), ff(x)[:, 2:3])
    with pytest.raises(ValueError, match="activation must be one of"):
        FeedForward(8, 16, activation="tanh")


def test_encoder_returns_weights_per_layer():
    encoder = TransformerEncoder(16, 4, 3).eval()
    out, weights = encoder(torch.randn(2, 9, 16), is_causal=True, return_weights=True)
    assert out.shape == (2, 9, 16) and len(weights) == 3 and weights[0].shape == (2, 4, 9, 9)
    assert weights[1][..., ~causal_mask(9)].abs().max() == 0


# --- PatchTST's backbone (BatchNorm over the tokens, attention-weight dropout apart) ---

def test_batch_norm_normalises_each_feature_over_every_token_as_patchtst_does():
    from labsupport.layers import make_norm
    norm = make_norm("batch", 6)
    x = 3.0 * torch.randn(4, 9, 6) + torch.arange(6.0)                 # (B, L, d_model)
    y = norm(x)                                                        # training mode: batch statistics
    mean, var = x.mean(dim=(0, 1)), x.var(dim=(0, 1), unbiased=False)  # over B*L tokens, per feature
    torch.testing.assert_close(y, (x - mean) / (var + norm.eps).sqrt(), atol=1e-5, rtol=1e-5)
    ref = nn.BatchNorm1d(6)                                            # PatchTST: transpose, BatchNorm1d
    torch.testing.assert_close(y, ref(x.transpose(1, 2)).transpose(1, 2), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(norm.running_mean, ref.running_mean)
    norm.eval()
    torch.testing.assert_close(norm(x[:1]), ref.eval()(x[:1].transpose(1, 2)).transpose(1, 2))
    assert isinstance(make_norm("layer", 6), nn.LayerNorm)
    with pytest.raises(ValueError, match=r"norm must be 'layer' or 'batch', got 'group'"):
        make_norm("group", 6)


def test_block_norm_option_builds_its_norms_and_post_norm_output_is_batch_normalised():
    from labsupport.layers import make_norm
    block = TransformerBlock(8, 2, 16, norm="batch", norm_first=False)
    assert all(type(n) is type(make_norm("batch", 8)) for n in (block.norm1, block.norm2))
    out = block(torch.randn(5, 7, 8))                 # post-norm: the last step is norm2, per feature
    torch.testing.assert_close(out.mean(dim=(0, 1)), torch.zeros(8), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.var(dim=(0, 1), unbiased=False), torch.ones(8), atol=1e-3, rtol=0)
    encoder = TransformerEncoder(8, 2, 2, 16, norm="batch", norm_first=True)
    assert type(encoder.norm) is type(make_norm("batch", 8))
    assert all(type(layer.norm1) is nn.LayerNorm for layer in TransformerEncoder(8, 2, 2).layers)
    with pytest.raises(ValueError, match=r"load_torch_weights needs norm='layer'.*got norm='batch'"):
        block.load_torch_weights(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True))


def test_attention_weight_dropout_is_its_own_setting():
    x = torch.randn(2, 6, 8)
    only_attention = TransformerBlock(8, 2, 16, dropout=0.0, attn_dropout=0.5).train()
    assert not torch.allclose(only_attention(x), only_attention(x))
    residual_only = TransformerBlock(8, 2, 16, dropout=0.5, attn_dropout=0.0)
    assert residual_only.attn.dropout == 0.0 and residual_only.ff.dropout.p == 0.5
    assert TransformerBlock(8, 2, 16, dropout=0.3).attn.dropout == 0.3      # default: as before
    assert all(layer.attn.dropout == 0.0 for layer in TransformerEncoder(8, 2, 2, dropout=0.2,
                                                                         attn_dropout=0.0).layers)


# --- the blocks are their Math lines (pins the outputs the notebooks check) ----------------
# The formulas are written here with torch.nn.functional on the blocks' own parameters:
# layer_norm, linear, softmax attention written out per head, relu. Nothing of the module
# under test runs in them.

BLOCK_VARIANTS = {
    "pre-norm": {},
    "post-norm": dict(norm_first=False),
    "residual, no LayerNorm": dict(layer_norm=False),
    "no residual, no LayerNorm": dict(residual=False, layer_norm=False),
    "post-norm, no residual": dict(norm_first=False, residual=False),
}


def seeded(cls, *args, **options):
    torch.manual_seed(0)
    return cls(*args, **options).double().eval()


def fixed_input(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)


def layer_norm(norm):
    """LN by its formula (``F.layer_norm``) with a norm module's own scale, shift and eps."""
    return lambda h: F.layer_norm(h, h.shape[-1:], norm.weight, norm.bias, norm.eps)


def identity(h):
    return h


def linear(layer, h):
    """``h W^T + b`` with a linear layer's own weight and bias."""
    return F.linear(h, layer.weight, layer.bias)


def attention_formula(attn, h, context=None, *, causal=False):
    """``concat_h softmax(Q_h K_h^T / sqrt(d_h)) V_h Wo`` with attn's projections; causal:
    query i sees keys j <= i + S - L (the queries are the last L of the S tokens)."""
    context = h if context is None else context
    (B, L, d), S, H = h.shape, context.shape[1], attn.n_heads
    q = linear(attn.q_proj, h).view(B, L, H, d // H).transpose(1, 2)            # (B, H, L, d_h)
    k = linear(attn.k_proj, context).view(B, S, H, d // H).transpose(1, 2)      # (B, H, S, d_h)
    v = linear(attn.v_proj, context).view(B, S, H, d // H).transpose(1, 2)      # (B, H, S, d_h)
    scores = q @ k.transpose(-2, -1) / (d // H) ** 0.5                          # (B, H, L, S)
    if causal:
        i, j = torch.arange(L)[:, None], torch.arange(S)[None, :]
        scores = scores.masked_fill(j > i + S - L, float("-inf"))
    heads = scores.softmax(dim=-1) @ v                                          # (B, H, L, d_h)
    return linear(attn.out_proj, heads.transpose(1, 2).reshape(B, L, d))        # (B, L, d)


def ffn_formula(ff, h):
    """``W2 relu(W1 h + b1) + b2`` with the FFN's own weights (the blocks' default activation)."""
    return linear(ff.linear2, F.relu(linear(ff.linear1, h)))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("variant", BLOCK_VARIANTS)
def test_block_is_its_math_line(variant, causal):
    """Each ablation equals its formula; what the formula drops is read from the options, not
    from the block under test (a block that ignored ``layer_norm=False`` would fail here)."""
    options = BLOCK_VARIANTS[variant]
    block = seeded(TransformerBlock, 16, 4, 32, **options)
    x = fixed_input(2, 7, 16)
    keep = 1.0 if options.get("residual", True) else 0.0          # the residual ablation drops the x +
    if options.get("layer_norm", True):
        ln1, ln2 = layer_norm(block.norm1), layer_norm(block.norm2)
    else:
        ln1 = ln2 = identity

    def attn(h):
        return attention_formula(block.attn, h, causal=causal)

    if options.get("norm_first", True):                   # x = x + MHA(LN1(x)); x = x + FFN(LN2(x))
        h = keep * x + attn(ln1(x))
        expected = keep * h + ffn_formula(block.ff, ln2(h))
    else:                                                  # x = LN1(x + MHA(x)); x = LN2(x + FFN(x))
        h = ln1(keep * x + attn(x))
        expected = ln2(keep * h + ffn_formula(block.ff, h))
    torch.testing.assert_close(block(x, is_causal=causal), expected, **tol(torch.float64))
    out, weights = block(x, is_causal=causal, return_weights=True)
    torch.testing.assert_close(out, expected, **tol(torch.float64))
    assert weights.shape == (2, 4, 7, 7)


@pytest.mark.parametrize("options", [{}, dict(layer_norm=False), dict(norm_first=False)],
                         ids=["pre-norm", "no LayerNorm", "post-norm"])
def test_encoder_is_its_blocks_then_a_final_norm_in_pre_norm_only(options):
    encoder = seeded(TransformerEncoder, 16, 4, 3, 32, **options)
    x = fixed_input(2, 7, 16)
    h = x
    for block in encoder.layers:
        h = block(h)
    final = layer_norm(encoder.norm) if options == {} else identity
    assert torch.equal(encoder(x), final(h))


@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_block_is_its_math_line(norm_first):
    block = seeded(DecoderBlock, 16, 4, 32, norm_first=norm_first)
    x, memory = fixed_input(2, 5, 16), fixed_input(2, 9, 16)
    n1, n2, n3 = (layer_norm(norm) for norm in block.norms)

    def self_attn(h):
        return attention_formula(block.self_attn, h, causal=True)

    def cross_attn(h):
        return attention_formula(block.cross_attn, h, memory)

    def ff(h):
        return ffn_formula(block.ff, h)

    if norm_first:
        h = x + self_attn(n1(x))
        h = h + cross_attn(n2(h))
        expected = h + ff(n3(h))
    else:
        h = n1(x + self_attn(x))
        h = n2(h + cross_attn(h))
        expected = n3(h + ff(h))
    torch.testing.assert_close(block(x, memory), expected, **tol(torch.float64))


@pytest.mark.parametrize("norm_first", [True, False])
def test_block_with_a_prefix_equals_the_block_over_the_whole_sequence(norm_first):
    block = seeded(TransformerBlock, 16, 4, 32, norm_first=norm_first)
    x = fixed_input(2, 9, 16)
    full = block(x, is_causal=True)
    for P in (0, 4, 8):                  # cached inputs of the block, then the new tokens
        torch.testing.assert_close(block(x[:, P:], prefix=x[:, :P], is_causal=True), full[:, P:],
                                   **tol(torch.float64))
    positions = torch.arange(9) * 2.5                           # positions cover prefix and x
    rope = seeded(TransformerBlock, 16, 4, 32, position=RotaryEmbedding(4))
    torch.testing.assert_close(rope(x[:, 4:], prefix=x[:, :4], positions=positions, is_causal=True),
                               rope(x, positions=positions, is_causal=True)[:, 4:], **tol(torch.float64))
    with pytest.raises(ValueError,
                       match=r"prefix must be \(B, P, d_model\) = \(2, P, 16\) .* got \(1, 4, 16\)"):
        rope(x[:, 4:], prefix=x[:1, :4])
    with pytest.raises(ValueError, match=r"positions cover prefix and x: \(P \+ L,\) = \(9,\) .* got \(5,\)"):
        rope(x[:, 4:], prefix=x[:, :4], positions=positions[4:])
