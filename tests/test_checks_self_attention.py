"""Tests of the self-checks of 12.1 that go beyond the generic ones of tests/test_checks.py
(every answer of tests/wrong_answers/self_attention.py runs there)."""
import math

import torch

from labsupport import checks
from labsupport.checks.core import Draw
from labsupport.sections import self_attention  # noqa: F401  (registers its checks)
from test_checks import GRADED_SEEDS, expect

DRAWS = [Draw(), *(Draw(seed, graded=True) for seed in (*GRADED_SEEDS, 11, 12, 13))]



def right_scale(d, sigma_q, sigma_k):
    return 1 / (math.sqrt(d) * sigma_q * sigma_k)


def test_the_scale_is_judged_by_the_measured_spread_within_its_tolerance():
    """2% off passes (the measurement's noise is well below the 5% allowed), 9% off does not,
    and the hint says how far the measured spread is, without the scale that was expected."""
    expect(checks.CHECKS["unit_scale"](lambda d, sq, sk: 1.02 * right_scale(d, sq, sk)), True, "within 5%")
    result = checks.CHECKS["unit_scale"](lambda d, sq, sk: 1.09 * right_scale(d, sq, sk))
    expect(result, False, "standard deviation about")
    expect(result, False, "% too large (measured on 20,000 pairs)")


def test_the_scale_settings_tell_every_mistake_apart():
    """On every draw the spreads differ from one and from each other, so that no two of the
    mistakes (nor a mistake and the right scale) give the same factors at every setting."""
    mistakes = checks.CHECKS["unit_scale"].body.__globals__["SCALE_MISTAKES"]
    for draw in DRAWS:
        cases = checks.CHECKS["unit_scale"].body.__globals__["_scale_cases"](draw)
        factors = [tuple(round(f(*c.args), 12) for c in cases) for _, f in mistakes]
        right = tuple(round(right_scale(*c.args), 12) for c in cases)
        hints = {}
        for (hint, _), got in zip(mistakes, factors):
            assert got != right, hint
            hints.setdefault(got, set()).add(hint)
        assert all(len(h) == 1 for h in hints.values()), hints


def test_autograd_is_refused_in_the_practice_check_too():
    def with_autograd(s, v):
        s = s.detach().requires_grad_()
        (s.softmax(-1) * v).sum().backward()
        return s.grad
    expect(checks.CHECKS["score_gradient"](with_autograd), False, "calls torch.Tensor.backward")
    assert torch.ones(2, requires_grad=True).sum().backward() is None      # given back afterwards


def test_a_gradient_that_does_not_sum_to_zero_is_told_why():
    expect(checks.CHECKS["score_gradient"](lambda s, v: s.softmax(-1) * v + 0.01), False,
           "does not sum to zero over the keys")


def test_every_padded_batch_pads_queries_and_keys_with_different_lengths():
    for draw in DRAWS:
        for case in checks.CHECKS["padded_attention"].body.__globals__["_padding_cases"](draw):
            q, k, _, q_lens, k_lens = case.args
            assert (q_lens < q.shape[1]).any() or case.args[0].shape[0] == 1
            assert (k_lens < k.shape[1]).any() and (k_lens == k.shape[1]).any()
            assert not torch.equal(q_lens, k_lens) and q.shape[1] >= 1


def test_every_grouped_draw_has_groups_of_more_than_one_and_fewer_than_all():
    for draw in DRAWS:
        cases = checks.CHECKS["grouped_query_attention"].body.__globals__["_grouped_cases"](draw)
        groups = {(c.args[0].shape[1], c.args[1].shape[1]) for c in cases}
        assert any(1 < G < H for H, G in groups) and any(G == 1 for _, G in groups)
        assert any(G == H for H, G in groups)


def test_weights_that_almost_sum_to_one_print_the_sum_that_missed():
    """"sum to 1, not 1": a denominator with 1e-5 added sums to 0.99999x."""
    def eps_in_denominator(q, k):
        e = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).exp()
        return e / (e.sum(-1, keepdim=True) + 1e-5)
    result = checks.CHECKS["attention_weights"](eps_in_denominator)
    expect(result, False, "sum to 0.99999")
    expect(result, False, ", not 1 (off by ")
