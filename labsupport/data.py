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
import os
import re
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .validation import check_positive_int

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

    ``timestamps`` numpy ``datetime64[m]`` (T,), strictly increasing (checked);
    ``values`` float32 (T, C); ``columns`` the C channel names, distinct.
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
            keep &= self.timestamps >= np.datetime64(start)
        if stop is not None:
            keep &= self.timestamps < np.datetime64(stop)
        return Series(self.timestamps[keep], self.values[keep], self.columns, self.name)

    def _index(self, name: str) -> int:
        if name not in self.columns:
            raise ValueError(f"no column {name!r}; columns are {list(self.columns)}")
        return self.columns.index(name)


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


# ISO minutes (2016-07-01T00:00) or date, space, time with seconds (2016-07-01 00:00:00, as in ETT).
_TIME = re.compile(r"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d)(?::(\d\d))?")
_OFFSET = re.compile(r".*\d\d:\d\d(?::\d\d(?:\.\d+)?)?\s*(Z|[+-]\d\d:?\d\d)")   # ...+10:00, ...Z


def _parse_time(text: str, where: str) -> np.datetime64:
    """``YYYY-MM-DDTHH:MM`` or ``YYYY-MM-DD HH:MM:SS`` as ``datetime64[m]``."""
    match = _TIME.fullmatch(text)
    offset = _OFFSET.fullmatch(text)
    if offset:      # numpy would shift the time to UTC, and the book's times are local (AEST)
        raise ValueError(f"{where}: time {text!r} carries a UTC offset ({offset[1]}); load_csv reads "
                         "local times without one and will not shift them to UTC: remove the offset "
                         "(all rows in one zone), or convert the times to one zone first")
    if match and match[3] not in (None, "00"):
        # numpy would silently drop the seconds at minute resolution
        raise ValueError(f"{where}: time {text!r} has seconds {match[3]}; expected whole minutes (:00)")
    try:
        return np.datetime64(f"{match[1]}T{match[2]}" if match else text, "m")
    except ValueError:
        raise ValueError(f"{where}: cannot read time {text!r}") from None


def _parse_float(text: str, where: str, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{where}: column {column!r} holds {text!r}, not a number") from None
    if not np.isfinite(value):
        raise ValueError(f"{where}: column {column!r} holds {text!r}, not a finite number")
    return value


def load_csv(path, *, time_column: str = "time", columns=None, sha256: str | None = None,
             name: str | None = None) -> Series:
    """Read a CSV with a header, one time column and numeric columns, into a `Series`.

    Times are ``YYYY-MM-DDTHH:MM`` or ``YYYY-MM-DD HH:MM:SS`` (whole minutes, local,
    without a UTC offset). ``columns`` selects channels (default: all but the time
    column); ``sha256``, when given, is checked first. A malformed line raises
    ``ValueError`` naming the file, the line number and what was wrong there; so do a
    column name the header repeats and, unless the checksum vouches for the file, a last
    line without a line break (a file cut short). A UTF-8 byte-order mark (Excel) is read.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no data file at {path}")
    if sha256 is not None:
        verify_sha256(path, sha256)
    complete = sha256 is not None or _ends_with_line_break(path)
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if not header or time_column not in header:
            raise ValueError(f"{path.name} line 1: header {header} has no time column {time_column!r}")
        wanted = [c for c in header if c != time_column] if columns is None else list(columns)
        missing = [c for c in wanted if c not in header]
        if missing:
            raise ValueError(f"{path.name} line 1: header {header} lacks columns {missing}")
        for c in [time_column, *wanted]:
            if header.count(c) > 1:
                raise ValueError(f"{path.name} line 1: column {c!r} appears {header.count(c)} times in "
                                 f"the header {header}; give each column its own name")
        if len(set(wanted)) != len(wanted):
            raise ValueError(f"columns must be distinct names, got {wanted}")
        t_idx, c_idx = header.index(time_column), [header.index(c) for c in wanted]
        stamps, rows = [], []
        for line_no, row in enumerate(reader, start=2):
            where = f"{path.name} line {line_no}"
            if len(row) != len(header):
                raise ValueError(f"{where}: {len(row)} fields, expected {len(header)} ({header})")
            stamp = _parse_time(row[t_idx], where)
            if stamps and stamp <= stamps[-1]:
                raise ValueError(f"{where}: time {row[t_idx]} does not come after {stamps[-1]}")
            stamps.append(stamp)
            rows.append([_parse_float(row[i], where, header[i]) for i in c_idx])
    if not rows:
        raise ValueError(f"{path.name}: no data rows after the header")
    if not complete:
        raise ValueError(f"{where}: the file ends inside this line ({','.join(row)!r}) without a line "
                         "break: it looks cut short (an interrupted download or copy); get the whole "
                         "file again, or, if this line is complete, end the file with a line break")
    return Series(np.array(stamps, dtype="datetime64[m]"), np.array(rows, dtype=np.float32),
                  tuple(wanted), name or path.stem)


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
    if context < 0:
        raise ValueError(f"context must be >= 0, got {context}")
    t = series.timestamps
    b1, b2 = np.searchsorted(t, np.datetime64(train_end)), np.searchsorted(t, np.datetime64(val_end))
    if not 0 < b1 < b2 < len(series):
        raise ValueError(f"borders {train_end}, {val_end} leave an empty part of {series!r}")
    if context > b1:
        raise ValueError(f"context {context} is longer than the training part ({b1} steps)")

    return series.rows(0, b1), series.rows(b1 - context, b2), series.rows(b2 - context, len(series))


class Standardizer:
    """Per-channel ``(x - mean) / std`` with statistics from the data passed to `fit` only.

    Works on numpy arrays and torch tensors whose last axis is the channel axis, and
    refuses data with another number of channels than it was fitted on (pass
    ``channels`` to scale a subset). A constant training channel (std below ``eps``) gets
    std 1, so it is only centred, never blown up by ``1 / eps``.
    """

    def __init__(self, eps: float = 1e-8):
        self.eps = eps
        self.mean: np.ndarray | None = None
        self.std: np.ndarray | None = None

    def fit(self, values) -> "Standardizer":
        x = np.asarray(values, dtype=np.float64)
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
            mean, std = mean[channels], std[channels]
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
    if not 0 <= context <= b1:
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
    x = values.detach().cpu().numpy() if is_torch else np.asarray(values)
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
    (365.25 days). Sine/cosine pairs make 23:00 and 00:00 neighbours.
    """
    t = np.asarray(timestamps).astype("datetime64[m]")
    minutes = t.astype(np.int64)
    hour = (minutes % (24 * 60)) / 60.0
    day = (t.astype("datetime64[D]").astype(np.int64) + 3) % 7          # 1970-01-01 was a Thursday
    year_start = t.astype("datetime64[Y]").astype("datetime64[m]").astype(np.int64)
    day_of_year = (minutes - year_start) / (24 * 60.0)
    columns = []
    for value, period in ((hour, 24.0), (day, 7.0), (day_of_year, 365.25)):
        angle = 2 * np.pi * value / period
        columns += [np.sin(angle), np.cos(angle)]
    if holiday is not None:
        holiday = np.asarray(holiday, dtype=np.float64)
        if holiday.shape != hour.shape:
            raise ValueError(f"holiday must be (T,) = {hour.shape}, got {holiday.shape}")
        columns.append(holiday)
    return np.stack(columns, axis=-1).astype(np.float32)


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
