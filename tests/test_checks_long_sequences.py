"""Tests of the self-checks of 12.4 that go beyond the generic ones of tests/test_checks.py
(every answer of tests/wrong_answers/long_sequences.py runs there)."""
import math

import pytest
import torch

from labsupport import checks
from labsupport.checks.core import Draw
from labsupport.sections import long_sequences  # noqa: F401  (registers its checks)
from labsupport.sections.long_sequences import checks as ls
from test_checks import expect


def test_the_reference_tiles_are_causal_attention_and_the_mistakes_are_not():
    """The tiled variants the check names: the right one (skipping the tiles above the diagonal)
    equals causal attention; each mistake differs from it on the practice inputs."""
    for case in ls._causal_cases(Draw()):
        q, k, v, block = case.args
        want = ls._causal(q, k, v)
        torch.testing.assert_close(ls._tiles(q, k, v, block, upper=False), want)
        torch.testing.assert_close(ls._tiles(q, k, v, block, upper=True), want)
    q, k, v, block = ls._causal_cases(Draw())[0].args
    want = ls._causal(q, k, v)
    for variant in (dict(mask=None), dict(upper=False, mask=None), dict(upper=False, mask="local"),
                    dict(upper=False, diagonal=False)):
        got = ls._tiles(q, k, v, block, **variant)
        assert not torch.allclose(got.nan_to_num(7.0), want), variant


def test_the_work_of_the_tiles_is_what_the_matrix_products_count():
    """_work counts the two products of every computed tile; FlopCounterMode agrees on the
    reference loop, which skips the tiles above the diagonal."""
    from torch.utils.flop_counter import FlopCounterMode
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(19, 3, generator=g, dtype=torch.float64) for _ in range(3))
    for upper in (False, True):
        with FlopCounterMode(display=False) as counter:
            ls._tiles(q, k, v, 4, upper=upper)
        assert counter.get_total_flops() == ls._work(q, k, v, 4, upper=upper)
    assert ls._work(q, k, v, 4, upper=False) < 0.7 * ls._work(q, k, v, 4, upper=True)


def test_a_causal_answer_that_computes_every_tile_is_told_so():
    def full_then_masked(q, k, v, block):
        L = q.shape[0]
        s = (q @ k.T / q.shape[-1] ** 0.5).masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
        return s.softmax(-1) @ v
    result = checks.CHECKS["causal_tiled_attention"](full_then_masked)
    expect(result, False, "the outputs are right, but your matrix products do the work")
    expect(result, False, "times the work of the tiles a causal mask leaves")


def test_the_merge_reference_is_softmax_over_both_parts():
    g = torch.Generator().manual_seed(1)
    scores, v = torch.randn(4, 9, generator=g, dtype=torch.float64) * 30, torch.randn(9, 2, generator=g,
                                                                                        dtype=torch.float64)
    parts = ls._partial(scores[:, :5], v[:5]) + ls._partial(scores[:, 5:], v[5:])
    torch.testing.assert_close(ls._merged(*parts), scores.softmax(-1) @ v)
    empty = ls._partial(scores[:, :0], v[:0])
    torch.testing.assert_close(ls._merged(*ls._partial(scores, v), *empty), scores.softmax(-1) @ v)


def test_merge_partials_names_a_malformed_state_and_a_wrong_m():
    expect(checks.CHECKS["merge_partials"](lambda m1, l1, a1, m2, l2, a2: (m1, l1)), False,
           "tuple (m, l, acc), got tuple")

    def stale_m(m1, l1, a1, m2, l2, a2):
        m = torch.maximum(m1, m2)
        f1, f2 = (m1 - m).exp(), (m2 - m).exp()
        return m1, l1 * f1 + l2 * f2, a1 * f1 + a2 * f2
    expect(checks.CHECKS["merge_partials"](stale_m), False, "not the larger of the two maxima")

    def scaled_state(m1, l1, a1, m2, l2, a2):                  # acc / l right, l off by a factor
        m = torch.maximum(m1, m2)
        f1, f2 = (m1 - m).exp(), (m2 - m).exp()
        return m, 2 * (l1 * f1 + l2 * f2), 2 * (a1 * f1 + a2 * f2)
    expect(checks.CHECKS["merge_partials"](scaled_state), False, "l is not the normaliser")


def test_a_float32_merge_passes():
    def in_float32(m1, l1, a1, m2, l2, a2):
        m1, l1, a1, m2, l2, a2 = (t.float() for t in (m1, l1, a1, m2, l2, a2))
        m = torch.maximum(m1, m2)
        f1, f2 = (m1 - m).exp(), (m2 - m).exp()
        return m, l1 * f1 + l2 * f2, a1 * f1 + a2 * f2
    expect(checks.CHECKS["merge_partials"](in_float32), True)


def test_the_cache_is_measured_as_the_state_the_encoder_carries():
    """The measurement equals slots x width x batch x layers x bytes, and grows with neither the
    length of the stream nor the reach of a compressed slot."""
    for case in ls._cache_cases(Draw()) + ls._cache_cases(Draw(5, graded=True)):
        batch, n_layers, d_model, mem_len, cmem_len, rate, dtype = case.args
        size = torch.tensor([], dtype=dtype).element_size()
        assert ls.measured_cache_bytes(*case.args) == batch * n_layers * (mem_len + cmem_len) * d_model * size


def test_kept_fractions():
    passed = checks.CHECKS["kept_fractions"](lambda: {24: 0.02, 168: 0.95, 8766: 0.99})
    expect(passed, True, "within 0.025")
    expect(checks.CHECKS["kept_fractions"](lambda: {24: 0.0, 168: 1.0, 8766: 1.0}), False,
           "your weekly prediction is off")
    assert "keeps" not in passed.message and "0.97" not in passed.message     # no verbal or measured answer
    expect(checks.CHECKS["kept_fractions"](lambda: {24: "none", 168: 0.97, 8766: 1.0}), False,
           "a fraction for the daily cycle")


def test_kept_fractions_are_measured_as_the_formula_says():
    """A mean over r consecutive hours keeps |sin(pi r / p) / (r sin(pi / p))| of a cycle
    of p hours (the Dirichlet kernel): 0 for p = r, about 0.967 for a week."""
    for period, kept in ls.measured_kept_fractions().items():
        want = abs(math.sin(math.pi * 24 / period) / (24 * math.sin(math.pi / period)))
        assert kept == pytest.approx(want, abs=1e-9), period
