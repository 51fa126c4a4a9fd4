"""The `Series` type: timestamps and float32 values by channel, from and to a pandas DataFrame, and
ISO 8601 times read by pandas (`read_times`)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True, eq=False)
class Series:
    """A regularly or irregularly sampled multivariate series.

    ``timestamps`` numpy ``datetime64`` (T,), strictly increasing (checked); `load_csv` gives
    minutes (``datetime64[m]``), or a finer unit where a stamp needs one. ``values`` (T, C)
    real numbers, float32 as loaded; another float dtype is kept as given but must fit
    float32's range, which windows and models use (checked; NaN marks a gap and is kept).
    ``columns`` the C channel names, distinct.
    """

    timestamps: np.ndarray
    values: np.ndarray
    columns: tuple[str, ...]
    name: str = ""

    def __post_init__(self):
        stamps = self.timestamps
        if not isinstance(stamps, np.ndarray) or not np.issubdtype(stamps.dtype, np.datetime64):
            kind = stamps.dtype if isinstance(stamps, np.ndarray) else type(stamps).__name__
            raise TypeError(f"timestamps must be a numpy datetime64 array, got {kind}; convert with "
                            "np.asarray(times, dtype='datetime64[m]')")
        if not isinstance(self.values, np.ndarray):
            raise TypeError(f"values must be a numpy array (T, C), got {type(self.values).__name__}; "
                            "convert with np.asarray(values, dtype=np.float32)")
        _check_float32_range(self.values)
        if self.values.ndim == 2 and self.values.shape[1] == 0 and not len(self.columns):
            raise ValueError(f"a Series needs at least one channel: values {self.values.shape}, columns "
                             f"{tuple(self.columns)}; keep at least one column (e.g. select('demand_mw'))")
        if len(set(self.columns)) != len(self.columns):
            raise ValueError(f"columns must be distinct names, got {tuple(self.columns)}")
        if self.values.ndim != 2 or self.values.shape[1] != len(self.columns):
            raise ValueError(f"values must be (T, C) with C = {len(self.columns)} columns "
                             f"{self.columns}, got shape {self.values.shape}")
        if self.timestamps.shape != (self.values.shape[0],):
            raise ValueError(f"timestamps must be (T,) = ({self.values.shape[0]},), "
                             f"got shape {self.timestamps.shape}")
        later = self.timestamps[1:] > self.timestamps[:-1]
        if not later.all():
            i = int(np.argmin(later)) + 1
            raise ValueError(f"timestamps must be strictly increasing: row {i} ({self.timestamps[i]}) does "
                             f"not come after row {i - 1} ({self.timestamps[i - 1]}); sort the rows "
                             "(order = np.argsort(timestamps)) and drop repeated times first")

    @classmethod
    def from_frame(cls, frame, *, time: str | None = None, columns=None, name: str | None = None) -> "Series":
        """A series from a pandas DataFrame, such as one a student brings (``pd.read_csv``, ...).

        Times come from the column ``time``, or, when ``time`` is None, from the frame's
        ``DatetimeIndex``: datetimes (a zone is dropped, keeping the clock times, as `load_csv`
        keeps a file's) or ISO 8601 strings (`read_times`), strictly increasing. Channels are
        ``columns`` (default: every column but the time), each of real numbers (bool, int,
        float); a missing value (NaN, ``pd.NA``) is kept as NaN, a gap. ``name`` defaults to
        ``frame.attrs["name"]`` (which `to_frame` sets), else "". Values become float32 and must
        fit its range.

        >>> frame = pd.DataFrame({"time": ["2014-01-01 00:00", "2014-01-01 01:00"], "mw": [4.5, 5.0]})
        >>> Series.from_frame(frame, time="time", name="demand")
        Series('demand', T=2, columns=['mw'], 2014-01-01T00:00 .. 2014-01-01T01:00)
        """
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}; for arrays, "
                            "build Series(timestamps, values, columns) directly")
        if time is None:
            if not isinstance(frame.index, pd.DatetimeIndex):
                raise ValueError(f"from_frame needs the times: pass time='<column>', one of "
                                 f"{list(frame.columns)}, or give the frame a DatetimeIndex "
                                 f"(frame.set_index('time')); its index is a {type(frame.index).__name__}")
            times, label = frame.index, "the index"
        else:
            _frame_columns(frame, [time], "time")
            times, label = frame[time], f"column {time!r}"
        stamps = _frame_times(times, label)
        if isinstance(columns, str):
            raise TypeError(f"columns must be a list of column names, e.g. columns=[{columns!r}], got the "
                            f"str {columns!r} (a str would be read letter by letter)")
        names = [c for c in frame.columns if c != time] if columns is None else list(columns)
        _frame_columns(frame, names, "columns")
        values = frame[names].to_numpy(dtype=np.float64, na_value=np.nan)       # (T, C)
        bad = _outside_float32(values)
        if bad.any():
            row, column = np.argwhere(bad)[0]
            value = float(values[row, column])
            raise ValueError(f"column {names[column]!r} row {row} holds {value!r}, {_float32_problem(value)}")
        name = frame.attrs.get("name", "") if name is None else name
        return cls(stamps, values.astype(np.float32), tuple(map(str, names)), name)

    def to_frame(self):
        """The series as a pandas DataFrame: one float32 column per channel, the times as its
        ``DatetimeIndex`` named ``time``, the name in ``attrs["name"]``; `from_frame` reads it
        back. The frame holds a copy of the values."""
        frame = pd.DataFrame(self.values.copy(), index=pd.DatetimeIndex(self.timestamps, name="time"),
                             columns=list(self.columns))
        frame.attrs["name"] = self.name
        return frame

    def rows(self, start: int, stop: int) -> "Series":
        """Rows ``start:stop`` as a series of their own: copies, so that scaling it in place
        changes neither this series nor another part cut from it."""
        return Series(self.timestamps[start:stop].copy(), self.values[start:stop].copy(), self.columns,
                      self.name)

    def __len__(self) -> int:
        return self.values.shape[0]

    def __repr__(self) -> str:
        span = f"{self.timestamps[0]} .. {self.timestamps[-1]}" if len(self) else "empty"
        return f"Series({self.name!r}, T={len(self)}, columns={list(self.columns)}, {span})"

    def column(self, name: str) -> np.ndarray:
        """One channel as a (T,) float32 array."""
        return self.values[:, self._index(name)]

    def select(self, *names: str) -> "Series":
        """A series with only the named channels, in that order."""
        idx = [self._index(n) for n in names]
        return Series(self.timestamps, self.values[:, idx], tuple(names), self.name)

    def between(self, start=None, stop=None) -> "Series":
        """The part with ``start <= timestamp < stop`` (either bound may be None)."""
        keep = np.ones(len(self), dtype=bool)
        if start is not None:
            keep &= self.timestamps >= _time("start", start)
        if stop is not None:
            keep &= self.timestamps < _time("stop", stop)
        return Series(self.timestamps[keep], self.values[keep], self.columns, self.name)

    def _index(self, name: str) -> int:
        if name not in self.columns:
            raise ValueError(f"no column {name!r}; columns are {list(self.columns)}")
        return self.columns.index(name)


def _time(name: str, value) -> np.datetime64:
    """``value`` (an ISO string, a datetime64, a datetime) as a datetime64, or a ValueError naming
    ``name``; NaT (a missing time) is refused, as no time compares with it."""
    try:
        stamp = np.datetime64(value)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{name} must be a date or time numpy reads, such as '2014-01-01T00:00', got "
                         f"{value!r} ({err})") from None
    if np.isnat(stamp):
        raise ValueError(f"{name} must be a date or time numpy reads, such as '2014-01-01T00:00', got "
                         f"{value!r}, a missing time (NaT)")
    return stamp


def _frame_columns(frame, names: list, argument: str) -> None:
    """Raise unless each of ``names`` is one column of ``frame``, of real numbers (the time
    column, ``argument == "time"``, may be of any kind); at least one."""
    given = list(frame.columns)
    if not names:
        raise ValueError(f"a Series needs at least one channel: columns {names} of {given}; pass "
                         "columns=[...] naming at least one")
    missing = [c for c in names if c not in given]
    if missing:
        which = f"no time column {missing[0]!r}" if argument == "time" else f"no columns {missing}"
        raise ValueError(f"the frame has {which}; its columns are {given}")
    repeated = [c for c in names if given.count(c) > 1]
    if repeated:
        raise ValueError(f"column {repeated[0]!r} appears {given.count(repeated[0])} times in the frame's "
                         f"columns {given}; give each column its own name")
    if len(set(names)) != len(names):
        raise ValueError(f"columns must be distinct names, got {names}")
    if argument == "time":
        return
    other = [c for c in names if not pd.api.types.is_numeric_dtype(frame[c].dtype)
             or pd.api.types.is_complex_dtype(frame[c].dtype)]
    if other:
        numeric = [c for c in given if c not in other and pd.api.types.is_numeric_dtype(frame[c].dtype)]
        raise TypeError(f"column {other[0]!r} holds {frame[other[0]].dtype} values, not real numbers; "
                        f"convert it (pd.to_numeric(frame[{other[0]!r}])) or leave it out: "
                        f"columns={numeric}")


def _frame_times(times, label: str) -> np.ndarray:
    """A frame's times (a column or a DatetimeIndex) as datetime64 on their clock, in the
    coarsest unit that holds them, checked: no NaT, strictly increasing."""
    zone = getattr(times.dtype, "tz", None)
    if zone is not None:
        times = times.tz_localize(None) if isinstance(times, pd.Index) else times.dt.tz_localize(None)
    if times.dtype.kind == "M":
        stamps = times.to_numpy()
    elif pd.api.types.is_string_dtype(times.dtype) or pd.api.types.is_object_dtype(times.dtype):
        stamps = read_times(list(times), lambda i: f"{label} row {i}")
    else:
        raise TypeError(f"the times ({label}) must be datetimes or ISO 8601 strings, got {times.dtype}; "
                        "convert them with pd.to_datetime(...)")
    missing = np.isnat(stamps)
    if missing.any():
        raise ValueError(f"the times ({label}) hold NaT (a missing time) at row {int(np.argmax(missing))}; "
                         "drop those rows or fill their times first")
    stamps = _coarsest(stamps)
    later = stamps[1:] > stamps[:-1]
    if not later.all():
        i = int(np.argmin(later)) + 1
        dst = (f"; the times of zone {zone} repeat an hour where daylight saving ends: convert them to UTC "
               "or a fixed offset first (.dt.tz_convert('UTC'))" if zone is not None else "")
        raise ValueError(f"the times ({label}) must be strictly increasing: row {i} ({stamps[i]}) does not "
                         f"come after row {i - 1} ({stamps[i - 1]}); sort the frame (frame.sort_values(...) "
                         f"or frame.sort_index()) and drop repeated times first{dst}")
    return stamps


def _check_real(values: np.ndarray) -> np.ndarray:
    """``values`` if they hold real numbers (float, int or bool), else a TypeError with the fix."""
    if not (np.issubdtype(values.dtype, np.floating) or np.issubdtype(values.dtype, np.integer)
            or values.dtype == np.bool_):
        raise TypeError(f"values must hold real numbers (float or int), got dtype {values.dtype}; "
                        "convert with np.asarray(values, dtype=np.float32)")
    return values


def _check_float32_range(values: np.ndarray) -> None:
    """Raise unless ``values`` are real numbers that float32 holds (NaN and inf pass: a gap is
    a gap, and `Standardizer.fit` refuses them by name)."""
    _check_real(values)
    if values.dtype == np.float32 or not np.issubdtype(values.dtype, np.floating):
        return
    bad = _outside_float32(values)
    if bad.any():
        row, channel = np.argwhere(bad)[0]
        value = float(values[row, channel])
        raise ValueError(f"values row {row}, channel {channel} holds {value!r}, {_float32_problem(value)}")


_UNITS = ("m", "s", "ms", "us", "ns")     # datetime64 units, from the coarsest the loader gives
TIME_FORMS = "2014-02-01, 2014-02-01T10:30, 2014-02-01 10:30:15.5, 2014-02-01T10:30+10:00"


def read_times(texts, where) -> np.ndarray:
    """ISO 8601 time stamps (strings) as datetime64, read by pandas (``format="ISO8601"``):
    a date, optionally a time after ``T`` or a space (seconds and their fractions too), and
    optionally a UTC offset (``Z``, ``+10:00``), the same for every stamp. Stamps with one offset
    are read on that clock (the offset is dropped: numpy's datetime64 has no zones). The unit is
    minutes, or the coarsest finer one (s, ms, us, ns) that holds every stamp exactly. Spaces
    around a stamp are dropped. ``where(i)`` names stamp i in a message (``"tiny.csv line 5"``,
    ``"timestamps[3]"``): a stamp pandas cannot read, or whose offset differs from those before
    it, is refused by name."""
    texts = [str(t).strip() for t in texts]
    try:
        stamps = _iso_times(texts)
    except (ValueError, OverflowError):        # pandas' OutOfBoundsDatetime is a ValueError
        i = _first_unread(texts)
        try:
            _iso_times(texts[i:i + 1])
        except (ValueError, OverflowError) as err:
            reason = str(err).splitlines()[0]
            raise ValueError(f"{where(i)}: cannot read time {texts[i]!r}: expected an ISO 8601 date, "
                             f"optionally with a time and a UTC offset ({TIME_FORMS}); pandas says: "
                             f"{reason}") from None
        raise ValueError(f"{where(i)}: time {texts[i]!r} has another UTC offset than the times before it "
                         f"(or one where they have none, or none where they have one); times are read on "
                         "one clock: convert them to one offset (or to UTC) first") from None
    missing = np.isnat(stamps)
    if missing.any():
        i = int(np.argmax(missing))
        raise ValueError(f"{where(i)}: time {texts[i]!r} is a missing time (pandas reads it as NaT); fill "
                         "it or drop the row")
    return _coarsest(stamps)


def _iso_times(texts: list[str]) -> np.ndarray:
    """``texts`` as naive datetime64 on their one clock, else a ValueError (pandas' own, or
    one for times on several clocks, which an older pandas reads as objects)."""
    parsed = pd.to_datetime(pd.Series(texts, dtype=object), format="ISO8601")
    if parsed.dtype.kind != "M":
        raise ValueError("times on several clocks")
    if isinstance(parsed.dtype, pd.DatetimeTZDtype):
        parsed = parsed.dt.tz_localize(None)               # the clock times, as written
    return parsed.to_numpy()


def _first_unread(texts: list[str]) -> int:
    """The index of the first stamp from which ``texts`` no longer read together."""
    read, unread = 0, len(texts)                           # texts[:read] read; texts[:unread] do not
    while unread - read > 1:
        middle = (read + unread) // 2
        try:
            _iso_times(texts[:middle])
            read = middle
        except (ValueError, OverflowError):
            unread = middle
    return unread - 1


def _coarsest(stamps: np.ndarray) -> np.ndarray:
    """``stamps`` in the coarsest of minutes, s, ms, us, ns that holds every one exactly."""
    for unit in _UNITS:
        coarse = stamps.astype(f"datetime64[{unit}]")
        if (coarse == stamps).all():
            return coarse
    return stamps


# float32 rounds a magnitude from here up to inf; below its smallest normal number it keeps
# fewer significant digits (a subnormal), and below 1.4e-45 nothing (0).
_F32_INF_FROM = float.fromhex("0x1.ffffffp+127")
_F32_TINY = float(np.finfo(np.float32).tiny)
F32_RANGE = "float32's range (normal numbers 1.2e-38 to 3.4e38 in size)"


def _float32_problem(value: float) -> str | None:
    """Why float32 cannot keep the finite ``value``, with the fix; None when it can."""
    size = abs(value)
    if size == 0.0 or _F32_TINY <= size < _F32_INF_FROM:
        return None
    why = ("" if size >= _F32_INF_FROM else
           "float32 would keep it with fewer significant digits, or as 0: ")
    fix = "kW -> MW, divide by 1000" if size >= _F32_INF_FROM else "W -> mW, multiply by 1000"
    return f"outside {F32_RANGE}, which the series is kept in: {why}rescale the column first (e.g. {fix})"


def _outside_float32(values: np.ndarray) -> np.ndarray:
    """Where the finite float64 ``values`` are outside float32's normal range (0 is inside)."""
    size = np.abs(values)
    return np.isfinite(size) & (size != 0) & ((size >= _F32_INF_FROM) | (size < _F32_TINY))
