"""Tests of the self-checks of 12.4 that go beyond the generic ones of tests/test_checks.py
(every answer of tests/wrong_answers/long_sequences.py runs there)."""
import copy  # noqa: F401

import pytest  # noqa: F401
import torch

from labsupport import checks
from labsupport.checks.core import Draw  # noqa: F401
from labsupport.sections import long_sequences  # noqa: F401  (registers its checks)
from test_checks import GRADED_SEEDS, RIGHT, expect  # noqa: F401
from wrong_answers import ANSWERS, first  # noqa: F401


def test_online_step_names_a_malformed_state():
    expect(checks.CHECKS["online_step"](lambda m, l, acc, s, v: (m, l)), False, "tuple (m, l, acc), got tuple")
    expect(checks.CHECKS["online_step"](lambda m, l, acc, s, v: acc), False, "tuple (m, l, acc), got Tensor")
    expect(checks.CHECKS["online_step"](lambda m, l, acc, s, v: (m, l, acc[:, :1])), False, "online_step's acc should have shape")


def test_kept_fractions():
    passed = checks.CHECKS["kept_fractions"](lambda: {24: 0.02, 168: 0.93, 8766: 0.99})
    expect(passed, True, "within 0.05")
    assert "0.97" not in passed.message and "1.00" not in passed.message        # no measured value given away
    expect(checks.CHECKS["kept_fractions"](lambda: {24: 0.0, 168: 0.97, 8766: 0.5}), False, "1/365 of a year")
    expect(checks.CHECKS["kept_fractions"](lambda: {24: 0, 168: 97, 8766: 100}), False, "not as a percentage")
    expect(checks.CHECKS["kept_fractions"](lambda: [0.0, 0.97, 1.0]), False, "keys 24, 168 and 8766")
    expect(checks.CHECKS["kept_fractions"](lambda: {24: "none", 168: 0.97, 8766: 1.0}), False,
           "a fraction for the daily cycle")


def test_kept_fractions_are_measured_as_the_formula_says():
    """A mean over r consecutive hours keeps |sin(pi r / p) / (r sin(pi / p))| of a cycle
    of p hours (the Dirichlet kernel): 0 for p = r, about 0.967 for a week."""
    import math as m

    from labsupport.sections.long_sequences.checks import measured_kept_fractions
    for period, kept in measured_kept_fractions().items():
        want = abs(m.sin(m.pi * 24 / period) / (24 * m.sin(m.pi / period)))
        assert kept == pytest.approx(want, abs=1e-9), period


def test_stride_saving():
    n1, n12 = (336 - 24) // 1 + 1, (336 - 24) // 12 + 1
    expect(checks.CHECKS["stride_saving"](lambda: 134), True, "within 5% of the measured ratio")
    assert "134" not in checks.CHECKS["stride_saving"](lambda: 134).message and "313" not in checks.CHECKS["stride_saving"](lambda: 134).message
    expect(checks.CHECKS["stride_saving"](lambda: n1 / n12), False, "square of the token count")
    expect(checks.CHECKS["stride_saving"](lambda: (n12 / n1) ** 2), False, "fraction of the cost that is left")
    expect(checks.CHECKS["stride_saving"](lambda: -3), False, "positive factor")
    expect(checks.CHECKS["stride_saving"](lambda: 60), False, "square their ratio")


def test_compress_update_is_the_books_compressive_memory_on_whole_groups():
    """The exercise's rule equals CompressiveMemory.update when every overflow is whole groups."""
    from labsupport.memory import CompressiveMemory
    from labsupport.sections.long_sequences.checks import _update
    g = torch.Generator().manual_seed(0)
    for rate, mem_len, cmem_len, M, C, L in [(2, 4, 3, 4, 2, 4), (1, 3, 4, 3, 4, 2), (3, 3, 5, 3, 4, 6),
                                              (4, 8, 2, 0, 0, 4), (2, 8, 3, 8, 3, 8)]:
        memory, compressed, h = (torch.randn(2, n, 3, generator=g, dtype=torch.float64) for n in (M, C, L))
        library = CompressiveMemory(3, mem_len=mem_len, cmem_len=cmem_len, rate=rate).double()
        for ours, theirs in zip(_update(memory, compressed, h, mem_len, cmem_len, rate),
                                library.update(memory, compressed, h)):
            torch.testing.assert_close(ours, theirs)


def test_compress_update_names_a_malformed_state():
    expect(checks.CHECKS["compress_update"](lambda m, c, h, *sizes: m), False, "tuple of two tensors, got Tensor")
    expect(checks.CHECKS["compress_update"](lambda m, c, h, *sizes: (m, c[0])), False, "should have shape")


def test_stride_saving_measures_the_score_matrices():
    """The largest tensor is the (B, H, N, N) scores: the ratio is exactly (313 / 27)^2."""
    from labsupport.sections.long_sequences.checks import measured_stride_saving
    ratio, tokens = measured_stride_saving()
    assert tokens == [313, 27]
    assert ratio == pytest.approx(313 ** 2 / 27 ** 2, rel=1e-12)
