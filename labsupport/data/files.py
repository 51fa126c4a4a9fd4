"""Loading files: checksums, CSV files read by pandas into a `Series` (`load_csv`), and the
shipped Victoria electricity series (`load_vic_elec`)."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pandas as pd

from .series import Series, _float32_problem, _outside_float32, read_times

VIC_ELEC_FILE = "vic_elec_hourly.csv"
VIC_ELEC_SHA256 = "a08ed31ecfcb1005ff71e1e01385b449d32f8a2de7ee7cd393c169c0ecedc398"


class ChecksumError(ValueError):
    """A data file's sha256 differs from the one recorded for it."""


def data_dir() -> Path:
    """Where the shipped data lives: ``$LABSUPPORT_DATA``, else the package's ``datasets/``."""
    return Path(os.environ.get("LABSUPPORT_DATA", Path(__file__).resolve().parents[1] / "datasets"))


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
    wanted = _header_columns(header, time_column, columns, path.name,
                             lines[1].tolist() if len(lines) > 1 else None)
    rows = lines[1:]
    if not len(rows):
        raise ValueError(f"{path.name}: no data rows after the header")
    if not complete:
        raise ValueError(f"{path.name} line {len(rows) + 1}: the file ends inside this line "
                         f"({','.join(rows[-1])!r}) without a line break: it looks cut short (an "
                         "interrupted download or copy); get the whole file again, or, if this line "
                         "is complete, end the file with a line break")
    line = lambda i: f"{path.name} line {i + 2}"                                      # noqa: E731
    blank = (rows == "").all(axis=1)
    if blank.any():
        raise ValueError(f"{line(int(np.argmax(blank)))} is blank: a series has no empty rows; delete the "
                         "line (or fill it)")
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


def _header_columns(header, time_column: str, columns, name: str, first_row=None) -> list[str]:
    """The value columns to read, after checking the header has them, each once."""
    if isinstance(columns, str):
        raise TypeError(f"columns must be a list of column names, e.g. columns=[{columns!r}], got the str "
                        f"{columns!r} (a str would be read letter by letter)")
    if len(header) == 1 and any(sep in header[0] for sep in ";\t|"):
        sep = next(sep for sep in ";\t|" if sep in header[0])
        raise ValueError(f"{name} line 1: the header {header[0]!r} is one field: the file is separated by "
                         f"{sep!r}, not commas; save it as comma-separated (in pandas: "
                         f"pd.read_csv(path, sep={sep!r}).to_csv(path2, index=False)) or read it with "
                         "pandas and pass the frame to Series.from_frame")
    if not header or time_column not in header:
        guess = [c for i, c in enumerate(header) if first_row is not None and _reads_as_time(first_row[i])]
        hint = (f": pass time_column={guess[0]!r}, the column whose values read as times" if guess else
                ": pass time_column='<the name of the column of time stamps>'")
        raise ValueError(f"{name} line 1: header {header} has no time column {time_column!r}{hint}")
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


def _reads_as_time(text) -> bool:
    """Whether one field reads as an ISO 8601 time (a date, optionally with a time)."""
    try:
        return bool(text) and not pd.isna(pd.to_datetime(str(text), format="ISO8601"))
    except (ValueError, TypeError, OverflowError):
        return False


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
