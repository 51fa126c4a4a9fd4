import re
import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from labsupport import data
from labsupport.data import (
    ChecksumError,
    Series,
    Standardizer,
    load_csv,
    load_vic_elec,
    make_windows,
    patchify,
    temporal_split,
    time_features,
)


@pytest.fixture(scope="module")
def vic():
    return load_vic_elec()


def test_vic_elec_shape_and_calendar(vic):
    assert vic.values.shape == (26_304, 3) and vic.values.dtype == np.float32
    assert vic.columns == ("demand_mw", "temperature_c", "holiday")
    steps = np.diff(vic.timestamps).astype(int)
    assert (steps == 60).all()                                           # hourly, no gaps, in minutes
    assert str(vic.timestamps[0]) == "2011-12-31T23:00" and str(vic.timestamps[-1]) == "2014-12-31T22:00"
    assert set(np.unique(vic.column("holiday"))) == {0.0, 1.0}
    assert 2000 < vic.column("demand_mw").min() and vic.column("demand_mw").max() < 10000


def test_split_is_disjoint_ordered_and_complete(vic):
    train, val, test = temporal_split(vic)
    assert len(train) + len(val) + len(test) == len(vic)
    assert train.timestamps[-1] < val.timestamps[0] and val.timestamps[-1] < test.timestamps[0]
    assert str(val.timestamps[0]) == "2014-01-01T00:00" and str(test.timestamps[0]) == "2014-07-01T00:00"


def test_split_with_context_reaches_back_but_targets_do_not_overlap(vic):
    lookback, horizon = 336, 24
    train, val, test = temporal_split(vic, context=lookback)
    assert val.timestamps[lookback] == np.datetime64(data.TRAIN_END)
    target_times = []
    for part in (train, val, test):
        stamps = part.timestamps[:, None].astype("int64").astype(np.float32)   # windows over the times
        _, y = make_windows(stamps.astype(np.float64), lookback, horizon)
        target_times.append(set(np.unique(y.astype(np.float64))))
    assert not (target_times[0] & target_times[1]) and not (target_times[1] & target_times[2])
    with pytest.raises(ValueError, match="context must be an int >= 0, got -1"):
        temporal_split(vic, context=-1)
    with pytest.raises(ValueError, match="leave an empty part"):
        temporal_split(vic, train_end="2010-01-01")


def test_standardizer_uses_training_statistics_only(vic):
    train, val, _ = temporal_split(vic)
    scaler = Standardizer().fit(train.values)
    np.testing.assert_allclose(scaler.mean, train.values.mean(axis=0), rtol=1e-5)
    assert not np.allclose(scaler.mean, vic.values.mean(axis=0), rtol=1e-4)
    z = scaler.transform(train.values)
    np.testing.assert_allclose(z.mean(axis=0), 0, atol=1e-4)
    np.testing.assert_allclose(z.std(axis=0), 1, atol=1e-4)
    back = scaler.inverse_transform(torch.from_numpy(scaler.transform(val.values)))
    np.testing.assert_allclose(back.numpy(), val.values, rtol=1e-5, atol=1e-3)
    demand_only = scaler.transform(val.values[:, :1], channels=[0])
    np.testing.assert_allclose(demand_only, scaler.transform(val.values)[:, :1], rtol=1e-6)
    with pytest.raises(RuntimeError, match="not fitted"):
        Standardizer().transform(val.values)


def test_make_windows_content_and_kinds():
    values = np.arange(20, dtype=np.float32).reshape(10, 2)
    x, y = make_windows(values, lookback=3, horizon=2, stride=2)
    assert x.shape == (3, 3, 2) and y.shape == (3, 2, 2)
    np.testing.assert_array_equal(x[1, :, 0], [4, 6, 8])
    np.testing.assert_array_equal(y[1, :, 0], [10, 12])
    xt, yt = make_windows(torch.arange(10.0), 4, 1)
    assert isinstance(xt, torch.Tensor) and xt.shape == (6, 4, 1) and yt[-1, 0, 0] == 9
    with pytest.raises(ValueError, match="shorter than lookback \\+ horizon = 12"):
        make_windows(values, 10, 2)
    with pytest.raises(ValueError, match="lookback must be a positive int"):
        make_windows(values, 0, 2)


def test_patchify_aligns_to_the_end_in_numpy_and_torch():
    x = np.arange(10.0)
    p = patchify(x, 4, 3)
    assert p.shape == (3, 4) and p[-1, -1] == 9 and p[0, 0] == 0
    p2 = patchify(torch.arange(11.0).expand(2, 11), 4)          # 11 = 2 * 4 + 3: the oldest 3 dropped
    assert p2.shape == (2, 2, 4) and p2[0, 0, 0] == 3 and p2[0, -1, -1] == 10
    np.testing.assert_array_equal(patchify(x, 4, 3), patchify(torch.from_numpy(x), 4, 3).numpy())
    with pytest.raises(ValueError, match="shorter than patch_len 12"):
        patchify(x, 12)


def _write(tmp_path, text):
    path = tmp_path / "tiny.csv"
    path.write_text(text)
    return path


def test_load_csv_reads_a_small_file(tmp_path):
    s = load_csv(_write(tmp_path, "time,a,b\n2020-01-01T00:00,1,2\n2020-01-01T01:00,3,4.5\n"))
    assert s.columns == ("a", "b") and s.values.tolist() == [[1, 2], [3, 4.5]] and len(s) == 2
    assert load_csv(tmp_path / "tiny.csv", columns=["b"]).values.tolist() == [[2], [4.5]]


@pytest.mark.parametrize("text,message", [
    ("time,a\n2020-01-01T00:00,1\n2020-01-01T01:00,x\n",
     r"tiny.csv line 3: column 'a' holds 'x', not a number"),
    ("time,a\n2020-01-01T00:00,1,7\n", r"tiny.csv: .*Expected 2 fields in line 2, saw 3"),
    ("time,a,b\n2020-01-01T00:00,1\n", r"line 2: column 'b' is empty: a missing value, or a line with fewer "
                                       r"fields than the header"),
    ("time,a\n2020-01-01T00:00,1\n2020-01-01T00:00,2\n",
     r"line 3: time 2020-01-01T00:00 does not come after 2020-01-01T00:00 \(line 2\)"),
    ("time,a\nyesterday,1\n", r"line 2: cannot read time 'yesterday'"),
    ("time,a\n2020-01-01T00:00,nan\n", r"line 2: column 'a' holds 'nan', not a finite number"),
    ("when,a\n2020-01-01T00:00,1\n", r"line 1: header \['when', 'a'\] has no time column 'time'"),
    ("time,a\n", r"no data rows"),
    ("time,a\n2020-01-01T00:00,1\n\n", r"tiny.csv line 3 is blank: a series has no empty rows"),
])
def test_malformed_files_name_the_line(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        load_csv(_write(tmp_path, text))


def test_checksum_mismatch_is_reported(tmp_path, monkeypatch):
    for name in (data.VIC_ELEC_FILE,):
        shutil.copy(data.data_dir() / name, tmp_path / name)
    path = tmp_path / data.VIC_ELEC_FILE
    content = bytearray(path.read_bytes())
    content[-3] = ord("9") if content[-3] != ord("9") else ord("8")
    path.write_bytes(bytes(content))
    monkeypatch.setenv("LABSUPPORT_DATA", str(tmp_path))
    with pytest.raises(ChecksumError, match="sha256 of vic_elec_hourly.csv is .* expected a08ed31e"):
        load_vic_elec()
    path.unlink()
    with pytest.raises(FileNotFoundError, match="LABSUPPORT_DATA"):
        load_vic_elec()


def test_series_validates_and_selects(vic):
    with pytest.raises(ValueError, match=r"values must be \(T, C\) with C = 2"):
        Series(np.zeros(3, dtype="datetime64[m]"), np.zeros((3, 3), np.float32), ("a", "b"))
    demand = vic.select("demand_mw")
    assert demand.values.shape == (26_304, 1)
    with pytest.raises(ValueError, match="no column 'load'"):
        vic.column("load")
    assert len(vic.between("2013-01-01", "2013-01-02")) == 24


def test_book_task_windows_and_calendar(vic):
    from labsupport.data import book_task
    task = book_task(train_stride=100, calendar=True)
    (x, time), y = task.test
    plain = book_task(train_stride=100)
    torch.testing.assert_close(x, plain.test[0])
    torch.testing.assert_close(y, plain.test[1])
    assert x.shape == (183, 336, 1) and time.shape == (183, 360, 7) and y.shape == (183, 24, 1)
    # the first test target is 2014-07-01 00:00; its calendar row is the window's row 336
    border = int(np.searchsorted(vic.timestamps, np.datetime64("2014-07-01T00:00")))
    hours = slice(border - 336, border + 24)
    expected = time_features(vic.timestamps[hours], vic.column("holiday")[hours])
    np.testing.assert_allclose(time[0].numpy(), expected, atol=1e-6)
    demand = task.scaler.inverse_transform(y[0].numpy(), channels=[0])[:, 0]
    np.testing.assert_allclose(demand, vic.column("demand_mw")[border: border + 24], rtol=1e-5)


def test_time_features_ranges_and_periods():
    stamps = np.arange(np.datetime64("2014-01-06T00:00"), np.datetime64("2014-02-06T00:00"),
                       np.timedelta64(1, "h"))                          # 2014-01-06 is a Monday
    f = time_features(stamps)
    assert f.shape == (len(stamps), 6) and f.dtype == np.float32
    assert np.abs(f).max() <= 1.0 + 1e-6
    np.testing.assert_allclose(f[0, :4], [0, 1, 0, 1], atol=1e-6)      # midnight, Monday
    np.testing.assert_allclose(f[24, :2], f[0, :2], atol=1e-5)        # hour repeats every 24 h
    np.testing.assert_allclose(f[24 * 7, 2:4], f[0, 2:4], atol=1e-5)  # weekday every 7 days
    assert not np.allclose(f[24, 2:4], f[0, 2:4])
    np.testing.assert_allclose(np.hypot(f[:, 4], f[:, 5]), 1, atol=1e-6)
    with_holiday = time_features(stamps[:3], holiday=[1, 0, 0])
    assert with_holiday.shape == (3, 7) and with_holiday[:, 6].tolist() == [1, 0, 0]
    with pytest.raises(ValueError, match=r"holiday must be \(T,\) = \(3,\), got \(2,\)"):
        time_features(stamps[:3], holiday=[1, 0])


# --- time stamps: what pandas reads as ISO 8601 loads exactly, or is refused by line -------------

def _stamps(tmp_path, *stamps):
    """The time stamps load_csv reads from a file of ``stamps`` (one value column)."""
    rows = "".join(f'"{s}",{i}\n' for i, s in enumerate(stamps))       # quoted: a stamp may hold a comma
    return load_csv(_write(tmp_path, f"time,a\n{rows}")).timestamps


@pytest.mark.parametrize("text, expected, unit", [
    ("2014-02-01", "2014-02-01T00:00", "m"),                                     # a date: its midnight
    ("20140201", "2014-02-01T00:00", "m"),                                       # basic form
    ("2014-02-01T10:30", "2014-02-01T10:30", "m"),
    ("2014-02-01 10:30", "2014-02-01T10:30", "m"),                               # a space for T
    ("2014-02-01T10:30:00", "2014-02-01T10:30", "m"),                            # whole minutes: minutes
    ("2014-02-01T10:30:15", "2014-02-01T10:30:15", "s"),
    ("2014-02-01T10:30:15.25", "2014-02-01T10:30:15.250", "ms"),
    ("2014-02-01T10:30:15.123456", "2014-02-01T10:30:15.123456", "us"),
    ("2014-02-01T10:30:15.123456789", "2014-02-01T10:30:15.123456789", "ns"),
])
def test_times_load_exactly_in_the_coarsest_unit_that_holds_them(tmp_path, text, expected, unit):
    stamps = _stamps(tmp_path, text)
    assert stamps.dtype == np.dtype(f"datetime64[{unit}]") and stamps[0] == np.datetime64(expected)


def test_one_file_takes_the_finest_precision_any_of_its_stamps_needs(tmp_path):
    stamps = _stamps(tmp_path, "2014-02-01T10:00", "2014-02-01T10:00:00.5", "2014-02-01T10:01")
    assert stamps.dtype == np.dtype("datetime64[ms]")
    assert np.diff(stamps).astype(int).tolist() == [500, 59_500]
    assert _stamps(tmp_path, "2014-02-01T10:00:00", "2014-02-01T11:00:00").dtype == np.dtype("datetime64[m]")


@pytest.mark.parametrize("offset", ["Z", "+00:00", "+10:00", "+1000", "-05:30"])
def test_one_utc_offset_for_the_whole_file_keeps_its_clock_times(tmp_path, offset):
    stamps = _stamps(tmp_path, f"2014-02-01T10:00{offset}", f"2014-02-01T11:00:30{offset}")
    expected = np.array(["2014-02-01T10:00:00", "2014-02-01T11:00:30"], "datetime64[s]")
    assert stamps.dtype == expected.dtype and stamps.tolist() == expected.tolist()


@pytest.mark.parametrize("stamps", [
    ("2014-02-01T10:00+10:00", "2014-02-01T11:00+11:00"),
    ("2014-02-01T10:00", "2014-02-01T11:00Z"),
    ("2014-02-01T10:00+10:00", "2014-02-01T11:00"),
])
def test_mixed_utc_offsets_are_refused_naming_the_first_line_on_another_clock(tmp_path, stamps):
    with pytest.raises(ValueError, match=rf"tiny.csv line 3: time '{re.escape(stamps[1])}' has another UTC "
                                         r"offset than the times before it .*convert them to one offset "
                                         r"\(or to UTC\) first"):
        _stamps(tmp_path, *stamps)


@pytest.mark.parametrize("text", ["yesterday", "2014-02-30", "2014-02-01T25:00", "2016-12-31T23:59:60",
                                  "10:30", "2014-W05-6"])
def test_times_that_do_not_read_are_refused_naming_the_line_and_pandas_reason(tmp_path, text):
    with pytest.raises(ValueError, match=rf"tiny.csv line 3: cannot read time '{re.escape(text)}': expected "
                                         r"an ISO 8601 date, .*; pandas says: \S"):
        _stamps(tmp_path, "2014-01-01T00:00", text)


# --- a pandas DataFrame: a student's own data, in and out ------------------------------------------

def test_a_series_goes_to_a_frame_and_back_unchanged(vic):
    frame = vic.to_frame()
    assert isinstance(frame.index, pd.DatetimeIndex) and frame.index.name == "time"
    assert list(frame.columns) == list(vic.columns) and frame.attrs["name"] == "vic_elec"
    back = Series.from_frame(frame)
    assert back.timestamps.dtype == vic.timestamps.dtype and np.array_equal(back.timestamps, vic.timestamps)
    assert np.array_equal(back.values, vic.values) and back.columns == vic.columns and back.name == vic.name
    frame.iloc[0, 0] = -1.0                                             # the frame holds its own copy
    assert vic.values[0, 0] != -1.0


def test_a_frame_with_a_time_column_of_strings_datetimes_or_a_zone():
    times = ["2020-01-01 00:00", "2020-01-01 01:00", "2020-01-01 02:00"]
    expected = np.array(times, dtype="datetime64[m]")
    frame = pd.DataFrame({"when": times, "load": [1, 2, 3], "ok": [True, False, True], "city": "x"})
    s = Series.from_frame(frame, time="when", columns=["load", "ok"], name="mine")
    assert s.columns == ("load", "ok") and s.values.dtype == np.float32
    assert s.values[:, 1].tolist() == [1, 0, 1]
    assert np.array_equal(s.timestamps, expected) and s.name == "mine"
    as_datetimes = frame.assign(when=pd.to_datetime(frame["when"]))
    assert np.array_equal(Series.from_frame(as_datetimes, time="when", columns=["load"]).timestamps, expected)
    zoned = as_datetimes.assign(when=as_datetimes["when"].dt.tz_localize("Australia/Melbourne"))
    assert np.array_equal(Series.from_frame(zoned, time="when", columns=["load"]).timestamps, expected)
    gap = Series.from_frame(frame.assign(load=pd.array([1, None, 3], dtype="Int64")), time="when",
                            columns=["load"])
    assert np.isnan(gap.values[1, 0])                                   # a missing value is a gap


@pytest.mark.parametrize("make, error, message", [
    (lambda f: f.to_numpy(), TypeError, r"frame must be a pandas DataFrame, got ndarray"),
    (lambda f: f.reset_index(drop=True), ValueError,
     r"from_frame needs the times: pass time='<column>', one of \['load', 'city'\], or give the frame a "
     r"DatetimeIndex"),
    (lambda f: f.reset_index().rename(columns={"time": "t"}).assign(time=1), TypeError,
     r"the times \(column 'time'\) must be datetimes or ISO 8601 strings, got int64"),
    (lambda f: f.iloc[[0, 2, 1]], ValueError,
     r"the times \(the index\) must be strictly increasing: row 2 \(2020-01-01T01:00\) does not come after "
     r"row 1 \(2020-01-01T02:00\); sort the frame"),
    (lambda f: f.iloc[[0, 0, 1]], ValueError, r"row 1 .* does not come after row 0"),
    (lambda f: f[["load"]].assign(load=[1.0, 1e39, 0.0]), ValueError,
     r"column 'load' row 1 holds 1e\+39, outside float32's range"),
    (lambda f: f, TypeError, r"column 'city' holds (object|str) values, not real numbers; convert it "
                             r"\(pd.to_numeric\(frame\['city'\]\)\) or leave it out: columns=\['load'\]"),
])
def test_a_frame_that_cannot_be_a_series_is_refused_by_name(make, error, message):
    times = pd.DatetimeIndex(np.array(["2020-01-01T00:00", "2020-01-01T01:00", "2020-01-01T02:00"],
                                      dtype="datetime64[m]"), name="time")
    frame = pd.DataFrame({"load": [1.0, 2.0, 3.0], "city": ["a", "b", "c"]}, index=times)
    made = make(frame)
    time = "time" if isinstance(made, pd.DataFrame) and "time" in made.columns else None
    with pytest.raises(error, match=message):
        Series.from_frame(made, time=time)


def test_a_frame_names_a_missing_time_and_a_missing_column():
    frame = pd.DataFrame({"time": ["2020-01-01 00:00", "2020-01-01 01:00"], "load": [1.0, 2.0]})
    with pytest.raises(ValueError, match=r"the frame has no time column 'when'; its columns are "
                                         r"\['time', 'load'\]"):
        Series.from_frame(frame, time="when")
    with pytest.raises(ValueError, match=r"the frame has no columns \['demand'\]"):
        Series.from_frame(frame, time="time", columns=["demand"])
    gap = frame.assign(time=["2020-01-01 00:00", None])
    with pytest.raises(ValueError, match=r"column 'time' row 1: time '(None|nan)' is a missing time"):
        Series.from_frame(gap, time="time")
    with pytest.raises(ValueError, match=r"the times \(column 'time'\) hold NaT \(a missing time\) at row 1"):
        Series.from_frame(gap.assign(time=pd.to_datetime(gap["time"])), time="time")


def test_time_features_read_seconds_and_fractions_instead_of_truncating_to_minutes():
    stamps = np.array(["2014-01-06T06:00:30", "2014-01-06T06:00:00.5"], dtype="datetime64[ms]")
    hours = np.array([6 + 30 / 3600, 6 + 0.5 / 3600])
    f = time_features(stamps)
    np.testing.assert_allclose(f[:, 0], np.sin(2 * np.pi * hours / 24), rtol=1e-6)
    np.testing.assert_array_equal(time_features(stamps.astype("datetime64[m]")),
                                  time_features(np.array(["2014-01-06T06:00"] * 2, "datetime64[m]")))
