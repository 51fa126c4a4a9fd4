"""The book's data: a small ``Series`` type, loaders with checksums, the fixed temporal
split, scaling fitted on the training part only, forecasting windows and patches.

The default series is hourly electricity demand and temperature for Victoria,
Australia, 2012-2014 (26,304 hours), shipped inside the package (``labsupport/datasets/``;
provenance in the repository's ``data/README.md``). The
ETT benchmark (`load_ett`) is downloaded on demand, checked against pinned sha256s.
"""
from __future__ import annotations

import csv
import hashlib
import http.client
import numbers
import os
import re
import tempfile
import urllib.request
from dataclasses import dataclass
from datetime import date, timedelta
from functools import lru_cache
from pathlib import Path

import numpy as np
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
    size = np.abs(values)
    bad = np.isfinite(size) & (size != 0) & ((size >= _F32_INF_FROM) | (size < _F32_TINY))
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


# ISO 8601 time stamps: a calendar date (2014-02-01, 20140201, or the month 2014-02, or the
# year 2014), an ordinal date (2014-032, 2014032) or a week date (2014-W05-6, 2014W056, or the
# week 2014-W05); optionally T (t, or a space) and a time hh, hh:mm, hh:mm:ss (basic hhmm, hhmmss)
# whose last part may carry a decimal fraction (. or ,); optionally Z or an offset +hh:mm, +hhmm, +hh.
_ISO = re.compile(
    r"(?P<date>(?P<y>\d{4})(?:-(?P<m>\d\d)(?:-(?P<d>\d\d))?|(?P<bm>\d\d)(?P<bd>\d\d)|-?(?P<ord>\d{3})"
    r"|-?W(?P<w>\d\d)(?:-?(?P<wd>\d))?)?)"
    r"(?:[Tt ](?P<hh>\d\d)(?::?(?P<mm>\d\d)(?::?(?P<ss>\d\d))?)?(?:[.,](?P<frac>\d+))?"
    r"(?P<tz>[Zz]|[+-]\d\d(?::?\d\d)?)?)?")
_NS = {"h": 3600 * 10**9, "m": 60 * 10**9, "s": 10**9}
_DAY_NS = 24 * _NS["h"]
_EPOCH = date(1970, 1, 1).toordinal()
# datetime64 units from the coarsest the loader uses (minutes) to the finest (nanoseconds)
_UNITS = (("m", 60 * 10**9), ("s", 10**9), ("ms", 10**6), ("us", 10**3), ("ns", 1))
_NS_RANGE = "1677-09-21 to 2262-04-11"        # what int64 nanoseconds from 1970 reach


def _parse_time(text: str, where: str) -> tuple[int, int | None, str | None]:
    """An ISO 8601 time stamp as (nanoseconds since 1970-01-01 on its own clock, its UTC
    offset in minutes or None, the offset as written); ``where`` starts every error."""
    match = _ISO.fullmatch(text)
    if match is None:
        raise ValueError(f"{where}: cannot read time {text!r}: expected an ISO 8601 date, optionally "
                         "with a time and a UTC offset (2014-02-01, 2014-02-01T10:30, "
                         "2014-02-01 10:30:15.5+10:00, 2014-032, 2014-W05-6)")
    try:
        days = _days(match["date"])
    except ValueError as err:
        raise ValueError(f"{where}: time {text!r} names no day: {err}") from None
    offset, shown = _offset(match["tz"], text, where)
    return days * _DAY_NS + _time_of_day(match, text, where), offset, shown


@lru_cache(maxsize=4096)
def _days(text: str) -> int:
    """Days since 1970-01-01 of an ISO 8601 date (calendar, ordinal or week form)."""
    g = _ISO.fullmatch(text).groupdict()
    year = int(g["y"])
    if g["ord"]:
        day = _ordinal_date(year, int(g["ord"]))
    elif g["w"]:
        day = _week_date(year, int(g["w"]), int(g["wd"] or 1))
    else:
        day = date(year, int(g["m"] or g["bm"] or 1), int(g["d"] or g["bd"] or 1))
    return day.toordinal() - _EPOCH


def _ordinal_date(year: int, n: int) -> date:
    length = (date(year + 1, 1, 1) - date(year, 1, 1)).days if year < 9999 else 365
    if not 1 <= n <= length:
        raise ValueError(f"{year} has {length} days, got day {n}")
    return date(year, 1, 1) + timedelta(days=n - 1)


def _week_date(year: int, week: int, weekday: int) -> date:
    if not 1 <= weekday <= 7:
        raise ValueError(f"weekday must be in 1..7, got {weekday}")
    weeks = date(year, 12, 28).isocalendar()[1]               # 28 December is always in the last week
    if not 1 <= week <= weeks:
        raise ValueError(f"{year} has {weeks} ISO weeks, got week {week}")
    return date.fromisocalendar(year, week, weekday)


def _time_of_day(match, text: str, where: str) -> int:
    """Nanoseconds since midnight; 24:00 is the next midnight. Exact, or refused."""
    if match["hh"] is None:
        return 0
    h, m, s, frac = int(match["hh"]), int(match["mm"] or 0), int(match["ss"] or 0), match["frac"] or "0"
    if h == 24:
        if m or s or int(frac):
            raise ValueError(f"{where}: time {text!r}: 24:00 ends a day, and nothing comes after it; "
                             "write the next day's time instead")
        return _DAY_NS
    for part, value, top in (("hour", h, 24), ("minute", m, 59), ("second", s, 59)):
        if part == "second" and value == 60:
            raise ValueError(f"{where}: time {text!r} is a leap second; numpy's datetime64 counts none: "
                             f"drop the row or write {match['date']}T{match['hh']}:{match['mm']}:59")
        if value > top:
            raise ValueError(f"{where}: time {text!r} has {part} {value}; expected 00-{top}")
    unit = _NS["s" if match["ss"] else "m" if match["mm"] else "h"]    # the fraction's part
    fraction, rest = divmod(int(frac) * unit, 10 ** len(frac))
    if rest:
        raise ValueError(f"{where}: time {text!r} is finer than a nanosecond, the finest datetime64 "
                         "unit kept here; round it to nanoseconds first")
    return (h * 3600 + m * 60 + s) * _NS["s"] + fraction


def _offset(tz, text: str, where: str) -> tuple[int | None, str | None]:
    """A UTC offset (Z, +hh:mm, +hhmm, +hh) as (minutes east of UTC, its +hh:mm form)."""
    if tz is None:
        return None, None
    if tz in "Zz":
        return 0, "Z"
    digits = tz[1:].replace(":", "")
    h, m = int(digits[:2]), int(digits[2:] or 0)
    if h > 23 or m > 59:
        raise ValueError(f"{where}: time {text!r} has UTC offset {tz}; expected hours 00-23 and "
                         "minutes 00-59")
    return (h * 60 + m) * (-1 if tz[0] == "-" else 1), f"{tz[0]}{h:02d}:{m:02d}"


def _finest_unit(ns: int) -> int:
    """Index in `_UNITS` of the coarsest unit that holds ``ns`` nanoseconds exactly."""
    return next(i for i, (_, size) in enumerate(_UNITS) if ns % size == 0)


def _stamp_array(stamps: list[int], texts: list[str], where) -> np.ndarray:
    """The stamps (nanoseconds on the file's clock) as datetime64 in the coarsest unit, from
    minutes down to nanoseconds, that holds every one of them exactly; ``where(i)`` names
    stamp i in a message (``"tiny.csv line 5"``, ``"timestamps[3]"``)."""
    finest = max((_finest_unit(t) for t in stamps), default=0)
    unit, size = _UNITS[finest]
    ticks = [t // size for t in stamps]
    if unit == "ns" and not -(2**63) < min(ticks) <= max(ticks) < 2**63:
        i = next(i for i, t in enumerate(ticks) if not -(2**63) < t < 2**63)
        needs = next(j for j, t in enumerate(stamps) if _finest_unit(t) == finest)
        why = "needs nanoseconds" if i == needs else (
            f"lies outside {_NS_RANGE}, and {where(needs)} ({texts[needs]!r}) needs nanoseconds")
        raise ValueError(f"{where(i)}: time {texts[i]!r} {why}, and datetime64[ns] reaches "
                         f"only {_NS_RANGE}; round the times to microseconds")
    return np.array(ticks, dtype=np.int64).view(f"datetime64[{unit}]")


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


def _parse_float(text: str, where: str, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{where}: column {column!r} holds {text!r}, not a number") from None
    if not np.isfinite(value):
        raise ValueError(f"{where}: column {column!r} holds {text!r}, not a finite number")
    problem = _float32_problem(value)
    if problem:
        raise ValueError(f"{where}: column {column!r} holds {text!r}, {problem}")
    return value


def load_csv(path, *, time_column: str = "time", columns=None, sha256: str | None = None,
             name: str | None = None) -> Series:
    """Read a CSV with a header, one time column and numeric columns, into a `Series`.

    Times are ISO 8601: a calendar, ordinal or week date (2014-02-01, 20140201, 2014-032,
    2014-W05-6; a year 2014, a month 2014-02 or a week 2014-W05 is its first day), optionally with a
    time after ``T`` or a space (hh, hh:mm, hh:mm:ss, basic hhmmss; the last part may have a
    decimal fraction after ``.`` or ``,``; 24:00 is the next midnight) and a UTC offset (Z,
    +10:00, +1000, +10). Every stamp is kept exactly: ``timestamps`` are ``datetime64[m]``,
    or the coarsest finer unit (s, ms, us, ns) that holds every stamp of the file. A stamp
    that cannot be held exactly (a leap second, finer than a nanosecond) is refused. A file
    whose stamps all carry one UTC offset is read on that clock (the offset is dropped, as
    numpy's datetime64 has no zones); a file that mixes offsets, or stamps with and without
    one, is refused: convert it to one offset or to UTC first.

    Values are kept as float32 (about 7 significant digits); a value outside float32's range
    of normal numbers (1.2e-38 to 3.4e38 in size, or 0) is refused, naming it: rescale the
    column first. ``columns`` selects channels (default: all but the time column);
    ``sha256``, when given, is checked first. A malformed line raises ``ValueError`` naming
    the file, the line number and what was wrong there; so do a column name the header
    repeats and, unless the checksum vouches for the file, a last line without a line break
    (a file cut short). A UTF-8 byte-order mark (Excel) is read.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no data file at {path}")
    if sha256 is not None:
        verify_sha256(path, sha256)
    complete = sha256 is not None or _ends_with_line_break(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            wanted = _header_columns(header, time_column, columns, path.name)
            t_idx, c_idx = header.index(time_column), [header.index(c) for c in wanted]
            stamps, texts, rows, last = _read_rows(reader, header, t_idx, c_idx, path.name)
    except UnicodeDecodeError as err:
        raise ValueError(f"{path.name} is not UTF-8 text (byte {err.object[err.start]:#04x} at offset "
                         f"{err.start}); save it as UTF-8 (in Excel: CSV UTF-8), or convert it, e.g. "
                         "iconv -f latin1 -t utf-8") from None
    if not rows:
        raise ValueError(f"{path.name}: no data rows after the header")
    if not complete:
        raise ValueError(f"{path.name} line {len(rows) + 1}: the file ends inside this line "
                         f"({','.join(last)!r}) without a line break: it looks cut short (an "
                         "interrupted download or copy); get the whole file again, or, if this line "
                         "is complete, end the file with a line break")
    return Series(_stamp_array(stamps, texts, lambda i: f"{path.name} line {i + 2}"),
                  np.array(rows, dtype=np.float32),
                  tuple(wanted), name or path.stem)


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


def _read_rows(reader, header, t_idx: int, c_idx: list[int], name: str):
    """(stamps in nanoseconds, their texts, value rows, the last line's fields) of every data
    line, each checked."""
    stamps, texts, rows, row = [], [], [], None
    first = None                                  # (line, offset, as written) of the first row
    for line_no, row in enumerate(reader, start=2):
        where = f"{name} line {line_no}"
        if len(row) != len(header):
            raise ValueError(f"{where}: {len(row)} fields, expected {len(header)} ({header})")
        text = row[t_idx].strip()                   # spaces around a stamp are not part of it
        stamp, offset, shown = _parse_time(text, where)
        first = first or (f"line {line_no}", offset, shown)
        _same_clock(first, where, text, offset, shown, "load_csv reads one clock per file")
        if stamps and stamp <= stamps[-1]:
            raise ValueError(f"{where}: time {text} does not come after {texts[-1]} (line {line_no - 1})")
        stamps.append(stamp)
        texts.append(text)
        rows.append([_parse_float(row[i], where, header[i]) for i in c_idx])
    return stamps, texts, rows, row


def _same_clock(first: tuple, where: str, text: str, offset, shown, rule: str) -> None:
    """Raise unless a stamp's UTC offset is the first stamp's; ``first`` is (its place, offset,
    the offset as written)."""
    if offset != first[1]:
        has, had = f"UTC offset {shown}" if shown else "no UTC offset", first[2] or "none"
        raise ValueError(f"{where}: time {text!r} has {has}, but {first[0]} has {had}; {rule}: convert "
                         "the times to one offset (or to UTC) first")


def _parse_stamps(texts: list[str]) -> np.ndarray:
    """ISO 8601 strings as datetime64, read as `load_csv` reads a file's times (one clock)."""
    stamps, first = [], None
    for i, text in enumerate(texts):
        stamp, offset, shown = _parse_time(text, f"timestamps[{i}]")
        first = first or (f"timestamps[{i}]", offset, shown)
        _same_clock(first, f"timestamps[{i}]", text, offset, shown, "time_features reads one clock")
        stamps.append(stamp)
    return _stamp_array(stamps, texts, lambda i: f"timestamps[{i}]")


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


def _is_index(c, n: int) -> bool:
    """``c`` is an integer (not a bool) in [0, n)."""
    return isinstance(c, numbers.Integral) and not isinstance(c, (bool, np.bool_)) and 0 <= c < n


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
        if not (isinstance(channels, (list, tuple, np.ndarray)) and all(_is_index(c, n) for c in channels)):
            raise ValueError(f"channels must be a list of indices of the {n} fitted channels (0-{n - 1}), "
                             f"got {channels!r}; e.g. channels=[0] for the first channel alone")
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
    numpy datetime64, or ISO 8601 strings read as `load_csv` reads a file's times; a missing
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
        t = _parse_stamps([x.strip() for x in flat]).reshape(t.shape)
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
