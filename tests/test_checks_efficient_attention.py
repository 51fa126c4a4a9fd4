"""Tests of the self-checks of 12.5 that go beyond the generic ones of tests/test_checks.py
(every answer of tests/wrong_answers/efficient_attention.py runs there)."""
import copy  # noqa: F401

import pytest  # noqa: F401
import torch

from labsupport import checks
from labsupport.checks.core import Draw  # noqa: F401
from labsupport.sections import efficient_attention  # noqa: F401  (registers its checks)
from test_checks import GRADED_SEEDS, RIGHT, expect  # noqa: F401
from wrong_answers import ANSWERS, first  # noqa: F401


def test_a_right_answer_that_deep_copies_its_inputs_is_not_blamed_for_the_copies():
    deep = ANSWERS["blocked_local_attention"][2]
    assert "deepcopy" in deep.source and deep.kind == "right"
    result = checks.CHECKS["blocked_local_attention"](deep.function())
    expect(result, True, "the largest tensor had")


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


def test_the_feature_estimate_is_checked_on_inputs_where_the_right_formula_has_room():
    """12.5.1's Monte Carlo property runs on fixed inputs: a random draw misses 5% one time in 8."""
    import math as m

    from labsupport.sections.efficient_attention.checks import PROPERTY_SEED
    fixed = Draw(PROPERTY_SEED)
    x, w = fixed.randn(5, 4, scale=0.3), fixed.randn(20000, 4)
    phi = torch.exp(x @ w.T - x.pow(2).sum(-1, keepdim=True) / 2) / m.sqrt(20000)
    assert ((phi @ phi.T) / torch.exp(x @ x.T) - 1).abs().max() < 0.025


def test_performer_error_exponent_names_the_usual_mistakes():
    from labsupport.sections.efficient_attention.checks import (
        EXPONENT_TOLERANCE,
        SMALL_SCALE,
        measured_error_exponent,
    )
    measured = measured_error_exponent(SMALL_SCALE)
    assert abs(measured + 0.5) < EXPONENT_TOLERANCE / 2, measured   # the Monte Carlo rule, with room
    expect(checks.CHECKS["performer_error_exponent"](lambda: 0.0), False, "does fall with m")
    expect(checks.CHECKS["performer_error_exponent"](lambda: -0.25), False, "more than 0.1 from the measured")
    expect(checks.CHECKS["performer_error_exponent"](lambda: "m^-1/2"), False, "return an exponent p")
    for answer in (-0.5, -0.25, -0.8):          # neither a pass nor a hint prints the answer
        assert f"{measured:+.2f}" not in str(checks.CHECKS["performer_error_exponent"](lambda a=answer: a))


def test_the_performer_error_exponent_is_deterministic_and_needs_small_inputs():
    from labsupport.sections.efficient_attention.checks import (
        LARGE_SCALE,
        SMALL_SCALE,
        measured_error_exponent,
        performer_error,
    )
    assert performer_error(SMALL_SCALE) == performer_error(SMALL_SCALE)
    assert measured_error_exponent(LARGE_SCALE) > -0.3       # far from -1/2 on larger inputs
