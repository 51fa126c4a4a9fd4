"""load_ett, offline: generated files in the exact ETT-small format stand in for the real ones."""
import io
import urllib.error
import urllib.request

import numpy as np
import pytest

from helpers import ETT_EXTRA, ETT_HEADER, ett_bytes, sha, write_ett
from labsupport import data
from labsupport.data import ChecksumError, ett_borders, load_csv, load_ett


def test_generated_file_has_the_ett_format():
    lines = ett_bytes("ETTh1").decode().splitlines()
    assert lines[0] == ETT_HEADER and lines[1].startswith("2016-07-01 00:00:00,0.000,1.000")


@pytest.mark.parametrize("name,scale,last", [("ETTh1", 1, "23:00"), ("ETTm2", 4, "23:45")])
def test_split_borders_and_lengths(tmp_path, name, scale, last):
    ett = load_ett(name, tmp_path, sha256=sha(write_ett(tmp_path, name)))
    assert len(ett.series) == 14_400 * scale + ETT_EXTRA
    assert ett.series.columns == tuple(ETT_HEADER.split(",")[1:])
    assert [len(ett.train), len(ett.val), len(ett.test)] == [8640 * scale, 2880 * scale, 2880 * scale]
    spans = [(str(p.timestamps[0]), str(p.timestamps[-1])) for p in (ett.train, ett.val, ett.test)]
    assert spans == [("2016-07-01T00:00", f"2017-06-25T{last}"),
                     ("2017-06-26T00:00", f"2017-10-23T{last}"),
                     ("2017-10-24T00:00", f"2018-02-20T{last}")]
    assert ett.train.name == name and ett_borders(name)[2] == (11_520 * scale, 14_400 * scale)


def test_context_moves_val_and_test_back(tmp_path):
    content = write_ett(tmp_path)
    plain = load_ett("ETTh1", tmp_path, sha256=sha(content))
    ett = load_ett("ETTh1", tmp_path, context=96, sha256=sha(content))
    assert len(ett.train) == 8640 and len(ett.val) == len(ett.test) == 2880 + 96
    assert ett.val.timestamps[96] == plain.val.timestamps[0] == np.datetime64("2017-06-26T00:00")
    assert ett.val.timestamps[0] == plain.train.timestamps[-96]
    assert ett.test.timestamps[96] == plain.test.timestamps[0]
    assert ett.test.timestamps[0] == plain.val.timestamps[-96]
    assert ett.test.timestamps[-1] == plain.test.timestamps[-1]
    with pytest.raises(ValueError, match=r"context must be in \[0, 8640\] .* got 8641"):
        load_ett("ETTh1", tmp_path, context=8641, sha256=None)
    with pytest.raises(ValueError, match="got -1"):
        ett_borders("ETTm1", context=-1)


def test_scaler_is_fitted_on_train_only(tmp_path):
    ett = load_ett("ETTh1", tmp_path, sha256=sha(write_ett(tmp_path)))
    np.testing.assert_allclose(ett.scaler.mean, ett.train.values.mean(axis=0), rtol=1e-5)
    assert not np.allclose(ett.scaler.mean, ett.series.values.mean(axis=0), rtol=1e-2)
    np.testing.assert_allclose(ett.scaler.transform(ett.train.values).mean(axis=0), 0, atol=1e-4)


def test_pinned_hashes_are_checked_by_default(tmp_path):
    assert set(data.ETT_SHA256) == set(data.ETT_NAMES)
    assert all(len(h) == 64 and int(h, 16) >= 0 for h in data.ETT_SHA256.values())
    write_ett(tmp_path)                          # a generated file is not the real ETTh1.csv
    with pytest.raises(ChecksumError, match=f"expected {data.ETT_SHA256['ETTh1']}"):
        load_ett("ETTh1", tmp_path)


def test_corrupt_file_raises_checksum_error(tmp_path):
    content = bytearray(ett_bytes("ETTh1"))
    content[200] = ord("9") if content[200] != ord("9") else ord("8")     # one digit changed
    write_ett(tmp_path, content=bytes(content))
    with pytest.raises(ChecksumError, match=r"sha256 of ETTh1.csv is .* expected .*ETTh1.csv by hand"):
        load_ett("ETTh1", tmp_path, sha256=sha(ett_bytes("ETTh1")))


def test_truncated_file_is_detected(tmp_path):
    content = ett_bytes("ETTh1")
    cut = content[: content.index(b"2017-12-01")]                        # ends after a whole line
    write_ett(tmp_path, content=cut)
    with pytest.raises(ChecksumError):
        load_ett("ETTh1", tmp_path, sha256=sha(content))
    with pytest.raises(ValueError, match="has 12432 rows; the standard split needs 14400"):
        load_ett("ETTh1", tmp_path, sha256=None)
    write_ett(tmp_path, content=content[:-40])                               # ends inside a line
    with pytest.raises(ValueError, match=r"line 14406: the file ends inside this line"):
        load_ett("ETTh1", tmp_path, sha256=None)


def test_a_file_of_the_other_frequency_is_named_for_what_it_is(tmp_path):
    write_ett(tmp_path, "ETTh2", ett_bytes("ETTm1"))                         # 15-minute rows, hourly name
    with pytest.raises(ValueError, match=r"ETTh2.csv has a row every 15 minutes, but ETTh2 has one every "
                                         r"60 minutes: it looks like ETTm1 or ETTm2"):
        load_ett("ETTh2", tmp_path, sha256=None)
    write_ett(tmp_path, "ETTm1", ett_bytes("ETTh1"))                         # hourly rows, 15-minute name
    with pytest.raises(ValueError, match=r"a row every 60 minutes, but ETTm1 has one every 15 minutes: "
                                         r"it looks like ETTh1 or ETTh2; pass that name"):
        load_ett("ETTm1", tmp_path, sha256=None)


def serve(monkeypatch, content=None, error=None):
    """Replace urllib.request.urlopen by one that returns ``content`` or raises ``error``."""
    calls = []

    def fake_urlopen(url, *args, **kwargs):
        calls.append(url)
        if error is not None:
            raise error
        return io.BytesIO(content)

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    return calls


def test_download_writes_the_checked_file(tmp_path, monkeypatch):
    content = ett_bytes("ETTm1")
    calls = serve(monkeypatch, content)
    root = tmp_path / "ett"                                              # created on download
    ett = load_ett("ETTm1", root, sha256=sha(content))
    assert calls == ["https://raw.githubusercontent.com/zhouhaoyi/ETDataset/main/ETT-small/ETTm1.csv"]
    assert [p.name for p in root.iterdir()] == ["ETTm1.csv"] and (root / "ETTm1.csv").read_bytes() == content
    assert len(ett.train) == 34_560
    load_ett("ETTm1", root, sha256=sha(content))                         # present now: no second download
    assert len(calls) == 1


def test_mismatching_download_leaves_no_file(tmp_path, monkeypatch):
    serve(monkeypatch, ett_bytes("ETTh1")[:-100])
    with pytest.raises(ChecksumError, match="downloaded https://.*ETTh1.csv has sha256 .* nothing was saved"):
        load_ett("ETTh1", tmp_path, sha256=sha(ett_bytes("ETTh1")))
    assert list(tmp_path.iterdir()) == []


def test_unpinned_download_prints_its_hash(tmp_path, monkeypatch, capsys):
    content = ett_bytes("ETTh1")
    serve(monkeypatch, content)
    load_ett("ETTh1", tmp_path, sha256=None)
    assert f"sha256 of ETTh1.csv is {sha(content)}; pin it in ETT_SHA256" in capsys.readouterr().out


def test_network_failure_says_how_to_download_by_hand(tmp_path, monkeypatch):
    serve(monkeypatch, error=urllib.error.URLError("no route to host"))
    with pytest.raises(ConnectionError, match=r"could not download https://raw\.githubusercontent\.com/"
                                              r".*/ETTh2\.csv .*no route to host.*by hand into"):
        load_ett("ETTh2", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_missing_file_without_download(tmp_path, monkeypatch):
    calls = serve(monkeypatch, b"")
    with pytest.raises(FileNotFoundError, match=r"no ETTh1.csv in .* download https://raw\.githubusercontent"
                                                r"\.com/zhouhaoyi/ETDataset/main/ETT-small/ETTh1\.csv"):
        load_ett("ETTh1", tmp_path, download=False)
    assert calls == []


def test_unknown_name(tmp_path):
    with pytest.raises(ValueError, match="dataset 'ETTh3'; expected one of ETTh1, ETTh2, ETTm1, ETTm2"):
        load_ett("ETTh3", tmp_path)


def test_load_csv_reads_the_ett_time_form(tmp_path):
    path = tmp_path / "tiny.csv"
    path.write_text("date,a\n2016-07-01 00:00:00,1\n2016-07-01 01:00:00,2\n")
    s = load_csv(path, time_column="date")
    assert s.timestamps.tolist() == list(np.array(["2016-07-01T00:00", "2016-07-01T01:00"], "datetime64[m]"))
    path.write_text("date,a\n2016-07-01 00:00:30,1\n")                     # seconds are kept, not dropped
    assert load_csv(path, time_column="date").timestamps[0] == np.datetime64("2016-07-01T00:00:30", "s")
    path.write_text("date,a\n2016-07-01 25:00:00,1\n")
    with pytest.raises(ValueError, match=r"line 2: cannot read time '2016-07-01 25:00:00': expected an "
                                         r"ISO 8601 date, .*; pandas says: "):
        load_csv(path, time_column="date")
