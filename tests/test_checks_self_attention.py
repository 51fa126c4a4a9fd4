"""Tests of the self-checks of 12.1 that go beyond the generic ones of tests/test_checks.py
(every answer of tests/wrong_answers/self_attention.py runs there)."""
import copy  # noqa: F401

import pytest  # noqa: F401

from labsupport import checks
from labsupport.checks.core import Draw  # noqa: F401
from labsupport.sections import self_attention  # noqa: F401  (registers its checks)
from test_checks import GRADED_SEEDS, RIGHT, expect  # noqa: F401
from wrong_answers import ANSWERS, first  # noqa: F401


def test_predicted_peak_is_exact_against_the_allocator_at_every_practice_and_graded_size():
    from labsupport.sections.self_attention.checks import measured_naive_peak, naive_peak_model
    from labsupport.timing import cpu_peak_supported
    if not cpu_peak_supported():
        pytest.skip("this platform cannot measure CPU peaks")
    draws = [Draw(seed, graded=True) for seed in GRADED_SEEDS]
    for case in [c for d in [Draw(), *draws] for c in checks.CHECKS["predicted_peak"].body.__globals__["_peak_cases"](d)]:
        assert measured_naive_peak(*case.args) == naive_peak_model(*case.args), case.text


def test_weights_that_almost_sum_to_one_print_the_sum_that_missed():
    """"sum to 1, not 1": a denominator with 1e-5 added sums to 0.99999x."""
    def eps_in_denominator(q, k):
        e = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).exp()
        return e / (e.sum(-1, keepdim=True) + 1e-5)
    result = checks.CHECKS["attention_weights"](eps_in_denominator)
    expect(result, False, "sum to 0.99999")
    expect(result, False, ", not 1 (off by ")
