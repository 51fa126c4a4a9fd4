"""tools/benchmark/benchmark_ett.py, offline: a generated file in the ETT-small format, one short run."""
import importlib.util
import io
import re
import sys
import urllib.request
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.slow          # short end-to-end runs of the tool: they train models

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "benchmark" / "benchmark_ett.py"
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


def table_rows(out: str) -> dict:
    """The printed table's rows at horizon 96, by model, split into cells."""
    header = next(line for line in out.splitlines() if line.lstrip().startswith("horizon"))
    assert header.split()[:9] == ["horizon", "model", "seeds", "MSE", "+-", "MAE", "+-", "sub.MSE", "sub.MAE"]
    return {line.split()[1]: line.split() for line in out.splitlines() if line.lstrip().startswith("96 ")}


def test_short_run_prints_ours_and_the_ridge_beside_the_published_numbers(etth1, capsys):
    assert bench.main(["--data", str(etth1), *QUICK]) == 0
    out = capsys.readouterr().out
    assert "not the upstream ETTh1.csv" in out and "--stride 96 keeps one window in 96" in out
    rows = table_rows(out)
    assert set(rows) == {"PatchTransformer", "DLinear", "ridge"}
    patch, dlinear, ridge = rows["PatchTransformer"], rows["DLinear"], rows["ridge"]
    assert patch[9:12] == ["PatchTST/42", "0.375", "0.399"] and dlinear[9:12] == ["DLinear", "0.375", "0.399"]
    assert ridge[9:12] == ["-", "-", "-"] and ridge[12] == "-"                 # nothing published, no epochs
    for row in (patch, dlinear, ridge):
        mse, mae = float(row[3]), float(row[5])
        assert 0 < mae and 0 < mse < 10 and row[2] == "1" and row[4] == "-"    # one seed: no spread
    assert patch[12] == dlinear[12] == "1"                                     # one epoch
    assert "PatchTransformer: lr 0.0001, batch 128, schedule type3" in out
    assert "DLinear: lr 0.005, batch 32, schedule type1" in out
    assert "arXiv:2211.14730" in out and "long training runs on GPUs" in out


def test_official_settings_by_default_and_overrides(etth1):
    args = bench.parse_args(["--data", str(etth1)])
    patch, dlinear = bench.plans(args, horizon=96, channels=7)
    assert (patch.lr, patch.batch, patch.epochs, patch.patience, patch.schedule) == (
        1e-4, 128, 100, 100, "type3")
    assert (dlinear.lr, dlinear.batch, dlinear.epochs, dlinear.patience, dlinear.schedule) == (
        0.005, 32, 10, 3, "type1")
    model = patch.build()                                    # PatchTST's backbone as published
    assert model.n_patches == 42 and isinstance(model.encoder.layers[0].norm1, torch.nn.BatchNorm1d)
    assert model.encoder.layers[0].attn.dropout == 0.0 and model.encoder.layers[0].ff.dropout.p == 0.3
    args = bench.parse_args(["--data", str(etth1), "--schedule", "constant", "--epochs", "7",
                             "--patience", "2", "--batch-size", "64", "--backbone", "book"])
    patch, dlinear = bench.plans(args, horizon=96, channels=7)
    for plan in (patch, dlinear):
        assert (plan.batch, plan.epochs, plan.patience, plan.schedule) == (64, 7, 2, "constant")
    book = patch.build()
    assert book.n_patches == 41 and book.encoder.layers[0].attn.dropout == 0.3


def test_both_scorings_every_window_and_the_official_subset():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(300, 336, 2, generator=g), torch.randn(300, 4, 2, generator=g)
    y[256:] += 5.0                                           # the last partial batch is much worse
    zero = lambda inputs: torch.zeros(len(inputs), 4, 2)    # noqa: E731
    mse, mae, sub_mse, sub_mae, kept = bench.scores(zero, (x, y), batch=128, device="cpu")
    assert kept == 256                                       # 300 // 128 full batches of 128
    assert mse == pytest.approx(y.pow(2).mean().item()) and mae == pytest.approx(y.abs().mean().item())
    assert sub_mse == pytest.approx(y[:256].pow(2).mean().item()) and sub_mse < mse / 2
    assert sub_mae == pytest.approx(y[:256].abs().mean().item())
    assert bench.scores(zero, (x, y), batch=32, device="cpu")[4] == 288
    assert bench.scores(zero, (x[:100], y[:100]), batch=128, device="cpu")[2] != bench.scores(
        zero, (x[:100], y[:100]), batch=128, device="cpu")[2]                  # no full batch: NaN


def test_ridge_row_is_the_closed_form_fitted_on_validation():
    from labsupport.models import RidgeForecaster
    g = torch.Generator().manual_seed(1)
    x = torch.randn(400, 336, 3, generator=g)
    y = 0.5 * x[:, -96:] + 0.1 * torch.randn(400, 96, 3, generator=g)
    train, val, test = (x[:200], y[:200]), (x[200:300], y[200:300]), (x[300:], y[300:])
    row = bench.ridge_row(96, train, val, test, batch=64)
    ridge = RidgeForecaster(lookback=336, horizon=96, channels=3).fit(train, val)
    error = ridge(test[0]) - test[1]
    assert row.model == "ridge" and row.published is None and row.seeds == 1
    assert row.mse == pytest.approx(error.pow(2).mean().item(), rel=1e-6)
    assert row.sub_mse == pytest.approx(error[:64].pow(2).mean().item(), rel=1e-6) and row.sub_windows == 64
    assert row.mse < 0.5 * y[300:].pow(2).mean().item()     # it did learn the map


def test_seeds_give_the_mean_and_the_spread(etth1, capsys):
    runs = [(0.3, 0.4, 0.31, 0.41, 256, 5, 2.0), (0.5, 0.6, 0.49, 0.59, 256, 7, 4.0)]
    row = bench.summarise(96, "DLinear", "DLinear", (0.375, 0.399), runs, windows=300)
    assert (row.mse, row.mae, row.sub_mse, row.seconds, row.seeds) == pytest.approx((0.4, 0.5, 0.4, 3.0, 2))
    assert row.mse_sd == pytest.approx(0.2 / 2 ** 0.5) and row.mae_sd == pytest.approx(0.2 / 2 ** 0.5)
    args = bench.parse_args(["--data", str(etth1), *QUICK, "--seeds", "2"])
    results = bench.run(bench.load_data(args), args)
    trained = [r for r in results if r.model != "ridge"]
    assert all(r.seeds == 2 and r.mse_sd > 0 for r in trained)              # two seeds, two results
    assert bench.main(["--data", str(etth1), *QUICK, "--seeds", "2"]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert rows["DLinear"][2] == "2" and float(rows["DLinear"][4]) >= 0


def test_time_epoch_needs_no_data_and_compares_with_a_minimal_patchtst(monkeypatch, capsys):
    monkeypatch.setattr(bench, "TIME_WINDOWS", 32)           # 2 steps of 16: a smoke test, not a timing
    monkeypatch.setattr(bench, "TIME_BATCH", 16)
    monkeypatch.setattr(bench, "TIME_STEPS", 1)
    assert bench.main(["--time-epoch", "--device", "cpu", "--no-progress"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("  ")[0].strip(): line.split()[-3:] for line in out.splitlines()
            if line.startswith(("PatchTransformer", "minimal"))}
    assert set(rows) == {"PatchTransformer (patchtst)", "PatchTransformer (book)", "minimal PatchTST"}
    assert rows["minimal PatchTST"][2] == "1.00"
    assert all(float(cells[0]) > 0 and float(cells[2]) > 0 for cells in rows.values())
    reference = bench.MinimalPatchTST(lookback=336, horizon=96).eval()
    assert reference.head.in_features == 42 * 16
    x = torch.randn(2, 336, 3)
    torch.testing.assert_close(reference(2 * x + 1), 2 * reference(x) + 1, atol=1e-4, rtol=1e-4)


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
    (["--time-epoch", "--data", "{path}"], r"--time-epoch generates its own windows; drop --data"),
    (["--data", "{path}", "--schedule", "cosine"], r"--schedule: invalid choice: 'cosine'"),
    (["--data", "{path}", "--seeds", "0"], r"--seeds: expected a positive int, got '0'"),
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
