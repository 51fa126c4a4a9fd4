"""Tests of the self-checks of 12.2 that go beyond the generic ones of tests/test_checks.py
(every answer of tests/wrong_answers/transformer.py runs there): the references the checks
compare with are what the exercises say they are."""
import torch
from torch import nn

from labsupport import checks, layers
from labsupport.checks.core import Draw
from labsupport.sections import transformer  # noqa: F401  (registers its checks)
from labsupport.sections.transformer.checks import (
    DecoderParts,
    _layer_norm,
    _norm_cases,
    _sampled,
    block_count,
    full_pass_last,
)
from test_checks import RIGHT, expect


def test_the_count_is_the_pre_norm_blocks_and_the_same_as_pytorchs_layer():
    """The block of the page holds nn.TransformerEncoderLayer's parameters, whatever the heads."""
    for d, H, f in ((64, 4, 256), (12, 3, 5), (8, 1, 8)):
        layer = nn.TransformerEncoderLayer(d, H, f, batch_first=True, norm_first=True)
        assert block_count(d, H, f) == sum(p.numel() for p in layer.parameters())
    assert block_count(64, 1, 128) == block_count(64, 8, 128)


def test_the_layer_norm_reference_is_pytorchs_layer_norm_on_every_case():
    """Practice and graded cases alike, the constant token and the large eps among them."""
    for draw in (Draw(), Draw(7, graded=True)):
        for case in _norm_cases(draw):
            x, weight, bias = case.args
            norm = nn.LayerNorm(x.shape[-1], eps=case.kwargs["eps"]).double()
            with torch.no_grad():
                norm.weight.copy_(weight)
                norm.bias.copy_(bias)
                torch.testing.assert_close(case(_layer_norm), norm(x))


def test_one_step_is_the_last_row_of_pytorchs_causal_decoder_layer():
    """The step's reference, the block's full causal pass, is nn.TransformerDecoderLayer's."""
    torch.manual_seed(0)
    layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=True).double().eval()
    parts = DecoderParts(layers.DecoderBlock(8, 2, 16).double().eval().load_torch_weights(layer))
    x, memory = torch.randn(2, 6, 8, dtype=torch.float64), torch.randn(2, 4, 8, dtype=torch.float64)
    mask = nn.Transformer.generate_square_subsequent_mask(6, dtype=torch.float64)
    with torch.no_grad():
        expected = layer(x, memory, tgt_mask=mask)[:, -1:]
        torch.testing.assert_close(full_pass_last(parts, x, memory), expected)
        torch.testing.assert_close(RIGHT["decode_step"](parts, x, memory), expected)


def test_scheduled_sampling_with_every_hour_true_is_teacher_forcing_and_with_none_free_running():
    last, truth, forecasts = torch.zeros(2, 1, 1), torch.randn(2, 5, 1), torch.randn(2, 5, 1)
    teacher = torch.cat([last, truth[:, :-1]], 1)
    assert torch.equal(_sampled(last, truth, forecasts, torch.zeros(2, 5, dtype=torch.bool)), teacher)
    assert torch.equal(_sampled(last, truth, forecasts, torch.ones(2, 5, dtype=torch.bool))[:, 1:],
                       forecasts[:, :-1])


def test_every_practice_case_of_scheduled_sampling_holds_both_choices():
    from labsupport.sections.transformer.checks import _sampling_cases
    for draw in (Draw(), Draw(7, graded=True)):
        for case in _sampling_cases(draw):
            sample = case.args[3]
            assert sample.any() and not sample.all()


def test_a_step_that_reruns_every_position_is_told_so_even_when_its_output_is_right():
    def rerun(block, x, memory):
        return block(x, memory)[:, -1:]
    expect(checks.CHECKS["decode_step"](rerun), False, "asked self-attention about")
    expect(checks.graded("decode_step", RIGHT["decode_step"], seed=5), True)
