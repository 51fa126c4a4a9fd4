"""The book's data: a small ``Series`` type, loaders with checksums, the fixed temporal
split, scaling fitted on the training part only, forecasting windows and patches.

The default series is hourly electricity demand and temperature for Victoria,
Australia, 2012-2014 (26,304 hours), shipped inside the package (``labsupport/datasets/``;
provenance in the repository's ``data/README.md``). The
ETT benchmark (`load_ett`) is downloaded on demand, checked against pinned sha256s.
"""
from __future__ import annotations

import hashlib
import http.client
import numbers
import os
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .validation import (
    check_bool,
    check_nonnegative_int,
    check_positive_int,
    check_positive_number,
)

VIC_ELEC_FILE = "vic_elec_hourly.csv"
VIC_ELEC_SHA256 = "a08ed31ecfcb1005ff71e1e01385b449d32f8a2de7ee7cd393c169c0ecedc398"

# The book's one split (timestamps in AEST): train 2012-2013, validation 2014-01..06,
# test 2014-07..12. Six months of validation and test each cover a summer and a
# winter half, and two training years show every calendar day twice.
TRAIN_END = "2014-01-01T00:00"
VAL_END = "2014-07-01T00:00"


class ChecksumError(ValueError):
    """A data file's sha256 differs from the one recorded for it."""


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
        names = [c for c in frame.columns if c != time] if columns is None else list(columns)
        _frame_columns(frame, names, "columns")
        values = frame[names].to_numpy(dtype=np.float64, na_value=np.nan)       # (T, C)
        bad = _outside_float32(values)
        if bad.any():
            row, column = np.argwhere(bad)[0]
            raise ValueError(f"column {names[column]!r} row {row} holds {values[row, column]!r}, "
                             f"{_float32_problem(float(values[row, column]))}")
        name = frame.attrs.get("name", "") if name is None else name
        return cls(_frame_times(times, label), values.astype(np.float32), tuple(map(str, names)), name)

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
    later = stamps[1:] > stamps[:-1]
    if not later.all():
        i = int(np.argmin(later)) + 1
        dst = (f"; the times of zone {zone} repeat an hour where daylight saving ends: convert them to UTC "
               "or a fixed offset first (.dt.tz_convert('UTC'))" if zone is not None else "")
        raise ValueError(f"the times ({label}) must be strictly increasing: row {i} ({stamps[i]}) does not "
                         f"come after row {i - 1} ({stamps[i - 1]}); sort the frame (frame.sort_values(...) "
                         f"or frame.sort_index()) and drop repeated times first{dst}")
    return _coarsest(stamps)


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


def data_dir() -> Path:
    """Where the shipped data lives: ``$LABSUPPORT_DATA``, else the package's ``datasets/``."""
    return Path(os.environ.get("LABSUPPORT_DATA", Path(__file__).resolve().parent / "datasets"))


def sha256_of(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def verify_sha256(path, expected: str, *,
                  remedy: str = "restore it (git checkout labsupport/datasets/, or reinstall "
                                "labsupport) or download it again") -> None:
    """Raise `ChecksumError` unless the file's sha256 is ``expected``; ``remedy`` ends the message."""
    actual = sha256_of(path)
    if actual != expected:
        raise ChecksumError(f"sha256 of {Path(path).name} is {actual}, expected {expected}: the file "
                            f"is corrupt, partial or edited; {remedy}")


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


def load_csv(path, *, time_column: str = "time", columns=None, sha256: str | None = None,
             name: str | None = None) -> Series:
    """Read a CSV with a header, one time column and numeric columns, into a `Series`.

    Read with pandas. Times are ISO 8601 as pandas reads them (`read_times`): a date,
    optionally a time after ``T`` or a space (hh:mm, hh:mm:ss, with a decimal fraction) and a
    UTC offset (Z, +10:00), one offset for the whole file, whose stamps are then read on that
    clock. ``timestamps`` are ``datetime64[m]``, or the coarsest finer unit (s, ms, us, ns)
    that holds every stamp of the file.

    Values are kept as float32 (about 7 significant digits); a value outside float32's range
    of normal numbers (1.2e-38 to 3.4e38 in size, or 0) is refused, naming it: rescale the
    column first. ``columns`` selects channels (default: all but the time column);
    ``sha256``, when given, is checked first. A malformed line raises ``ValueError`` naming
    the file, the line number and what was wrong there (a time that does not read or does
    not come after the one before, a value that is not a finite number, an empty field, a
    line with more fields than the header); so do a column name the header repeats and,
    unless the checksum vouches for the file, a last line without a line break (a file cut
    short). A UTF-8 byte-order mark (Excel) is read.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no data file at {path}")
    if sha256 is not None:
        verify_sha256(path, sha256)
    complete = sha256 is not None or _ends_with_line_break(path)
    try:
        lines = pd.read_csv(path, header=None, dtype=str, keep_default_na=False, skip_blank_lines=False,
                            encoding="utf-8-sig").to_numpy()               # every field as written
    except UnicodeDecodeError:
        err = _decode_error(path)
        raise ValueError(f"{path.name} is not UTF-8 text (byte {err.object[err.start]:#04x} at offset "
                         f"{err.start}); save it as UTF-8 (in Excel: CSV UTF-8), or convert it, e.g. "
                         "iconv -f latin1 -t utf-8") from None
    except pd.errors.EmptyDataError:
        lines = np.empty((0, 0), dtype=object)
    except pd.errors.ParserError as err:                     # pandas names the line
        raise ValueError(f"{path.name}: {str(err).strip()}") from None
    header = lines[0].tolist() if len(lines) else []
    wanted = _header_columns(header, time_column, columns, path.name)
    rows = lines[1:]
    if not len(rows):
        raise ValueError(f"{path.name}: no data rows after the header")
    if not complete:
        raise ValueError(f"{path.name} line {len(rows) + 1}: the file ends inside this line "
                         f"({','.join(rows[-1])!r}) without a line break: it looks cut short (an "
                         "interrupted download or copy); get the whole file again, or, if this line "
                         "is complete, end the file with a line break")
    line = lambda i: f"{path.name} line {i + 2}"                                      # noqa: E731
    stamps = read_times(rows[:, header.index(time_column)], line)
    later = stamps[1:] > stamps[:-1]
    if not later.all():
        i = int(np.argmin(later)) + 1
        raise ValueError(f"{line(i)}: time {stamps[i]} does not come after {stamps[i - 1]} (line {i + 1})")
    values = _read_values(rows[:, [header.index(c) for c in wanted]], wanted, line)
    return Series(stamps, values.astype(np.float32), tuple(wanted), name or path.stem)


def _read_values(texts: np.ndarray, columns: list[str], line) -> np.ndarray:
    """The (T, C) fields ``texts`` as float64, each a finite number that float32 holds; else a
    ValueError naming the first bad field by ``line(row)`` and column."""
    try:
        values = texts.astype(np.float64)
    except ValueError:
        row, column = next((r, c) for r, fields in enumerate(texts) for c, text in enumerate(fields)
                           if not _reads_as_float(text))
        text = texts[row, column]
        what = ("is empty: a missing value, or a line with fewer fields than the header"
                if not text.strip() else f"holds {text!r}, not a number")
        raise ValueError(f"{line(row)}: column {columns[column]!r} {what}") from None
    bad = ~np.isfinite(values) | _outside_float32(values)
    if bad.any():
        row, column = np.argwhere(bad)[0]
        text, value = texts[row, column], values[row, column]
        problem = "not a finite number" if not np.isfinite(value) else _float32_problem(value)
        raise ValueError(f"{line(row)}: column {columns[column]!r} holds {text!r}, {problem}")
    return values


def _reads_as_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _decode_error(path: Path) -> UnicodeDecodeError:
    """The first byte of ``path`` that is not UTF-8, as the error decoding the whole file gives."""
    try:
        path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        return err
    raise AssertionError(f"{path} decodes as UTF-8")


def _header_columns(header, time_column: str, columns, name: str) -> list[str]:
    """The value columns to read, after checking the header has them, each once."""
    if not header or time_column not in header:
        raise ValueError(f"{name} line 1: header {header} has no time column {time_column!r}")
    wanted = [c for c in header if c != time_column] if columns is None else list(columns)
    if not wanted:
        raise ValueError(f"columns={list(columns)} selects no channel; pass the names to read, e.g. "
                         f"columns={[c for c in header if c != time_column][:1]}, or columns=None for all"
                         if columns is not None else
                         f"{name} line 1: header {header} has no column besides the time column "
                         f"{time_column!r}: a series needs at least one channel")
    missing = [c for c in wanted if c not in header]
    if missing:
        raise ValueError(f"{name} line 1: header {header} lacks columns {missing}")
    for c in [time_column, *wanted]:
        if header.count(c) > 1:
            raise ValueError(f"{name} line 1: column {c!r} appears {header.count(c)} times in "
                             f"the header {header}; give each column its own name")
    if len(set(wanted)) != len(wanted):
        raise ValueError(f"columns must be distinct names, got {wanted}")
    return wanted


def _ends_with_line_break(path: Path) -> bool:
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() == 0:
            return True
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) in (b"\n", b"\r")


def load_vic_elec(columns=None) -> Series:
    """Hourly Victorian electricity demand (MW), temperature (deg C) and holiday flag (0/1).

    26,304 hours from 2011-12-31 23:00 to 2014-12-31 22:00 AEST (UTC+10, the market's
    clock, no daylight saving): the local calendar years 2012-2014. Checked against
    its recorded sha256; see ``data/README.md`` in the repository for the source and licence.
    """
    path = data_dir() / VIC_ELEC_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{VIC_ELEC_FILE} not found in {path.parent}; reinstall labsupport "
                                "(pip install . in the book's repository: the file ships inside the "
                                "package) or set LABSUPPORT_DATA to a folder that holds it")
    return load_csv(path, columns=columns, sha256=VIC_ELEC_SHA256, name="vic_elec")


def temporal_split(series: Series, *, train_end: str = TRAIN_END, val_end: str = VAL_END,
                   context: int = 0) -> tuple[Series, Series, Series]:
    """Split by time into (train, validation, test); defaults are the book's one split.

    ``context`` > 0 starts validation and test that many steps before their border,
    so the first windows have a full input history from the part before (pass the
    lookback). The history is the past and is never a target; the targets of the
    three parts stay disjoint as long as ``context`` <= the lookback. Each part holds its
    own copy of its rows: scaling one in place changes neither the others nor ``series``.
    """
    context = check_nonnegative_int("context", context)
    t = series.timestamps
    b1, b2 = (np.searchsorted(t, _time(name, value)) for name, value in (("train_end", train_end),
                                                                          ("val_end", val_end)))
    if not 0 < b1 < b2 < len(series):
        raise ValueError(f"borders {train_end}, {val_end} leave an empty part of {series!r}")
    if context > b1:
        raise ValueError(f"context {context} is longer than the training part ({b1} steps)")

    return series.rows(0, b1), series.rows(b1 - context, b2), series.rows(b2 - context, len(series))


def _is_int(c) -> bool:
    """``c`` is an integer, not a bool."""
    return isinstance(c, numbers.Integral) and not isinstance(c, (bool, np.bool_))


class Standardizer:
    """Per-channel ``(x - mean) / std`` with statistics from the data passed to `fit` only.

    Works on numpy arrays and torch tensors whose last axis is the channel axis, and
    refuses data with another number of channels than it was fitted on (pass
    ``channels`` to scale a subset). A constant training channel (std below ``eps``) gets
    std 1, so it is only centred, never blown up by ``1 / eps``.
    """

    def __init__(self, eps: float = 1e-8):
        self.eps = check_positive_number("eps", eps)
        self.mean: np.ndarray | None = None
        self.std: np.ndarray | None = None

    def fit(self, values) -> "Standardizer":
        x = _check_real(np.asarray(values)).astype(np.float64)
        if x.ndim != 2 or len(x) < 2:
            raise ValueError(f"fit expects values (T, C) with T >= 2, got shape {x.shape}")
        bad = ~np.isfinite(x)
        if bad.any():
            row, channel = np.argwhere(bad)[0]
            raise ValueError(f"fit got {int(bad.sum())} NaN or inf values (first at row {row}, channel "
                             f"{channel}); fill or drop them first (e.g. interpolate), or every "
                             "statistic of that channel would be NaN")
        std = x.std(axis=0)
        self.mean = x.mean(axis=0).astype(np.float32)
        self.std = np.where(std < self.eps, 1.0, std).astype(np.float32)      # constant: centre only
        return self

    def _stats(self, x, channels):
        if self.mean is None:
            raise RuntimeError("Standardizer is not fitted: call fit(train_values) first")
        mean, std = self.mean, self.std
        if channels is not None:
            idx = self._channel_indices(channels)
            mean, std = mean[idx], std[idx]
        shape = tuple(np.shape(x))
        width = shape[-1] if shape else None
        if width != len(mean):
            which = (f"channels {list(channels)} select {len(mean)} channel{'s' * (len(mean) != 1)}"
                     if channels is not None else f"it was fitted on {len(self.mean)} channels")
            raise ValueError(f"Standardizer: {which}, but x has {width} on its last axis (shape "
                             f"{shape}); pass channels=[...] to scale a subset, e.g. "
                             "channels=[0] for the first channel alone")
        if isinstance(x, torch.Tensor):
            return torch.as_tensor(mean, device=x.device), torch.as_tensor(std, device=x.device)
        return mean, std

    def _channel_indices(self, channels) -> list[int]:
        """``channels`` as indices of the fitted channels, else a ValueError naming them."""
        n = len(self.mean)
        expected = (f"channels must be a list of indices of the {n} fitted channels (0-{n - 1}), got "
                    f"{channels!r}; e.g. channels=[0] for the first channel alone")
        if not (isinstance(channels, (list, tuple, np.ndarray)) and all(_is_int(c) for c in channels)):
            raise TypeError(expected)
        if not all(0 <= c < n for c in channels):
            raise ValueError(expected)
        return [int(c) for c in channels]

    def transform(self, x, channels=None):
        """Scale ``x (..., C)``; ``channels`` picks the statistics for a subset of channels."""
        mean, std = self._stats(x, channels)
        return (x - mean) / std

    def inverse_transform(self, x, channels=None):
        """Back to the original unit (e.g. MW)."""
        mean, std = self._stats(x, channels)
        return x * std + mean


ETT_NAMES = ("ETTh1", "ETTh2", "ETTm1", "ETTm2")
ETT_URL = "https://raw.githubusercontent.com/zhouhaoyi/ETDataset/main/ETT-small/{name}.csv"
# sha256 of the upstream ETT-small CSVs (17,420 hourly / 69,680 15-minute rows), as pinned
# by tsdm (github.com/randolf-scholz/tsdm, src/tsdm/datasets/ett/ett.py; unchanged across
# its versions). Not yet recomputed here: confirm on the first download with a network.
ETT_SHA256 = {
    "ETTh1": "f18de3ad269cef59bb07b5438d79bb3042d3be49bdeecf01c1cd6d29695ee066",
    "ETTh2": "a3dc2c597b9218c7ce1cd55eb77b283fd459a1d09d753063f944967dd6b9218b",
    "ETTm1": "6ce1759b1a18e3328421d5d75fadcb316c449fcd7cec32820c8dafda71986c9e",
    "ETTm2": "db973ca252c6410a30d0469b13d696cf919648d0f3fd588c60f03fdbdbadd1fd",
}
_PINNED = object()          # default of load_ett(sha256=...): the ETT_SHA256 entry


@dataclass(frozen=True, eq=False)
class EttData:
    """An ETT series, its standard (train, val, test) split and a scaler fitted on train."""

    series: Series
    train: Series
    val: Series
    test: Series
    scaler: Standardizer


def ett_borders(name: str, context: int = 0) -> tuple[tuple[int, int], ...]:
    """Row ranges ``[lo, hi)`` of (train, val, test) in the standard ETT split.

    12 / 4 / 4 months of 30 days: ETTh (hourly) train [0, 8640), val [8640 - context,
    11520), test [11520 - context, 14400); ETTm (15-minute) four times those rows.
    ``context`` starts val and test earlier so their first windows have a full input
    history, as in `temporal_split`. These are ``border1s`` / ``border2s`` of
    ``Dataset_ETT_hour`` / ``Dataset_ETT_minute`` in the Informer code
    (zhouhaoyi/Informer2020, data/data_loader.py), kept by Autoformer and PatchTST,
    with ``context = seq_len``.

    >>> ett_borders("ETTh1", context=336)
    ((0, 8640), (8304, 11520), (11184, 14400))
    """
    if name not in ETT_NAMES:
        raise ValueError(f"unknown ETT dataset {name!r}; expected one of {', '.join(ETT_NAMES)}")
    month = 30 * 24 * (4 if name.startswith("ETTm") else 1)
    b1, b2, b3 = 12 * month, 16 * month, 20 * month
    if not check_nonnegative_int("context", context) <= b1:
        raise ValueError(f"context must be in [0, {b1}] (the training rows of {name}), got {context}")
    return (0, b1), (b1 - context, b2), (b2 - context, b3)


def _download(url: str, path: Path, sha256: str | None) -> None:
    """Fetch ``url`` to ``path`` atomically: into a temporary file beside it, check, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=60) as response:
                    out.write(response.read())
            except (OSError, http.client.HTTPException) as err:   # URLError is an OSError
                raise ConnectionError(f"could not download {url} ({err}); download it by hand "
                                      f"into {path.parent}") from err
        actual = sha256_of(tmp)
        if sha256 is None:
            print(f"sha256 of {path.name} is {actual}; pin it in ETT_SHA256")
        elif actual != sha256:
            raise ChecksumError(f"downloaded {url} has sha256 {actual}, expected {sha256}; nothing was "
                                f"saved. Retry, or check the file and pass its sha256 (or sha256=None)")
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)     # gone already after a successful replace


def load_ett(name: str, root, download: bool = True, *, context: int = 0,
             sha256=_PINNED) -> EttData:
    """An ETT benchmark series (ETTh1, ETTh2, ETTm1, ETTm2) with its standard split.

    Reads ``root/{name}.csv`` (columns HUFL, HULL, MUFL, MULL, LUFL, LULL, OT), first
    downloading it from `ETT_URL` when missing and ``download`` is true. The file is
    checked against ``sha256`` (default: the pinned `ETT_SHA256` entry; ``None``
    skips the check and prints the hash of a download). Split by rows as in the
    Informer / Autoformer / PatchTST code: 12 / 4 / 4 months of 30 days (see
    `ett_borders`); rows after month 20 are unused. The scaler is fitted on train only.
    """
    download = check_bool("download", download)
    borders = ett_borders(name, context)
    expected = ETT_SHA256[name] if sha256 is _PINNED else sha256
    url, path = ETT_URL.format(name=name), Path(root) / f"{name}.csv"
    if not path.is_file():
        if not download:
            raise FileNotFoundError(f"no {path.name} in {root}; download {url} into it, "
                                    "or pass download=True")
        _download(url, path, expected)
    elif expected is not None:
        verify_sha256(path, expected, remedy=f"delete it to download it again, or fetch {url} by hand")
    series = load_csv(path, time_column="date", name=name, sha256=expected)   # a verified file is whole
    need, step = borders[2][1], np.timedelta64(15 if name.startswith("ETTm") else 60, "m")
    if len(series) < need:
        raise ValueError(f"{path.name} has {len(series)} rows; the standard split needs {need} "
                         "(20 months of 30 days): the file is truncated")
    t = series.timestamps
    bad = np.flatnonzero(np.diff(t[:need]) != step)
    if bad.size:            # the split is by rows, so rows must be evenly spaced
        i = bad[0] + 1
        raise ValueError(f"{path.name} line {i + 2}: time {t[i]} follows {t[i - 1]}; expected one row "
                         f"every {step} for {name}")
    train, val, test = (series.rows(lo, hi) for lo, hi in borders)          # copies: context rows overlap
    return EttData(series, train, val, test, Standardizer().fit(train.values))


def make_windows(values, lookback: int, horizon: int, stride: int = 1):
    """Sliding forecasting windows: inputs (N, lookback, C) and targets (N, horizon, C).

    Window n reads ``values[n*stride : n*stride + lookback]`` and predicts the next
    ``horizon`` steps. Accepts (T,) or (T, C) numpy arrays or tensors and returns the
    same kind (float32, contiguous).
    """
    lookback, horizon, stride = (check_positive_int(arg, val) for arg, val in
                                 (("lookback", lookback), ("horizon", horizon), ("stride", stride)))
    is_torch = isinstance(values, torch.Tensor)
    x = values.detach().cpu().numpy() if is_torch else _check_real(np.asarray(values))
    if x.ndim == 1:
        x = x[:, None]                                                  # (T, 1)
    if x.ndim != 2:
        raise ValueError(f"values must be (T,) or (T, C), got shape {x.shape}")
    span = lookback + horizon
    if len(x) < span:
        raise ValueError(f"series of length {len(x)} is shorter than lookback + horizon = {span}")
    starts = np.arange(0, len(x) - span + 1, stride)
    view = np.lib.stride_tricks.sliding_window_view(x, span, axis=0)[starts]   # (N, C, span)
    view = np.ascontiguousarray(view.transpose(0, 2, 1), dtype=np.float32)      # (N, span, C)
    inputs, targets = view[:, :lookback], view[:, lookback:]
    if is_torch:
        return torch.from_numpy(inputs.copy()), torch.from_numpy(targets.copy())
    return inputs, targets


def patchify(x, patch_len: int, stride: int | None = None):
    """Cut the last axis into patches: (..., L) -> (..., N, patch_len).

    Patches are aligned to the end of the window (the most recent step is always
    in the last patch); ``N = (L - patch_len) // stride + 1`` and the oldest
    ``(L - patch_len) % stride`` steps are dropped. ``stride`` defaults to
    ``patch_len`` (no overlap). Works on numpy arrays and tensors.

    >>> patchify(torch.arange(6.0), 3).tolist()
    [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    """
    patch_len = check_positive_int("patch_len", patch_len)
    stride = patch_len if stride is None else check_positive_int("stride", stride)
    if not np.ndim(x):
        raise ValueError(f"x must have a last axis to cut into patches (..., L), got shape "
                         f"{tuple(np.shape(x))}")
    L = x.shape[-1]
    if L < patch_len:
        raise ValueError(f"window length {L} (last axis of shape {tuple(x.shape)}) "
                         f"is shorter than patch_len {patch_len}")
    offset = (L - patch_len) % stride
    if isinstance(x, torch.Tensor):
        return x[..., offset:].unfold(-1, patch_len, stride)              # (..., N, P)
    view = np.lib.stride_tricks.sliding_window_view(np.asarray(x)[..., offset:], patch_len, axis=-1)
    return view[..., ::stride, :]                                          # (..., N, P)


# --- calendar features -------------------------------------------------------------------

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
