"""tools/benchmark_ett.py, offline: a generated file in the ETT-small format, one short run."""
import importlib.util
import io
import re
import sys
import urllib.request
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "benchmark_ett.py"
HEADER = "date,HUFL,HULL,MUFL,MULL,LUFL,LULL,OT"
ROWS = 20 * 30 * 24 + 5                      # hourly: the 20 months of the standard split, and a few more


def load_script():
    spec = importlib.util.spec_from_file_location("benchmark_ett", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module              # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


bench = load_script()


@lru_cache(maxsize=None)
def ett_bytes() -> bytes:
    """An hourly file like ETT-small/ETTh1.csv from 2016-07-01: daily cycles, a trend, noise."""
    rng = np.random.default_rng(0)
    hours = np.arange(ROWS)
    stamps = np.datetime64("2016-07-01T00:00") + hours * np.timedelta64(60, "m")
    phase = np.arange(7)[None, :]
    values = (np.sin(2 * np.pi * hours[:, None] / 24 + phase) + hours[:, None] / 5000 + phase
              + 0.1 * rng.standard_normal((ROWS, 7)))
    lines = [HEADER] + [f"{t.replace('T', ' ')}:00," + ",".join(f"{v:.3f}" for v in row)
                        for t, row in zip(stamps.astype(str), values)]
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def etth1(tmp_path):
    path = tmp_path / "ETTh1.csv"
    path.write_bytes(ett_bytes())
    return path


QUICK = ["--horizon", "96", "--epochs", "1", "--max-seconds", "5", "--stride", "96", "--device", "cpu",
         "--no-progress"]


def test_short_run_prints_ours_beside_the_published_numbers(etth1, capsys):
    assert bench.main(["--data", str(etth1), *QUICK]) == 0
    out = capsys.readouterr().out
    assert "not the upstream ETTh1.csv" in out and "--stride 96 keeps one window in 96" in out
    header = next(line for line in out.splitlines() if line.lstrip().startswith("horizon"))
    assert header.split()[:4] == ["horizon", "model", "MSE", "MAE"] and "pub. MSE" in header
    rows = {line.split()[1]: line.split() for line in out.splitlines() if line.lstrip().startswith("96 ")}
    assert set(rows) == {"PatchTransformer", "DLinear"}
    patch, dlinear = rows["PatchTransformer"], rows["DLinear"]
    assert patch[4:7] == ["PatchTST/42", "0.375", "0.399"] and dlinear[4:7] == ["DLinear", "0.375", "0.399"]
    for row in (patch, dlinear):
        mse, mae = float(row[2]), float(row[3])
        assert 0 < mae and 0 < mse < 10 and row[7] == "1"         # one epoch
    assert "arXiv:2211.14730" in out and "long training runs on GPUs" in out


def test_name_from_option_and_not_available(tmp_path):
    path = tmp_path / "my_copy.csv"                # any file name with --name
    path.write_bytes(ett_bytes())
    missing = bench.PUBLISHED["PatchTST/42"]["ETTm2"][720]
    results = [bench.Result(720, "PatchTransformer", "PatchTST/42", missing, 0.5, 0.4, 3, 1.0)]
    assert "not available" in bench.format_table(results)
    args = bench.parse_args(["--data", str(path), "--name", "ETTh1", "--horizon", "336", "96"])
    assert args.name == "ETTh1" and args.horizon == [96, 336]
    ett = bench.load_data(args)
    assert [len(ett.train), len(ett.val), len(ett.test)] == [8640, 2880 + 336, 2880 + 336]


def test_published_table_is_complete_and_plausible():
    for model in ("PatchTST/42", "DLinear"):
        assert set(bench.PUBLISHED[model]) == {"ETTh1", "ETTh2", "ETTm1", "ETTm2"}
        for by_horizon in bench.PUBLISHED[model].values():
            assert set(by_horizon) == {96, 192, 336, 720}
            assert all(v is None or (0.1 < v[0] < 1 and 0.2 < v[1] < 1) for v in by_horizon.values())


@pytest.mark.parametrize("argv,message", [
    (["--data", "no/such/ETTh1.csv"], r"--data no/such/ETTh1.csv: no such file"),
    (["--data", "{path}", "--name", "ETTh3"], r"--name: invalid choice: 'ETTh3'"),
    (["--data", "{other}"], r"cannot tell the dataset from the file name 'data.csv'; pass --name"),
    (["--data", "{path}", "--horizon", "100"],
     r"--horizon: invalid choice: 100 \(choose from 96, 192, 336, 720\)"),
    (["--data", "{path}", "--horizon", "x"], r"--horizon: invalid int value: 'x'"),
    (["--data", "{path}", "--epochs", "0"], r"--epochs: expected a positive int, got '0'"),
    ([], r"pass either --data PATH .* or --download"),
    (["--data", "{path}", "--download"], r"pass either --data PATH"),
])
def test_bad_inputs_give_clear_errors(etth1, tmp_path, capsys, argv, message):
    other = tmp_path / "data.csv"
    other.write_bytes(b"")
    argv = [a.format(path=etth1, other=other) for a in argv]
    with pytest.raises(SystemExit) as exit_:
        bench.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: benchmark_ett.py") and re.search(message, err), err


def test_truncated_file_is_a_data_error(tmp_path, capsys):
    path = tmp_path / "ETTh2.csv"
    content = ett_bytes()
    path.write_bytes(content[: content.index(b"2017-12-01")])
    assert bench.main(["--data", str(path), *QUICK]) == 1
    assert "data error: ETTh2.csv has 12432 rows; the standard split needs 14400" in capsys.readouterr().err


def test_download_checks_the_pinned_sha256(tmp_path, monkeypatch, capsys):
    urls = []

    def fake_urlopen(url, **kwargs):
        urls.append(url)
        return io.BytesIO(ett_bytes())             # a generated file, not the upstream one

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    assert bench.main(["--download", "--root", str(tmp_path), *QUICK]) == 1
    assert urls == ["https://raw.githubusercontent.com/zhouhaoyi/ETDataset/main/ETT-small/ETTh1.csv"]
    err = capsys.readouterr().err
    assert "checksum error: downloaded https://" in err and bench.ETT_SHA256["ETTh1"] in err
    assert list(tmp_path.iterdir()) == []                  # nothing saved
