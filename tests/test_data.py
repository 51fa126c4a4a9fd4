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
    with pytest.raises(ValueError, match="context must be >= 0"):
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
