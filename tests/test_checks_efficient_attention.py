"""Tests of the self-checks of 12.5 that go beyond the generic ones of tests/test_checks.py
(every answer of tests/wrong_answers/efficient_attention.py runs there)."""
import copy

import torch

from labsupport import checks
from labsupport.attention import naive_attention
from labsupport.sections import efficient_attention  # noqa: F401  (registers its checks)
from test_checks import expect
from wrong_answers import ANSWERS


def test_the_nystrom_reference_is_exact_with_one_landmark_per_row_and_close_on_soft_attention():
    from labsupport.sections.efficient_attention.checks import _nystrom
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(24, 4, generator=g, dtype=torch.float64) * 0.3 for _ in range(3))
    exact = naive_attention(q, k, v)
    assert torch.allclose(_nystrom(q, k, v, 24), exact)
    few = (_nystrom(q, k, v, 6) - exact).abs().max()
    assert few < 0.005 and 5 * few < (_nystrom(q, k, v, 6, invert=False) - exact).abs().max()


def test_the_nystrom_check_tells_a_square_split_from_its_transpose():
    """A grouping by strides agrees with blocks when L = landmarks^2: no practice case is square."""
    from labsupport.checks.core import Draw
    from labsupport.sections.efficient_attention.checks import _nystrom_cases
    for draw in (Draw(), *(Draw(seed, graded=True) for seed in range(20))):
        for case in _nystrom_cases(draw):
            L, m = case.args[0].shape[0], case.args[3]
            assert L % m == 0 and (m == L or L != m * m), case.text


def test_a_right_answer_that_deep_copies_its_inputs_is_not_blamed_for_the_copies():
    deep = ANSWERS["blocked_local_attention"][2]
    assert "deepcopy" in deep.source and deep.kind == "right"
    result = checks.CHECKS["blocked_local_attention"](deep.function())
    expect(result, True, "times smaller than the full scores")


def test_the_allocation_probe_counts_new_tensors_only():
    from labsupport.sections.efficient_attention.checks import Allocations
    x = torch.zeros(4, 8)
    with Allocations() as probe:
        copy.deepcopy(x), x.view(32), x.expand(2, 4, 8), x.add_(1)
    assert probe.numel <= 1                                  # deepcopy's empty placeholder
    a, b = torch.ones(2, 3), torch.ones(3, 50)
    with Allocations() as probe:
        a @ b
    assert probe.numel == 100


def test_performer_error_exponent_names_the_usual_mistakes_and_never_prints_the_measurement():
    from labsupport.sections.efficient_attention.checks import (
        EXPONENT_TOLERANCE,
        SMALL_SCALE,
        measured_error_exponent,
    )
    measured = measured_error_exponent(SMALL_SCALE)
    assert abs(measured + 0.5) < EXPONENT_TOLERANCE / 2, measured   # the Monte Carlo rule, with room
    check = checks.CHECKS["performer_error_exponent"]
    expect(check(lambda: 0.0), False, "does fall with m")
    expect(check(lambda: -0.25), False, "from the measured one")
    expect(check(lambda: -0.8), False, "from the measured one")
    expect(check(lambda: -1.0), False, "not a variance")
    for answer in (-0.5, -0.25, -0.8, -1.0):      # neither a pass nor a hint prints the answer
        text = str(check(lambda a=answer: a))
        assert f"{measured:+.2f}" not in text and f"{measured:.2f}" not in text


def test_the_performer_error_exponent_is_deterministic_and_needs_small_inputs():
    from labsupport.sections.efficient_attention.checks import (
        LARGE_SCALE,
        SMALL_SCALE,
        measured_error_exponent,
        performer_error,
    )
    assert performer_error(SMALL_SCALE) == performer_error(SMALL_SCALE)
    assert measured_error_exponent(LARGE_SCALE) > -0.3       # far from -1/2 on larger inputs
