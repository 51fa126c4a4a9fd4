"""Tests of the self-checks of 12.2 that go beyond the generic ones of tests/test_checks.py
(every answer of tests/wrong_answers/transformer.py runs there)."""
import copy  # noqa: F401

import pytest  # noqa: F401

from labsupport import checks
from labsupport.checks.core import Draw  # noqa: F401
from labsupport.sections import transformer  # noqa: F401  (registers its checks)
from test_checks import GRADED_SEEDS, RIGHT, expect  # noqa: F401
from wrong_answers import ANSWERS, first  # noqa: F401


def test_heads_peak_ratio_names_the_usual_mistakes():
    """Exercise 12.2.4: B = 2, L = 512, d = 64; q, k, v stay, the scores grow with H."""
    from labsupport.sections.transformer.checks import HEADS_SIZES, heads_peak_model, measured_heads_peaks
    B, L, d = HEADS_SIZES.values()
    peaks, measured = measured_heads_peaks(B, L, d)
    assert measured and peaks == {H: heads_peak_model(B, L, d, H) + (H > 1) * B * L * d * 4 for H in (1, 4)}, \
        "the byte model: q, k, v, two score matrices per head and the output (with 4 heads, one more copy)"
    counted = lambda H: 3 * B * L * d + 2 * B * H * L * L      # noqa: E731 (q, k, v and the scores)
    expect(checks.CHECKS["heads_peak_ratio"](lambda: counted(4) / counted(1)), True, "within 5% of the measured ratio")
    expect(checks.CHECKS["heads_peak_ratio"](lambda: 1), False, "each head keeps its own (B, L, L) score matrix")
    expect(checks.CHECKS["heads_peak_ratio"](lambda: counted(1) / counted(4)), False, "1 head over 4 heads")
    expect(checks.CHECKS["heads_peak_ratio"](lambda: 2.0), False, "count the bytes alive at the peak")
    expect(checks.CHECKS["heads_peak_ratio"](lambda: -3.5), False, "positive number")
    expect(checks.CHECKS["heads_peak_ratio"](lambda: "3.5"), False, "return a ratio")


def test_a_ratio_just_outside_the_tolerance_does_not_read_as_inside_it():
    from labsupport.checks.core import times
    assert times(1.0504, 0.05) == "1.0504" and times(1.2, 0.05) == "1.20" and times(0.9499, 0.05) == "0.9499"
    from labsupport.sections.transformer.checks import HEADS_SIZES, measured_heads_peaks
    peaks, _ = measured_heads_peaks(**HEADS_SIZES)
    ratio = peaks[4] / peaks[1]
    expect(checks.CHECKS["heads_peak_ratio"](lambda: ratio * 1.0504), False, "your prediction is 1.0504 times")
