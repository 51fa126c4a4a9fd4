"""Tests of the self-checks of the lab that go beyond the generic ones of tests/test_checks.py
(every answer of tests/wrong_answers/lab.py runs there)."""
import copy  # noqa: F401

import pytest  # noqa: F401

from labsupport import checks
from labsupport.checks.core import Draw  # noqa: F401
from labsupport.sections import lab  # noqa: F401  (registers its checks)
from test_checks import GRADED_SEEDS, RIGHT, expect  # noqa: F401
from wrong_answers import ANSWERS, first  # noqa: F401


def test_step_peak_names_the_usual_mistakes():
    def matrices(count):
        return lambda b, h, n, layers: count(layers) * b * h * n * n * 4
    expect(checks.CHECKS["step_peak"](matrices(lambda n: n + 2)), True, "within 10% of the measured peak")
    expect(checks.CHECKS["step_peak"](matrices(lambda n: 2 * n)), False, "keeps only what the backward needs")
    expect(checks.CHECKS["step_peak"](matrices(lambda n: n)), False, "what does the backward pass of one layer create")
    expect(checks.CHECKS["step_peak"](matrices(lambda n: 2)), False, "so the layers count")
    expect(checks.CHECKS["step_peak"](lambda b, h, n, layers: (layers + 2) * n * n * 4), False, "batch * heads")
    expect(checks.CHECKS["step_peak"](lambda b, h, n, layers: 1e6), False, "times the measured peak")
    expect(checks.CHECKS["step_peak"](lambda b, h, n, layers: "40 MB"), False, "return a number of bytes")


def test_step_peak_measures_what_the_model_says_at_practice_and_graded_sizes():
    """The reference's (layers + 2) matrices, against the allocator: the N x N matrices
    dominate the narrow encoder the check measures (within 8%, never below the model)."""
    from labsupport.sections.lab.checks import measured_step_peak
    from labsupport.sections.lab.reference import predicted_step_peak
    from labsupport.timing import cpu_peak_supported
    if not cpu_peak_supported():
        pytest.skip("this platform cannot measure CPU peaks")
    cases = checks.CHECKS["step_peak"].body.__globals__["_step_cases"]
    for draw in [Draw(), *(Draw(seed, graded=True) for seed in range(6))]:
        for case in cases(draw):
            ratio = measured_step_peak(*case.args) / predicted_step_peak(*case.args)
            assert 1.0 <= ratio <= 1.08, (case.text, ratio)
