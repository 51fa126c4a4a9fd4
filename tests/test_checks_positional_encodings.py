"""Tests of the self-checks of 12.3 that go beyond the generic ones of tests/test_checks.py
(every answer of tests/wrong_answers/positional_encodings.py runs there)."""
import math

import torch

from labsupport import checks
from labsupport.checks.core import Draw
from labsupport.positional import RotaryEmbedding, alibi_slopes
from labsupport.sections import positional_encodings  # noqa: F401  (registers its checks)
from labsupport.sections.positional_encodings.checks import (
    _interpolated,
    _rope,
    _rope_cases,
    _share,
    _share_cases,
    measured_old_share,
)
from test_checks import GRADED_SEEDS, RIGHT, expect


def test_the_rotation_of_the_check_is_the_books_rope():
    x = torch.randn(2, 3, 9, 8, dtype=torch.float64)
    positions = torch.arange(9) * 0.37
    torch.testing.assert_close(_rope(x, positions), RotaryEmbedding(8)(x, positions))


def test_interpolation_squeezes_only_longer_windows_into_the_trained_angles():
    x = torch.randn(1, 28, 8, dtype=torch.float64)
    torch.testing.assert_close(_interpolated(x, 14), RotaryEmbedding(8)(x, torch.arange(28) * 0.5))
    short = torch.randn(5, 8, dtype=torch.float64)
    torch.testing.assert_close(_interpolated(short, 14), RotaryEmbedding(8)(short))


def test_the_rope_cases_hold_long_equal_and_short_windows_on_every_draw():
    for draw in (Draw(), *(Draw(seed, graded=True) for seed in GRADED_SEEDS)):
        lengths = [(case.args[0].shape[-2], case.args[1]) for case in _rope_cases(draw)]
        assert any(L > t for L, t in lengths) and any(L == t for L, t in lengths)
        assert any(L < t for L, t in lengths)


def test_the_measured_share_is_the_geometric_series_and_uses_the_books_slopes():
    for H, n, t in ((8, 56, 14), (4, 28, 14), (2, 9, 3)):
        r = torch.exp(-alibi_slopes(H, dtype=torch.float64))
        series = (r ** t - r ** n) / (1 - r ** n)
        torch.testing.assert_close(measured_old_share(H, n, t), series, atol=1e-12, rtol=0)
        torch.testing.assert_close(_share(H, n, t), series, atol=1e-12, rtol=0)


def test_every_draw_of_the_prediction_has_eight_heads_and_lengths_beyond_training():
    for draw in (Draw(), *(Draw(seed, graded=True) for seed in GRADED_SEEDS)):
        sizes = [case.args for case in _share_cases(draw)]
        assert sizes[0][0] == 8 and all(n > t for _, n, t in sizes)


def test_the_prediction_is_refused_in_whole_percent_and_as_a_list():
    share = RIGHT["predicted_old_share"]
    expect(checks.CHECKS["predicted_old_share"](lambda *a: 100 * share(*a)), False, "times too large")
    expect(checks.CHECKS["predicted_old_share"](lambda *a: share(*a).tolist()), False, "torch.Tensor")


def test_a_shift_by_a_whole_turn_of_the_fastest_pair_is_still_told_apart():
    """k = 2 pi turns pair 0 by a whole turn: a matrix right on pair 0 only must still fail."""
    def fastest_only(k, d):
        M = torch.eye(d, dtype=torch.float64)
        c, s = math.cos(k), math.sin(k)
        M[0, 0], M[0, 1], M[1, 0], M[1, 1] = c, -s, s, c
        return M
    expect(checks.CHECKS["shift_matrix"](fastest_only), False, "")
