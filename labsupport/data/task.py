"""The book's forecasting task: windows of the book's split, scaled with training statistics."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .calendar_features import time_features
from .files import load_vic_elec
from .prepare import Standardizer, make_windows, temporal_split
from .series import Series

# The book's forecasting task, kept by every section: 14 days of hourly demand in,
# the next 24 hours out. Two weeks show the weekly cycle twice; a day ahead is the
# horizon electricity operators plan on.
LOOKBACK = 336
HORIZON = 24


@dataclass(frozen=True, eq=False)
class ForecastTask:
    """Scaled windows of the book's split: ``train``, ``val``, ``test`` are
    ``(inputs, targets (N, horizon, C))`` pairs, where inputs are ``x (N, lookback, C)``
    or, with calendar features, the tuple ``(x, time (N, lookback + horizon, 7))``;
    validation and test windows start ``eval_stride`` steps apart."""

    train: tuple
    val: tuple
    test: tuple
    scaler: Standardizer
    columns: tuple
    lookback: int
    horizon: int
    eval_stride: int

    def __repr__(self) -> str:
        sizes = ", ".join(f"{name} {len(getattr(self, name)[1])}" for name in ("train", "val", "test"))
        return (f"ForecastTask({list(self.columns)}, lookback {self.lookback}, horizon {self.horizon}; "
                f"windows: {sizes})")


def book_task(*, lookback: int = LOOKBACK, horizon: int = HORIZON, columns=("demand_mw",),
              train_stride: int = 1, eval_stride: int = 24, calendar: bool = False,
              series: Series | None = None) -> ForecastTask:
    """Windows of the book's task on the book's split, scaled with training statistics.

    Validation and test windows start ``lookback`` steps before their part, so their
    first targets begin exactly at its border, and move ``eval_stride`` steps apart
    (24: one forecast per day, issued at midnight). ``calendar=True`` adds the
    calendar features (`time_features` with the holiday flag)
    of every input and target hour. ``series`` defaults to `load_vic_elec`.
    """
    full = load_vic_elec() if series is None else series
    data = full.select(*columns)
    if calendar:
        holiday = full.column("holiday") if "holiday" in full.columns else None
        features = time_features(full.timestamps, holiday)
        data = Series(full.timestamps, np.concatenate([data.values, features], axis=1),
                      data.columns + tuple(f"cal{i}" for i in range(features.shape[1])), full.name)
    train, val, test = temporal_split(data, context=lookback)
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
                        scaler, tuple(columns), lookback, horizon, eval_stride)
