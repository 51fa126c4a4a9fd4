"""Each kernel declares what it takes where it is defined; layers and models read the
declaration (and refuse what a kernel does not declare), and return_weights never shows the
weights of another kernel."""
from functools import partial

import pytest
import torch
from torch import nn

from helpers import seeded, tol
from labsupport import attention
from labsupport.attention import (
    KERNELS,
    KernelSpec,
    LinformerAttention,
    attention_kernel,
    band_mask,
    kernel_spec,
    linear_attention,
    local_attention,
    longformer_mask,
    naive_attention,
    performer_attention,
)
from labsupport.layers import DecoderBlock, MultiHeadAttention, TransformerBlock
from labsupport.models import PatchTransformer
from labsupport.positional import ALiBi


def test_every_registered_kernel_declares_its_spec_where_it_is_defined():
    expected = {   # name: (mask, bias, causal, dropout, exact)
        "naive": (True, True, True, True, True), "sdpa": (True, True, True, True, True),
        "flash": (True, True, True, False, True), "local": (True, False, True, True, True),
        "longformer": (True, False, True, True, True), "linear": (False, False, True, False, False),
        "performer": (False, False, True, False, False),
    }
    assert sorted(expected) == sorted(KERNELS)
    for name, fields in expected.items():
        spec = kernel_spec(name)
        assert isinstance(spec, KernelSpec)
        assert (spec.mask, spec.bias, spec.causal, spec.dropout, spec.exact) == fields, name
        assert spec is kernel_spec(KERNELS[name])
    assert kernel_spec(local_attention) is local_attention.spec         # declared on the function itself
    lin = LinformerAttention(10, 4)
    assert kernel_spec(lin) is LinformerAttention.spec
    spec = lin.spec
    assert (spec.module, spec.fixed_length, spec.causal, spec.exact) == (True, True, False, False)


def test_partials_inherit_the_spec_and_undeclared_callables_get_the_plain_one():
    assert kernel_spec(partial(partial(local_attention, window=3), block_size=2)) is local_attention.spec
    plain = kernel_spec(lambda q, k, v, *, mask=None, is_causal=False: v)
    assert plain == attention.UNDECLARED and not (plain.bias or plain.dropout or plain.exact)
    with pytest.raises(TypeError, match=r"LinformerAttention is a module class: pass an instance, "
                                        r"e\.g\. LinformerAttention\(\.\.\.\)"):
        MultiHeadAttention(8, 2, kernel=LinformerAttention)


def test_multi_head_attention_reads_dropout_and_bias_from_the_spec():
    seen = {}

    @attention_kernel(mask=True, causal=True, dropout=True, exact=True)
    def declared(q, k, v, *, mask=None, is_causal=False, dropout_p=0.0):
        seen["dropout_p"] = dropout_p
        return naive_attention(q, k, v, mask=mask, is_causal=is_causal)

    mha = MultiHeadAttention(8, 2, kernel=declared, dropout=0.25).train()
    mha(torch.randn(2, 5, 8))
    assert seen["dropout_p"] == 0.25
    mha.eval()(torch.randn(2, 5, 8))
    assert seen["dropout_p"] == 0.0

    def undeclared(q, k, v, *, mask=None, is_causal=False, dropout_p=0.5, bias=None):
        seen["undeclared"] = dropout_p
        return v
    MultiHeadAttention(8, 2, kernel=undeclared).train()(torch.randn(2, 5, 8))
    assert seen["undeclared"] == 0.5                           # no dropout_p passed: none declared
    with pytest.raises(ValueError, match=r"MultiHeadAttention\(dropout=0\.25\): kernel 'undeclared' does "
                                         r"not apply dropout to its attention weights"):
        MultiHeadAttention(8, 2, kernel=undeclared, dropout=0.25)
    with pytest.raises(ValueError, match=r"ALiBi adds a bias to the scores, which kernel 'undeclared' "
                                         r"does not declare \(bias=False\)"):
        MultiHeadAttention(8, 2, kernel=undeclared, position=ALiBi(2))
    with pytest.raises(ValueError, match="kernel 'local_attention' does not declare"):
        MultiHeadAttention(8, 2, kernel="local", position=ALiBi(2))


@pytest.mark.parametrize("name", ["naive", "sdpa", "flash", "local", "longformer"])
@pytest.mark.parametrize("causal", [False, True])
def test_return_weights_shows_the_weights_of_the_kernel_that_ran(name, causal):
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2, kernel=name).eval()
    x = torch.randn(2, 40, 8)
    with torch.no_grad():
        out, weights = mha(x, is_causal=causal, return_weights=True)
        torch.testing.assert_close(out, mha(x, is_causal=causal), **tol(torch.float32))
    assert weights.shape == (2, 2, 40, 40)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 40))
    if name == "local":                                       # window 16: nothing outside the band
        outside = ~band_mask(40, 16, is_causal=causal)
        assert weights[..., outside].abs().max() == 0
    if name == "longformer":
        outside = ~longformer_mask(40, 16, (0,), is_causal=causal)
        assert weights[..., outside].abs().max() == 0 and weights[..., 5, 0].min() > 0


def test_return_weights_with_a_partial_uses_its_options():
    mha = MultiHeadAttention(8, 2, kernel=partial(local_attention, window=2)).eval()
    x = torch.randn(1, 12, 8)
    with torch.no_grad():
        out, weights = mha(x, return_weights=True)
        torch.testing.assert_close(out, mha(x), **tol(torch.float32))
    assert (weights[..., ~band_mask(12, 2)] == 0).all() and (weights[..., band_mask(12, 2)] > 0).all()


@pytest.mark.parametrize("kernel", ["linear", "performer", partial(performer_attention, num_features=8),
                                    linear_attention, seeded(lambda: LinformerAttention(20, 4))])
def test_return_weights_refuses_an_approximate_kernel(kernel):
    mha = MultiHeadAttention(8, 2, kernel=kernel)
    with pytest.raises(ValueError, match=r"return_weights=True: kernel '\w+' is an approximation that "
                                         r"never forms the \(L, S\) weights"):
        mha(torch.randn(2, 20, 8), return_weights=True)


def test_return_weights_refuses_an_undeclared_kernel():
    mha = MultiHeadAttention(8, 2, kernel=lambda q, k, v, *, mask=None, is_causal=False: v)
    with pytest.raises(ValueError, match=r"kernel '<lambda>' declares no explicit weights.*attention_kernel"):
        mha(torch.randn(2, 20, 8), return_weights=True)


def test_patch_transformer_reads_the_spec():
    x = torch.randn(2, 48, 1)
    with pytest.raises(ValueError, match=r"TransformerBlock\(attn_dropout=0\.1\): kernel 'linear_attention' "
                                         r"does not apply dropout"):   # the model's default dropout
        PatchTransformer(lookback=48, horizon=6, patch_len=12, stride=12, kernel="linear")
    model = PatchTransformer(lookback=48, horizon=6, patch_len=12, stride=12, kernel="linear", d_model=8,
                             n_heads=2, attn_dropout=0.0)
    with pytest.raises(ValueError, match="kernel 'linear_attention' is an approximation"):
        model(x, return_weights=True)
    with pytest.raises(ValueError, match="kernel 'LinformerAttention' cannot be causal"):
        PatchTransformer(lookback=48, horizon=6, patch_len=12, stride=12, kernel=LinformerAttention(4, 2))
    assert attention.kernel_name("longformer") == "longformer_attention"

    class Pooled(nn.Module):
        """A fixed-length kernel that is not Linformer: the model must read the spec, not the class."""
        spec = KernelSpec(causal=False, module=True, fixed_length=True)

        def __init__(self, seq_len):
            super().__init__()
            self.seq_len = seq_len

        def forward(self, q, k, v, *, mask=None, is_causal=False):
            return v.mean(-2, keepdim=True).expand(*q.shape[:-1], v.shape[-1])

    with pytest.raises(ValueError, match=r"kernel Pooled\(seq_len=5\) does not fit this model's 4 patch "
                                         r"tokens; build it with Pooled\(seq_len=4, \.\.\.\)"):
        PatchTransformer(lookback=48, horizon=6, patch_len=12, stride=12, kernel=Pooled(5), causal=False)
    with pytest.raises(ValueError, match=r"kernel 'Pooled' cannot be causal; pass causal=False"):
        PatchTransformer(lookback=48, horizon=6, patch_len=12, stride=12, kernel=Pooled(4))
    fits = PatchTransformer(lookback=48, horizon=6, patch_len=12, stride=12, kernel=Pooled(4), causal=False,
                            d_model=8, n_heads=2, attn_dropout=0.0)
    assert fits(x).shape == (2, 6, 1)


def test_causal_is_opt_in_and_the_layers_refuse_a_causal_call_to_a_kernel_that_does_not_declare_it():
    assert KernelSpec().causal is False
    assert attention.UNDECLARED.causal and attention.UNDECLARED.mask     # passed through, unchecked

    @attention_kernel(mask=True, exact=True)
    def bidirectional(q, k, v, *, mask=None, is_causal=False):
        return naive_attention(q, k, v, mask=mask, is_causal=is_causal)

    x = torch.randn(2, 5, 8)
    mha = MultiHeadAttention(8, 2, kernel=bidirectional)
    assert mha(x).shape == (2, 5, 8)
    refused = (r"is_causal=True: kernel 'bidirectional' cannot be causal: it does not declare "
               r"causal=True \(@attention_kernel\(\.\.\., causal=True\)\); call it with is_causal=False, "
               r"or use a causal kernel: .*'flash'")
    for call in (lambda: mha(x, is_causal=True), lambda: mha(x[:, 3:], x, is_causal=True),
                 lambda: TransformerBlock(8, 2, 16, kernel=bidirectional)(x, is_causal=True),
                 lambda: DecoderBlock(8, 2, 16, kernel=bidirectional)(x, x)):    # causal self-attention
        with pytest.raises(ValueError, match=refused):
            call()
    seen = {}

    def plain(q, k, v, *, mask=None, is_causal=False):
        seen["is_causal"] = is_causal
        return v
    MultiHeadAttention(8, 2, kernel=plain)(x, is_causal=True)
    assert seen["is_causal"] is True                                    # UNDECLARED passes it through


def test_every_kernel_that_takes_is_causal_declares_it():
    """Where a kernel is defined it says causal=True; the layers then let causal calls through,
    and the one kernel that cannot be causal (Linformer) is refused there, by name."""
    for name in KERNELS:
        assert kernel_spec(name).causal, name
    x = torch.randn(2, 10, 8)
    with pytest.raises(ValueError, match=r"kernel 'LinformerAttention' cannot be causal"):
        MultiHeadAttention(8, 2, kernel=LinformerAttention(10, 4))(x, is_causal=True)
