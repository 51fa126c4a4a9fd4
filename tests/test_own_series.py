"""A student's own series through the book's protocol (docs/own-series.md): a task from a CSV or a
DataFrame split by dates or fractions, the seasonal naive's period and name from the series'
step, the unit as given, and verdict words between baselines that have no seeds."""
import numpy as np
import pandas as pd
import pytest
import torch

from labsupport.compare import NAIVE, RIDGE, compare
from labsupport.data import Series, book_task, load_csv, make_task


def frame(step: str, days: int, seed: int = 0) -> pd.DataFrame:
    """A daily and weekly cycle with noise, every ``step`` ("1h", "15min"), as a DataFrame."""
    index = pd.date_range("2024-01-01", periods=days * pd.Timedelta("1D") // pd.Timedelta(step), freq=step)
    hours = (index - index[0]) / pd.Timedelta("1h")
    rng = np.random.default_rng(seed)
    value = (20 + 3 * np.sin(2 * np.pi * hours / 24) + np.sin(2 * np.pi * hours / 168)
             + 0.3 * rng.standard_normal(len(index)))
    return pd.DataFrame({"time": index, "oil_temp": value})


def test_an_hourly_frame_gets_the_weekly_naive_its_unit_and_a_split_by_fractions():
    series = Series.from_frame(frame("1h", 120), time="time")
    task = make_task(series, lookback=336, horizon=24, fractions=(0.7, 0.15), unit="°C")
    assert task.step == np.timedelta64(1, "h") and task.steps_per("week") == 168 and task.eval_stride == 24
    result = compare(task, {}, revin=True, progress=False)
    assert set(result.entries) == {RIDGE, NAIVE} and result.unit == "°C"
    assert result.label("mae_orig") == "test MAE (°C)"
    assert result[NAIVE].metrics[0].mae_orig is not None
    line = result.verdict_text(RIDGE, NAIVE)
    assert "no seed spread" in line and "both are deterministic" in line
    assert "beyond the seed spread" not in line


def test_a_15_minute_series_names_its_naive_by_its_own_period():
    series = Series.from_frame(frame("15min", 40), time="time")
    week = make_task(series, lookback=7 * 96, horizon=96, fractions=(0.6, 0.2))
    assert week.steps_per("day") == 96 and week.eval_stride == 96
    assert set(compare(week, {}, revin=True, progress=False).entries) == {RIDGE, NAIVE}   # 672 steps: a week
    day = make_task(series, lookback=192, horizon=96, fractions=(0.6, 0.2))
    result = compare(day, {}, revin=True, progress=False)
    assert "seasonal naive (daily)" in result.entries and result[NAIVE] is result["seasonal naive (daily)"]
    assert result.verdict_text(RIDGE, NAIVE).count("seasonal naive (daily)") == 1
    short = make_task(series, lookback=48, horizon=96, fractions=(0.6, 0.2))
    with pytest.raises(ValueError, match=r"repeats the last day or week, 96 or 672 steps .* windows hold 48 "
                                         r"steps; pass naive_period=<steps>"):
        compare(short, {}, revin=True, progress=False)
    assert set(compare(short, {}, revin=True, naive_period=None, progress=False).entries) == {RIDGE}


def test_a_csv_with_a_date_column_and_dates_for_the_split(tmp_path):
    df = frame("1h", 120).rename(columns={"time": "date"})
    df.to_csv(tmp_path / "own.csv", index=False, date_format="%Y-%m-%d %H:%M:%S")
    with pytest.raises(ValueError, match=r"no time column 'time': pass time_column='date'"):
        load_csv(tmp_path / "own.csv")
    series = load_csv(tmp_path / "own.csv", time_column="date")
    task = make_task(series, lookback=336, horizon=24, train_end="2024-03-15", val_end="2024-04-05")
    assert task.unit is None and compare(task, {}, revin=True, progress=False).unit is None
    with pytest.raises(ValueError, match="give the split one way"):
        make_task(series, lookback=336, horizon=24, train_end="2024-03-15", val_end="2024-04-05",
                  fractions=(0.7, 0.15))
    with pytest.raises(ValueError, match=r"give the split: train_end and val_end .* or fractions"):
        make_task(series, lookback=336, horizon=24)
    with pytest.raises(TypeError, match=r"columns must be a list of column names, e.g. "
                                        r"columns=\['oil_temp'\]"):
        make_task(series, lookback=336, horizon=24, columns="oil_temp", fractions=(0.7, 0.15))


def test_the_books_task_is_one_call_of_make_task():
    book = book_task(train_stride=24)
    assert book.unit == "MW" and book.eval_stride == 24 and book.step == np.timedelta64(1, "h")
    from labsupport.data import load_vic_elec
    same = make_task(load_vic_elec(), lookback=336, horizon=24, columns=("demand_mw",),
                     train_end="2014-01-01", val_end="2014-07-01", train_stride=24, eval_stride=24, unit="MW")
    for part in ("train", "val", "test"):
        assert torch.equal(getattr(book, part)[0], getattr(same, part)[0])


def test_a_mae_in_degrees_keeps_three_digits_in_the_table(capsys):
    series = Series.from_frame(frame("1h", 120), time="time")
    task = make_task(series, lookback=336, horizon=24, fractions=(0.7, 0.15), unit="°C")
    result = compare(task, {}, revin=True, progress=False)
    result.table()
    mae = result[RIDGE].metrics[0].mae_orig                   # below one degree: three decimals
    lines = capsys.readouterr().out.splitlines()
    assert "MAE (°C)" in lines[0]
    row = next(line for line in lines if line.strip().startswith("ridge"))
    assert 0.1 < mae < 1 and f" {mae:.3f} " in row
