"""The ETT benchmark (ETTh1, ETTh2, ETTm1, ETTm2): downloaded with a pinned sha256, split by rows
as the Informer, Autoformer and PatchTST code split it."""
from __future__ import annotations

import http.client
import os
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..validation import (
    check_bool,
    check_nonnegative_int,
)
from .files import ChecksumError, load_csv, sha256_of, verify_sha256
from .prepare import Standardizer
from .series import Series

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
    first = np.diff(series.timestamps[:100])
    found = first[0] if len(first) else step
    if found != step and (first == found).all():    # an hourly file read as ETTm, or the other way
        other = "ETTh1 or ETTh2" if name.startswith("ETTm") else "ETTm1 or ETTm2"
        raise ValueError(f"{path.name} has a row every {found.astype('timedelta64[m]')}, but {name} has "
                         f"one every {step}: it looks like {other}; pass that name "
                         f"(load_ett('{other[:5]}', ...))")
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
