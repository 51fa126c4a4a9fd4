"""Calendar features of time stamps (hour of day, day of week, day of year) as sine/cosine pairs."""
from __future__ import annotations

import numpy as np

from .series import read_times


def time_features(timestamps, holiday=None) -> np.ndarray:
    """Calendar features of time stamps as sine/cosine pairs: (T,) -> (T, 6) float32,
    or (T, 7) with the holiday flag appended.

    Columns: hour of day (period 24 h), day of week (7 days, Monday = 0), day of year
    (365.25 days). Sine/cosine pairs make 23:00 and 00:00 neighbours. ``timestamps``:
    numpy datetime64, or ISO 8601 strings read as `load_csv` reads a file's times (`read_times`); a missing
    time (NaT) is refused by row. ``holiday``: (T,) numbers, finite (a 0/1 flag).
    """
    t = _datetimes(timestamps)
    unit = np.datetime_data(t.dtype)[0]
    unit = unit if unit in ("m", "s", "ms", "us", "ns") else "ns" if unit in ("ps", "fs", "as") else "m"
    t = t.astype(f"datetime64[{unit}]")                                  # seconds and fractions kept
    per_minute = int(np.timedelta64(1, "m") / np.timedelta64(1, unit))
    ticks = t.astype(np.int64)
    hour = (ticks % (24 * 60 * per_minute)) / (60.0 * per_minute)
    day = (t.astype("datetime64[D]").astype(np.int64) + 3) % 7          # 1970-01-01 was a Thursday
    year_start = t.astype("datetime64[Y]").astype(f"datetime64[{unit}]").astype(np.int64)
    day_of_year = (ticks - year_start) / (24 * 60.0 * per_minute)
    columns = []
    for value, period in ((hour, 24.0), (day, 7.0), (day_of_year, 365.25)):
        angle = 2 * np.pi * value / period
        columns += [np.sin(angle), np.cos(angle)]
    if holiday is not None:
        columns.append(_holiday(holiday, hour.shape))
    return np.stack(columns, axis=-1).astype(np.float32)


def _datetimes(timestamps) -> np.ndarray:
    """``timestamps`` as a datetime64 array without NaT: datetime64 kept, ISO 8601 strings
    read (spaces around them dropped), anything else refused."""
    t = np.asarray(timestamps)
    texts = t.dtype.kind in "US" or (t.dtype == object and all(isinstance(x, str) for x in t.ravel()))
    if texts and t.size:
        flat = [x.decode() if isinstance(x, bytes) else str(x) for x in t.ravel()]
        t = read_times(flat, lambda i: f"timestamps[{i}]").reshape(t.shape)
    if not np.issubdtype(t.dtype, np.datetime64):
        raise TypeError(f"timestamps must be numpy datetime64 values or ISO 8601 strings, got {t.dtype}; "
                        "convert with np.asarray(times, dtype='datetime64[m]')")
    missing = np.isnat(t)
    if missing.any():
        raise ValueError(f"timestamps hold NaT (a missing time) at row {int(np.argmax(missing.ravel()))} "
                         f"({int(missing.sum())} of {t.size}): calendar features of a missing time mean "
                         "nothing; drop those rows or fill their times first")
    return t


def _holiday(holiday, shape) -> np.ndarray:
    """The holiday flags as float64 (T,), each finite, else raise naming the problem."""
    try:
        flags = np.asarray(holiday, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"holiday must be (T,) numbers (a 0/1 flag per time), got "
                        f"{np.asarray(holiday).dtype} {np.ravel(holiday)[:3].tolist()}") from None
    if flags.shape != shape:
        raise ValueError(f"holiday must be (T,) = {shape}, got {flags.shape}")
    if not np.isfinite(flags).all():
        row = int(np.argmin(np.isfinite(flags)))
        raise ValueError(f"holiday holds {flags[row]} at row {row}; a holiday flag is a finite number "
                         "(0 or 1): fill it first")
    return flags
