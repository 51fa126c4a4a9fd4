"""A forecasting task: windows of a temporal split, scaled with training statistics.

`make_task` builds one from any `Series` (a CSV read by `load_csv`, a pandas frame through
`Series.from_frame`), split by dates or by fractions of its rows; `book_task` is the book's
task, one call of it on the hourly Victoria demand with the book's dates.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .calendar_features import time_features
from .files import load_vic_elec
from .prepare import TRAIN_END, VAL_END, Standardizer, make_windows, temporal_split
from .series import Series

# The book's forecasting task, kept by every section: 14 days of hourly demand in,
# the next 24 hours out. Two weeks show the weekly cycle twice; a day ahead is the
# horizon electricity operators plan on.
LOOKBACK = 336
HORIZON = 24


@dataclass(frozen=True, eq=False)
class ForecastTask:
    """Scaled windows of a temporal split: ``train``, ``val``, ``test`` are
    ``(inputs, targets (N, horizon, C))`` pairs, where inputs are ``x (N, lookback, C)``
    or, with calendar features, the tuple ``(x, time (N, lookback + horizon, 7))``;
    validation and test windows start ``eval_stride`` steps apart. ``step`` is the series'
    time step (None: not known), ``unit`` the unit of its values (None: none given), which
    the comparison's table and its seasonal naive read."""

    train: tuple
    val: tuple
    test: tuple
    scaler: Standardizer
    columns: tuple
    lookback: int
    horizon: int
    eval_stride: int
    step: np.timedelta64 | None = None
    unit: str | None = None

    def steps_per(self, span: str) -> int | None:
        """How many steps make a ``"day"`` or a ``"week"`` (None when the step is unknown or
        does not divide it)."""
        if self.step is None:
            return None
        whole = np.timedelta64(1 if span == "day" else 7, "D")
        count = whole / self.step
        return int(count) if float(count).is_integer() else None

    def __repr__(self) -> str:
        sizes = ", ".join(f"{name} {len(getattr(self, name)[1])}" for name in ("train", "val", "test"))
        return (f"ForecastTask({list(self.columns)}, lookback {self.lookback}, horizon {self.horizon}; "
                f"windows: {sizes})")


def make_task(series: Series, *, lookback: int, horizon: int, columns=None, train_end=None,
              val_end=None, fractions=None, train_stride: int = 1, eval_stride: int | None = None,
              calendar: bool = False, unit: str | None = None) -> ForecastTask:
    """Windows of ``series`` for forecasting ``horizon`` steps from ``lookback``, split in time.

    The split: by dates (``train_end``, ``val_end``: ISO strings or datetime64, the first
    time of validation and of test) or by ``fractions`` of the rows (``(0.7, 0.15)``: the
    first 70% train, the next 15% validation, the rest test); give one of the two. Scaling
    statistics come from the training part only. Validation and test windows start
    ``lookback`` steps before their part, so their first targets begin at its border, and
    move ``eval_stride`` steps apart (default: a day of the series' steps, else the horizon).
    ``columns``: the channels forecast (a list of names; default every column).
    ``calendar=True`` adds the calendar features of every input and target step. ``unit``
    (e.g. "MW", "°C"): the unit of the values, which the comparison's table shows the MAE in.

    >>> import numpy as np
    >>> t = np.arange("2024-01-01", "2024-03-01", dtype="datetime64[h]")
    >>> s = Series(t, np.sin(np.arange(len(t)) / 4.0)[:, None].astype(np.float32), ("x",))
    >>> make_task(s, lookback=48, horizon=24, fractions=(0.7, 0.15))
    ForecastTask(['x'], lookback 48, horizon 24; windows: train 937, val 9, test 9)
    """
    if isinstance(columns, str):
        raise TypeError(f"columns must be a list of column names, e.g. columns=[{columns!r}], got the str "
                        f"{columns!r} (a str would be read letter by letter)")
    columns = tuple(series.columns if columns is None else columns)
    step = _step(series)
    if eval_stride is None:
        day = np.timedelta64(1, "D") / step if step is not None else None
        eval_stride = int(day) if day is not None and float(day).is_integer() else horizon
    data = series.select(*columns)
    if calendar:
        holiday = series.column("holiday") if "holiday" in series.columns else None
        features = time_features(series.timestamps, holiday)
        data = Series(series.timestamps, np.concatenate([data.values, features], axis=1),
                      data.columns + tuple(f"cal{i}" for i in range(features.shape[1])), series.name)
    train_end, val_end = _borders(series, train_end, val_end, fractions)
    train, val, test = temporal_split(data, train_end=train_end, val_end=val_end, context=lookback)
    C = len(columns)
    scaler = Standardizer().fit(train.values[:, :C])

    def windows(part, stride):
        values = part.values.copy()
        values[:, :C] = scaler.transform(values[:, :C])
        x, y = make_windows(torch.from_numpy(values), lookback, horizon, stride)
        if not calendar:
            return x, y
        time = torch.cat([x[..., C:], y[..., C:]], dim=1)                # (N, L + T, F)
        return (x[..., :C], time), y[..., :C]

    return ForecastTask(windows(train, train_stride), windows(val, eval_stride), windows(test, eval_stride),
                        scaler, columns, lookback, horizon, eval_stride, step, unit)


def _step(series: Series):
    """The series' time step when every step is the same, else None."""
    if len(series) < 2:
        return None
    steps = np.diff(series.timestamps)
    return steps[0] if (steps == steps[0]).all() else None


def _borders(series: Series, train_end, val_end, fractions) -> tuple:
    """The split's two borders as times, from dates or from fractions of the rows."""
    if fractions is None:
        if train_end is None or val_end is None:
            raise ValueError("give the split: train_end and val_end (the first time of validation and of "
                             "test, e.g. '2014-01-01'), or fractions=(train, validation), e.g. (0.7, 0.15)")
        return train_end, val_end
    if train_end is not None or val_end is not None:
        raise ValueError("give the split one way: train_end and val_end, or fractions, not both")
    try:
        a, b = (float(f) for f in fractions)
    except (TypeError, ValueError):
        raise TypeError(f"fractions must be two numbers (train, validation), e.g. (0.7, 0.15), got "
                        f"{fractions!r}") from None
    if not (0 < a and 0 < b and a + b < 1):
        raise ValueError(f"fractions {fractions!r}: train and validation must be > 0 and leave rows for "
                         "the test part (sum below 1), e.g. (0.7, 0.15)")
    n = len(series)
    i, j = int(round(a * n)), int(round((a + b) * n))
    return series.timestamps[i], series.timestamps[j]


def book_task(*, lookback: int = LOOKBACK, horizon: int = HORIZON, columns=("demand_mw",),
              train_stride: int = 1, eval_stride: int = 24, calendar: bool = False,
              series: Series | None = None) -> ForecastTask:
    """The book's task: ``make_task`` on the hourly Victoria demand (or another ``series`` on
    the same dates) with the book's split (train 2012-2013, validation January-June 2014, test
    July-December 2014) and one forecast a day, issued at midnight (``eval_stride`` 24).
    ``calendar=True`` adds the calendar features (`time_features` with the holiday flag)."""
    full = load_vic_elec() if series is None else series
    return make_task(full, lookback=lookback, horizon=horizon, columns=columns, train_end=TRAIN_END,
                     val_end=VAL_END, train_stride=train_stride, eval_stride=eval_stride,
                     calendar=calendar, unit="MW" if series is None else None)
