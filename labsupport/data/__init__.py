"""The book's data: a small ``Series`` type, loaders with checksums, the fixed temporal
split, scaling fitted on the training part only, forecasting windows and patches.

The default series is hourly electricity demand and temperature for Victoria,
Australia, 2012-2014 (26,304 hours), shipped inside the package (``labsupport/datasets/``;
provenance in the repository's ``data/README.md``). The
ETT benchmark (`load_ett`) is downloaded on demand, checked against pinned sha256s.

The package: `series` (the `Series` type, its DataFrame conversions, ISO 8601 times read by
pandas), `files` (checksums, `load_csv`, `load_vic_elec`), `prepare` (the split, `Standardizer`,
`make_windows`, `patchify`), `calendar_features` (`time_features`), `ett` (`load_ett`) and `task`
(`make_task` for any series, `book_task` for the book's); every name is importable from here.
"""
from .calendar_features import time_features
from .ett import ETT_NAMES, ETT_SHA256, ETT_URL, EttData, ett_borders, load_ett
from .files import (
    VIC_ELEC_FILE,
    VIC_ELEC_SHA256,
    ChecksumError,
    data_dir,
    load_csv,
    load_vic_elec,
    sha256_of,
    verify_sha256,
)
from .prepare import TRAIN_END, VAL_END, Standardizer, make_windows, patch_grid, patchify, temporal_split
from .series import F32_RANGE, TIME_FORMS, Series, read_times
from .task import HORIZON, LOOKBACK, ForecastTask, book_task, make_task

__all__ = ["Series", "read_times", "TIME_FORMS", "F32_RANGE",
           "ChecksumError", "data_dir", "sha256_of", "verify_sha256", "load_csv", "load_vic_elec",
           "VIC_ELEC_FILE", "VIC_ELEC_SHA256",
           "TRAIN_END", "VAL_END", "temporal_split", "Standardizer", "make_windows", "patch_grid", "patchify",
           "time_features",
           "ETT_NAMES", "ETT_URL", "ETT_SHA256", "EttData", "ett_borders", "load_ett",
           "LOOKBACK", "HORIZON", "ForecastTask", "book_task", "make_task"]
