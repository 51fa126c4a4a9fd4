import shutil

import numpy as np
import pytest
import torch

from labsupport import data, positional
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
    ("time,a\n2020-01-01T00:00,1,7\n", r"line 2: 3 fields, expected 2"),
    ("time,a\n2020-01-01T00:00,1\n2020-01-01T00:00,2\n",
     r"line 3: time 2020-01-01T00:00 does not come after"),
    ("time,a\nyesterday,1\n", r"line 2: cannot read time 'yesterday'"),
    ("time,a\n2020-01-01T00:00,nan\n", r"line 2: column 'a' holds 'nan', not a finite number"),
    ("when,a\n2020-01-01T00:00,1\n", r"line 1: header \['when', 'a'\] has no time column 'time'"),
    ("time,a\n", r"no data rows"),
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
    assert positional.time_features is time_features                   # its old home still has it


# --- time stamps: every ISO 8601 form loads exactly or is refused by name --------------------

def _stamps(tmp_path, *stamps):
    """The time stamps load_csv reads from a file of ``stamps`` (one value column)."""
    rows = "".join(f'"{s}",{i}\n' for i, s in enumerate(stamps))       # quoted: a stamp may hold a comma
    return load_csv(_write(tmp_path, f"time,a\n{rows}")).timestamps


@pytest.mark.parametrize("text, expected", [
    ("2014-02-01", "2014-02-01T00:00"),                          # calendar date, extended
    ("20140201", "2014-02-01T00:00"),                            # calendar date, basic
    ("2014-02", "2014-02-01T00:00"),                             # a month (reduced precision): its start
    ("2014", "2014-01-01T00:00"),                                # a year: its start
    ("2014-032", "2014-02-01T00:00"),                            # ordinal date: day 32 of 2014
    ("2014032", "2014-02-01T00:00"),                             # ordinal, basic
    ("2014-W05-6", "2014-02-01T00:00"),                          # week date: Saturday of ISO week 5
    ("2014W056", "2014-02-01T00:00"),                            # week date, basic
    ("2014-W05", "2014-01-27T00:00"),                            # a week: its Monday
    ("2016-366", "2016-12-31T00:00"),                            # a leap year's last day
    ("2015-W53-7", "2016-01-03T00:00"),                          # 2015 has 53 ISO weeks
    ("2014-02-01T10", "2014-02-01T10:00"),                       # hh
    ("2014-02-01 10", "2014-02-01T10:00"),
    ("2014-02-01T10:30", "2014-02-01T10:30"),                    # hh:mm
    ("20140201T1030", "2014-02-01T10:30"),                       # basic hhmm
    ("2014-02-01t10:30", "2014-02-01T10:30"),                    # lower-case t (RFC 3339)
    ("2014-02-01T10.5", "2014-02-01T10:30"),                     # a decimal fraction of the hour
    ("2014-02-01T10:30,25", "2014-02-01T10:30:15"),              # ... of the minute, with a comma
    ("2014-02-01T24:00", "2014-02-02T00:00"),                    # 24:00: the end of the day
    ("2014-02-01T24:00:00.000", "2014-02-02T00:00"),
    ("2014-12-31T24", "2015-01-01T00:00"),
])
def test_every_iso_8601_date_and_time_form_loads_exactly(tmp_path, text, expected):
    stamps = _stamps(tmp_path, text)
    assert stamps[0] == np.datetime64(expected) and str(stamps.dtype) == str(np.datetime64(expected).dtype)


@pytest.mark.parametrize("text, expected, unit", [
    ("2014-02-01T10:30:15", "2014-02-01T10:30:15", "s"),                         # hh:mm:ss
    ("2014-02-01 10:30:15", "2014-02-01T10:30:15", "s"),
    ("20140201T103015", "2014-02-01T10:30:15", "s"),                             # basic hhmmss
    ("2014-02-01T10:30:15.25", "2014-02-01T10:30:15.250", "ms"),                 # fraction with .
    ("2014-02-01T10:30:15,25", "2014-02-01T10:30:15.250", "ms"),                 # ... or ,
    ("2014-02-01T10:30:15.123456", "2014-02-01T10:30:15.123456", "us"),
    ("2014-02-01T10:30:15.123456789", "2014-02-01T10:30:15.123456789", "ns"),
    ("2014-02-01T10:30:15.1000000000", "2014-02-01T10:30:15.100", "ms"),         # zeros past ns cost nothing
    ("2014-02-01T10.123", "2014-02-01T10:07:22.800", "ms"),                      # 0.123 h = 442.8 s
])
def test_seconds_and_their_fractions_are_kept_at_the_precision_they_need(tmp_path, text, expected, unit):
    stamps = _stamps(tmp_path, text)
    assert stamps.dtype == np.dtype(f"datetime64[{unit}]") and stamps[0] == np.datetime64(expected)


def test_one_file_takes_the_finest_precision_any_of_its_stamps_needs(tmp_path):
    stamps = _stamps(tmp_path, "2014-02-01T10:00", "2014-02-01T10:00:00.5", "2014-02-01T10:01")
    assert stamps.dtype == np.dtype("datetime64[ms]")
    assert np.diff(stamps).astype(int).tolist() == [500, 59_500]
    assert _stamps(tmp_path, "2014-02-01T10:00:00", "2014-02-01T11:00:00").dtype == np.dtype("datetime64[m]")


@pytest.mark.parametrize("offset", ["Z", "z", "+00:00", "+10:00", "+1000", "+10", "-05:30", "-0530"])
def test_one_utc_offset_for_the_whole_file_keeps_its_clock_times(tmp_path, offset):
    stamps = _stamps(tmp_path, f"2014-02-01T10:00{offset}", f"2014-02-01T11:00:30{offset}")
    expected = np.array(["2014-02-01T10:00:00", "2014-02-01T11:00:30"], "datetime64[s]")
    assert stamps.dtype == expected.dtype and stamps.tolist() == expected.tolist()


def test_z_and_plus_zero_are_one_offset(tmp_path):
    assert len(_stamps(tmp_path, "2014-02-01T10:00Z", "2014-02-01T11:00+00:00", "2014-02-01T12:00+00")) == 3


@pytest.mark.parametrize("stamps, message", [
    (("2014-02-01T10:00+10:00", "2014-02-01T11:00+11:00"),
     r"tiny.csv line 3: time '2014-02-01T11:00\+11:00' has UTC offset \+11:00, but line 2 has \+10:00; "
     r"load_csv reads one clock per file: convert the times to one offset \(or to UTC\) first"),
    (("2014-02-01T10:00", "2014-02-01T11:00Z"),
     r"line 3: time '2014-02-01T11:00Z' has UTC offset Z, but line 2 has none"),
    (("2014-02-01T10:00+10", "2014-02-01T11:00"),
     r"line 3: time '2014-02-01T11:00' has no UTC offset, but line 2 has \+10:00"),
])
def test_mixed_utc_offsets_are_refused(tmp_path, stamps, message):
    with pytest.raises(ValueError, match=message):
        _stamps(tmp_path, *stamps)


@pytest.mark.parametrize("text, message", [
    ("2016-12-31T23:59:60", r"line 2: time '2016-12-31T23:59:60' is a leap second; numpy's datetime64 "
                            r"counts none: drop the row or write 2016-12-31T23:59:59"),
    ("2014-02-01T24:30", r"line 2: time '2014-02-01T24:30': 24:00 ends a day, and nothing comes after it"),
    ("2014-02-01T24:00:01", r"24:00 ends a day, and nothing comes after it"),
    ("2014-02-01T25:00", r"line 2: time '2014-02-01T25:00' has hour 25; expected 00-24"),
    ("2014-02-01T10:60", r"has minute 60; expected 00-59"),
    ("2014-02-01T10:00:61", r"has second 61; expected 00-59"),
    ("2014-02-30", r"line 2: time '2014-02-30' names no day: day is out of range for month"),
    ("2014-13-01", r"names no day: month must be in 1..12"),
    ("2014-366", r"line 2: time '2014-366' names no day: 2014 has 365 days"),
    ("2014-000", r"names no day: 2014 has 365 days, got day 0"),
    ("2014-W53-1", r"line 2: time '2014-W53-1' names no day: 2014 has 52 ISO weeks"),
    ("2014-W05-8", r"names no day: weekday must be in 1..7, got 8"),
    ("0000-01-01", r"names no day: year 0 is out of range"),
    ("2014-02-01T10:30:15.1234567891", r"line 2: time '2014-02-01T10:30:15.1234567891' is finer than a "
                                       r"nanosecond, the finest datetime64 unit kept here"),
    ("2300-01-01T10:30:15.000000001", r"line 2: time '2300-01-01T10:30:15.000000001' needs nanoseconds, "
                                      r"and datetime64\[ns\] reaches only 1677-09-21 to 2262-04-11"),
    ("yesterday", r"line 2: cannot read time 'yesterday': expected an ISO 8601 date"),
    ("201402", r"cannot read time '201402': expected an ISO 8601 date"),     # YYYYMM is not ISO
    ("2014-02-01T10:30:15.5:00", r"cannot read time"),
    ("+002014-02-01", r"cannot read time"),                                # expanded years: refused
    ("10:30", r"cannot read time '10:30'"),                                # a time needs its date
])
def test_time_stamps_that_cannot_load_exactly_are_refused_naming_line_and_reason(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        _stamps(tmp_path, text)


def test_time_features_read_seconds_and_fractions_instead_of_truncating_to_minutes():
    stamps = np.array(["2014-01-06T06:00:30", "2014-01-06T06:00:00.5"], dtype="datetime64[ms]")
    hours = np.array([6 + 30 / 3600, 6 + 0.5 / 3600])
    f = time_features(stamps)
    np.testing.assert_allclose(f[:, 0], np.sin(2 * np.pi * hours / 24), rtol=1e-6)
    np.testing.assert_array_equal(time_features(stamps.astype("datetime64[m]")),
                                  time_features(np.array(["2014-01-06T06:00"] * 2, "datetime64[m]")))
