"""Mistakes a student makes with the library, each answered by a message that names the value,
what was expected and how to fix it, where torch or pandas would answer from deep inside."""
import re

import numpy as np
import pytest
import torch

from labsupport.data import book_task, load_csv
from labsupport.models import LinearForecaster
from labsupport.positional import (
    LearnedPositionalEncoding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    alibi_bias,
)
from labsupport.train import fit

MODEL = dict(lookback=48, horizon=12)


def test_float64_windows_into_a_float32_model_say_which_dtype_to_pass():
    with pytest.raises(TypeError, match=r"x is float64 but the model's weights are float32: pass "
                                        r"x.to\(torch.float32\)"):
        LinearForecaster(**MODEL)(torch.zeros(2, 48, 1, dtype=torch.float64))


def test_numpy_windows_into_fit_say_how_to_convert_them():
    x, y = np.zeros((10, 48, 1), np.float32), np.zeros((10, 12, 1), np.float32)
    with pytest.raises(TypeError, match=r"train must be an \(inputs, targets\) pair of torch tensors, got "
                                        r"NumPy arrays: convert them, e.g. \(torch.from_numpy"):
        fit(LinearForecaster(**MODEL), (x, y), (x, y), epochs=1, progress=False)


def test_validation_windows_of_another_lookback_are_named_not_blamed_on_the_model():
    x, y = torch.zeros(10, 48, 1), torch.zeros(10, 12, 1)
    with pytest.raises(ValueError, match=r"val inputs are \(N, 24, 1\) but train inputs \(N, 48, 1\); make "
                                         r"both with the same lookback"):
        fit(LinearForecaster(**MODEL), (x, y), (torch.zeros(10, 24, 1), y), epochs=1, progress=False)


@pytest.mark.parametrize("sep", [";", "\t"])
def test_a_csv_separated_by_something_else_than_commas_is_named(tmp_path, sep):
    path = tmp_path / "semi.csv"
    path.write_text(f"time{sep}demand\n2020-01-01T00:00{sep}1\n2020-01-01T01:00{sep}2\n")
    with pytest.raises(ValueError, match=re.escape(f"the file is separated by {sep!r}, not commas")):
        load_csv(path)


def test_a_time_column_under_another_name_is_suggested(tmp_path):
    path = tmp_path / "date.csv"
    path.write_text("date,demand\n2020-01-01 00:00,1\n2020-01-01 01:00,2\n")
    with pytest.raises(ValueError, match=r"no time column 'time': pass time_column='date'"):
        load_csv(path)


def test_a_column_name_given_as_a_str_is_not_read_letter_by_letter(tmp_path):
    path = tmp_path / "ok.csv"
    path.write_text("time,demand_mw\n2020-01-01T00:00,1\n2020-01-01T01:00,2\n")
    with pytest.raises(TypeError, match=r"columns must be a list of column names, e.g. "
                                        r"columns=\['demand_mw'\]"):
        load_csv(path, columns="demand_mw")
    with pytest.raises(TypeError, match=r"e.g. columns=\['demand_mw'\], got the str"):
        book_task(columns="demand_mw")


def test_positions_of_the_wrong_length_are_named_for_rope_and_alibi():
    with pytest.raises(ValueError, match=r"positions must hold one position per token, \(L,\) or \(B, L\) "
                                         r"with L = 10 .* got \(7,\)"):
        RotaryEmbedding(8)(torch.zeros(2, 4, 10, 8), positions=torch.arange(7))
    with pytest.raises(ValueError, match=r"k_pos must hold one position per key, 12 of them"):
        alibi_bias(4, 10, 12, k_pos=torch.arange(10))


def test_an_encoding_of_the_wrong_width_says_which_width_to_build():
    with pytest.raises(ValueError, match=r"x must be \(B, L, 32\) for this table of width 32, got "
                                         r"\(2, 10, 8\): build it with d_model=8"):
        LearnedPositionalEncoding(16, 32)(torch.zeros(2, 10, 8))
    with pytest.raises(ValueError, match=r"build it with d_model=16"):
        SinusoidalPositionalEncoding(8)(torch.zeros(2, 10, 16))
