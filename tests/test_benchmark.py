"""tools.benchmark.benchmark_ett and tools.experiments.epoch_speed, offline: generated files in
the ETT-small format, short runs (one epoch, one window in 96)."""
import io
import math
import re
import urllib.request
from functools import lru_cache

import numpy as np
import pytest
import torch

from labsupport.compare import NAIVE, RIDGE, Entry
from labsupport.train import predict
from tools.benchmark import benchmark_ett as bench
from tools.experiments import epoch_speed

HEADER = "date,HUFL,HULL,MUFL,MULL,LUFL,LULL,OT"
MONTH = 30 * 24                              # hourly rows in one of the split's months
TEST_ROWS = 4 * MONTH                        # the test part: months 17-20 (2,880 hourly rows)


@lru_cache(maxsize=None)
def ett_bytes(rows: int = 20 * MONTH + 5, minutes: int = 60) -> bytes:
    """A file like ETT-small/ETTh1.csv (or ETTm1 with minutes=15) from 2016-07-01: daily
    cycles, a trend, noise; the 20 months of the standard split and a few rows more."""
    rng = np.random.default_rng(0)
    steps = np.arange(rows)
    stamps = np.datetime64("2016-07-01T00:00") + steps * np.timedelta64(minutes, "m")
    hours = steps * minutes / 60
    phase = np.arange(7)[None, :]
    values = (np.sin(2 * np.pi * hours[:, None] / 24 + phase) + hours[:, None] / 5000 + phase
              + 0.1 * rng.standard_normal((rows, 7)))
    lines = [HEADER] + [f"{t.replace('T', ' ')}:00," + ",".join(f"{v:.3f}" for v in row)
                        for t, row in zip(stamps.astype(str), values)]
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture(scope="module")
def etth1(tmp_path_factory):
    path = tmp_path_factory.mktemp("ett") / "ETTh1.csv"
    path.write_bytes(ett_bytes())
    return path


@pytest.fixture(scope="module")
def ettm1(tmp_path_factory):
    path = tmp_path_factory.mktemp("ett") / "ETTm1.csv"
    path.write_bytes(ett_bytes(4 * 20 * MONTH + 5, minutes=15))
    return path


QUICK = ["--horizon", "96", "--epochs", "1", "--stride", "96", "--device", "cpu", "--no-progress"]


def windows(rows: int, horizon: int, stride: int) -> int:
    """Windows of a part whose targets fill ``rows`` steps: (rows - T) // stride + 1."""
    return (rows - horizon) // stride + 1


# --- the protocol's run ------------------------------------------------------------------------

@pytest.mark.slow
def test_short_run_prints_the_protocols_table_verdicts_and_the_official_subset(etth1, capsys):
    args = bench.parse_args(["--data", str(etth1), *QUICK, "--seeds", "2", "--batch-size", "8"])
    ett = bench.load_data(args)
    ((horizon, result),) = bench.run(ett, args)
    capsys.readouterr()
    bench.show(ett, args, [(horizon, result)])
    out = capsys.readouterr().out
    assert horizon == 96
    assert set(result.entries) == {"PatchTransformer", "DLinear", RIDGE, NAIVE}
    assert [result[name].seeds for name in ("PatchTransformer", "DLinear")] == [[2021, 2022]] * 2
    assert "test MSE: mean (min-max)" in out and f"vs {RIDGE}" in out              # Comparison.table()
    for name in result.entries:
        assert re.search(rf"^\s*{re.escape(name)}\s", out, re.M), name
    for a, b in [("PatchTransformer", "DLinear"), ("PatchTransformer", RIDGE), ("PatchTransformer", NAIVE),
                 ("DLinear", RIDGE), ("DLinear", NAIVE)]:
        assert result.verdict_text(a, b) in out.splitlines()                           # Comparison.verdict
    n = windows(TEST_ROWS, 96, 96)                                                     # 30 test windows
    kept = n - n % 8                                                                   # full batches of 8
    assert len(result[RIDGE].window_loss()) == n and kept == 24
    assert f"{kept:,} of {n:,}" in out                                                 # the subset's size
    x, y = bench.ett_task(ett, 96, 96).test
    for name in ("DLinear", RIDGE):
        subset = bench.official_subset(result[name], batch=8)
        expected = [(predict(m, x[:kept]) - y[:kept]).pow(2).mean().item() for m in result[name].models]
        assert subset.kept == kept and subset.windows == n
        assert subset.mse == pytest.approx(expected, rel=1e-5)
    dlinear = next(line for line in out.splitlines() if re.match(r"\s*96\s+DLinear\s", line))
    assert "DLinear" in dlinear and "0.375" in dlinear and "0.399" in dlinear          # published beside


def test_baselines_only_trains_nothing_and_prints_the_ridge_beside_rlinear(etth1, capsys):
    assert bench.main(["--data", str(etth1), "--horizon", "96", "--stride", "96", "--baselines-only",
                       "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "--baselines-only: no model is trained" in out
    assert "PatchTransformer" not in out and "DLinear:" not in out
    assert re.search(rf"^\s*96\s+{re.escape(RIDGE)}\s.*RLinear\s+0\.366\s+0\.391", out, re.M)


@pytest.mark.slow
def test_main_with_one_seed_says_a_verdict_needs_two(etth1, capsys):
    assert bench.main(["--data", str(etth1), *QUICK, "--seeds", "1"]) == 0
    out = capsys.readouterr().out
    assert "not the upstream ETTh1.csv" in out and "--stride 96 keeps one window in 96" in out
    assert "PatchTransformer vs DLinear: no verdict, PatchTransformer and DLinear have one run each" in out
    assert "PatchTransformer: lr 0.0001, batch 128, schedule type3" in out
    assert "DLinear: lr 0.005, batch 32, schedule type1" in out
    assert "arXiv:2211.14730" in out and "long training runs on GPUs" in out
    n = windows(TEST_ROWS, 96, 96)
    assert f"0 of {n:,}" in out                  # batch 128 > 30 windows: the official loaders score none


@pytest.mark.slow
def test_ettm_gets_its_weekly_naive_from_windows_a_week_long(ettm1, capsys):
    assert bench.main(["--data", str(ettm1), *QUICK, "--stride", "384", "--seeds", "1"]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"^\s*{re.escape(NAIVE)}\s", out, re.M)
    assert f"{NAIVE}: from windows of 672 steps" in out


def test_weekly_naive_of_ettm_repeats_the_week_before(ettm1):
    args = bench.parse_args(["--data", str(ettm1), "--horizon", "96"])
    ett = bench.load_data(args)
    stride, week, T = 96, 7 * 24 * 4, 96
    entry = bench.weekly_naive(ett, "ETTm1", T, stride)
    scaled = ett.scaler.transform(ett.series.values).astype(np.float64)             # (rows, 7)
    start = 16 * 4 * MONTH                                                 # the test part's border
    n = windows(4 * TEST_ROWS, T, stride)
    origins = start + stride * np.arange(n)                                            # first target of each
    steps = origins[:, None] + np.arange(T)[None, :]                                   # (n, T)
    expected = ((scaled[steps] - scaled[steps - week]) ** 2).mean(axis=(1, 2))         # (n,)
    assert entry.name == NAIVE and not entry.trained and len(entry.window_losses[0]["mse"]) == n
    np.testing.assert_allclose(entry.window_losses[0]["mse"].numpy(), expected, rtol=1e-5)
    assert entry.metrics[0].mse == pytest.approx(expected.mean(), rel=1e-5)
    assert torch.equal(bench.ett_task(ett, T, stride).test[1][:, :, 0], torch.from_numpy(
        scaled[steps][:, :, 0]).float())                                               # the same targets


def test_official_subset_drops_the_last_partial_batch(etth1):
    ett = bench.load_data(bench.parse_args(["--data", str(etth1)]))
    task = bench.ett_task(ett, 96, 1)
    n = len(task.test[1])
    assert n == windows(TEST_ROWS, 96, 1) == 2785
    assert (task.lookback, task.horizon, task.eval_stride) == (336, 96, 1)
    assert task.columns == tuple(HEADER.split(",")[1:])                   # every channel in and out
    losses = torch.arange(n, dtype=torch.float64)
    entry = Entry("m", True, 1, window_losses=[{"mse": losses, "mae": 2 * losses}] * 2)
    for batch, dropped in ((128, 97), (32, 1), (5, 0)):                                # n mod batch
        subset = bench.official_subset(entry, batch)
        kept = n - dropped
        assert (subset.kept, subset.windows) == (kept, n)
        assert subset.mse == [pytest.approx((kept - 1) / 2)] * 2                       # mean of 0..kept-1
        assert subset.mae == [pytest.approx(kept - 1)] * 2
    assert bench.official_subset(entry, 4096).kept == 0 and bench.official_subset(entry, 4096).mse == []


def test_official_settings_by_default_and_overrides(etth1):
    args = bench.parse_args(["--data", str(etth1)])
    assert (args.seeds, args.seed, args.stride) == (3, 2021, 1)
    plans = bench.plans(args, horizon=96, channels=7)
    assert list(plans) == ["PatchTransformer", "DLinear"]
    patch, dlinear = plans.values()
    assert patch.options == dict(lr=1e-4, batch_size=128, epochs=100, patience=100, schedule="type3")
    assert dlinear.options == dict(lr=0.005, batch_size=32, epochs=10, patience=3, schedule="type1")
    model = patch.build(revin=True)                             # PatchTST's backbone as published
    assert model.n_patches == 42 and isinstance(model.encoder.layers[0].norm1, torch.nn.BatchNorm1d)
    assert model.encoder.layers[0].attn.dropout == 0.0 and model.encoder.layers[0].ff.dropout.p == 0.3
    assert isinstance(dlinear.build(revin=True).revin, torch.nn.Module)       # RevIN, as every model
    args = bench.parse_args(["--data", str(etth1), "--schedule", "constant", "--epochs", "7",
                             "--patience", "2", "--batch-size", "64", "--backbone", "book"])
    for plan in bench.plans(args, horizon=96, channels=7).values():
        assert {k: plan.options[k] for k in ("batch_size", "epochs", "patience", "schedule")} == dict(
            batch_size=64, epochs=7, patience=2, schedule="constant")
    book = bench.plans(args, horizon=96, channels=7)["PatchTransformer"].build(revin=True)
    assert book.n_patches == 41 and book.encoder.layers[0].attn.dropout == 0.3
    ettm2 = bench.parse_args(["--data", str(etth1), "--name", "ETTm2"])
    assert bench.plans(ettm2, horizon=336, channels=7)["DLinear"].options["lr"] == 0.01


def test_name_from_option_and_not_available(tmp_path):
    path = tmp_path / "my_copy.csv"                # any file name with --name
    path.write_bytes(ett_bytes())
    missing = ("PatchTST/42", "not available", "not available")
    assert bench.published("PatchTransformer", "ETTm2", 720) == missing
    assert bench.published("DLinear", "ETTh1", 96) == ("DLinear", "0.375", "0.399")
    assert bench.published(RIDGE, "ETTh2", 96) == ("RLinear", "0.262", "0.331")
    assert bench.published(NAIVE, "ETTh1", 96) == ("-", "-", "-")
    args = bench.parse_args(["--data", str(path), "--name", "ETTh1", "--horizon", "336", "96"])
    assert args.name == "ETTh1" and args.horizon == [96, 336]
    ett = bench.load_data(args)
    assert [len(ett.train), len(ett.val), len(ett.test)] == [8640, 2880 + 336, 2880 + 336]


def test_published_table_is_complete_and_plausible():
    for model in ("PatchTST/42", "DLinear", "RLinear"):
        assert set(bench.PUBLISHED[model]) == {"ETTh1", "ETTh2", "ETTm1", "ETTm2"}
        for by_horizon in bench.PUBLISHED[model].values():
            assert set(by_horizon) == {96, 192, 336, 720}
            assert all(v is None or (0.1 < v[0] < 1 and 0.2 < v[1] < 1) for v in by_horizon.values())


# --- bad arguments -------------------------------------------------------------------------------

BAD = [
    (["--data", "no/such/ETTh1.csv"], r"--data no/such/ETTh1.csv: no such file"),
    (["--data", "{path}", "--name", "ETTh3"], r"--name: invalid choice: 'ETTh3'"),
    (["--data", "{other}"], r"cannot tell the dataset from the file name 'data.csv'; pass --name"),
    (["--data", "{path}", "--horizon", "100"],
     r"--horizon: invalid choice: 100 \(choose from 96, 192, 336, 720\)"),
    (["--data", "{path}", "--horizon", "x"], r"--horizon: invalid int value: 'x'"),
    ([], r"pass either --data PATH .* or --download"),
    (["--data", "{path}", "--download"], r"pass either --data PATH"),
    (["--data", "{path}", "--schedule", "cosine"], r"--schedule: invalid choice: 'cosine'"),
    (["--data", "{path}", "--backbone", "x"], r"--backbone: invalid choice: 'x'"),
    (["--data", "{path}", "--epochs", "0"], r"--epochs: expected an int >= 1 \(the most epochs per model\), "
                                            r"got '0'"),
    (["--data", "{path}", "--epochs", "-3"], r"--epochs: expected an int >= 1 .*, got '-3'"),
    (["--data", "{path}", "--epochs", "3.0"], r"--epochs: expected an int >= 1 .*, got '3.0', not an int; "
                                              r"pass 3$"),
    (["--data", "{path}", "--epochs", "2.5"], r"--epochs: expected an int >= 1 .*, got '2.5', not an int$"),
    (["--data", "{path}", "--epochs", "nan"], r"--epochs: expected an int >= 1 .*, got 'nan', not an int$"),
    (["--data", "{path}", "--patience", "inf"], r"--patience: .*, got 'inf', not an int$"),
    (["--data", "{path}", "--patience", "0"], r"--patience: expected an int >= 1 \(epochs without a better"),
    (["--data", "{path}", "--batch-size", "0"], r"--batch-size: expected an int >= 1 \(windows per batch"),
    (["--data", "{path}", "--batch-size", "1e2"], r"--batch-size: expected an int >= 1 .*, got '1e2', not an "
                                                  r"int; pass 100"),
    (["--data", "{path}", "--seeds", "0"], r"--seeds: expected an int >= 1 \(runs per model"),
    (["--data", "{path}", "--seed", "-1"], r"--seed: expected an int >= 0 \(the first seed\), got '-1'"),
    (["--data", "{path}", "--seed", "4294967296"], r"--seed: expected an int below 2\*\*32 .*, got "
                                                   r"'4294967296'"),
    (["--data", "{path}", "--seed", "4294967295", "--seeds", "2"],
     r"--seed 4294967295 with --seeds 2 runs seeds up to 4294967296; seeds must be below 2\*\*32"),
    (["--data", "{path}", "--stride", "0"], r"--stride: expected an int >= 1 \(steps between windows"),
    (["--data", "{path}", "--stride", "2200"],
     r"--stride 2200 leaves 1 test window at T = 720 .*more than ceil\(720 / 2200\) = 1"),
    (["--data", "{path}", "--max-seconds", "nan"],
     r"--max-seconds: expected a finite number of seconds > 0 \(the time budget of each run\), got 'nan': "
     r"NaN never stops"),
    (["--data", "{path}", "--max-seconds", "inf"], r"--max-seconds: expected a finite number .*, got 'inf'"),
    (["--data", "{path}", "--max-seconds", "0"], r"--max-seconds: expected a finite number .*, got '0'"),
    (["--data", "{path}", "--max-seconds", "-5"], r"--max-seconds: expected a finite number .*, got '-5'"),
    (["--data", "{path}", "--max-seconds", "soon"], r"--max-seconds: expected a finite .*, got 'soon'"),
    (["--data", "{path}", "--device", "gpu"], r"--device: 'gpu' is not a device .*; pass cpu, cuda or "
                                              r"cuda:N"),
    (["--data", "{path}", "--time-epoch"], r"unrecognized arguments: --time-epoch"),
]
if not torch.cuda.is_available():
    BAD.append((["--data", "{path}", "--device", "cuda"], r"--device: 'cuda': CUDA is not available here"))


@pytest.mark.parametrize("argv,message", BAD)
def test_bad_arguments_are_refused_at_parse_time(etth1, tmp_path, capsys, argv, message):
    other = tmp_path / "data.csv"
    other.write_bytes(b"")
    argv = [a.format(path=etth1, other=other) for a in argv]
    with pytest.raises(SystemExit) as exit_:
        bench.parse_args(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: {bench.PROG}") and re.search(message, err.strip().splitlines()[-1]), err


def test_the_largest_stride_the_paired_test_allows_is_accepted(etth1):
    # at T = 720 the test part gives (2880 - 720) // s + 1 windows; the paired test needs > ceil(720 / s)
    assert bench.parse_args(["--data", str(etth1), "--stride", "2160"]).stride == 2160
    assert windows(TEST_ROWS, 720, 2160) == 2 > math.ceil(720 / 2160)


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


# --- the speed experiment ------------------------------------------------------------------------

def test_epoch_speed_times_both_backbones_with_the_synchronised_timer(monkeypatch, capsys):
    calls = []
    real = epoch_speed.time_call

    def spy(fn, *args, **kwargs):
        calls.append(kwargs)
        return real(fn, *args, **kwargs)

    monkeypatch.setattr(epoch_speed, "time_call", spy)
    argv = ["--windows", "32", "--batch-size", "16", "--steps", "2", "--reps", "1", "--device", "cpu"]
    assert epoch_speed.main(argv) == 0
    out = capsys.readouterr().out
    assert "32 windows x 336 steps x 7 channels, T = 96, batch 16 (2 steps per epoch)" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.split()[:1] in (["patchtst"], ["book"])}
    assert set(rows) == {"patchtst", "book"}
    assert rows["patchtst"][-1] == "1.00" and float(rows["book"][-1]) > 0
    assert len(calls) == 2 * 2 and all(str(c["device"]) == "cpu" for c in calls)   # steps and an epoch, each
    assert {(c["reps"], c["warmup"]) for c in calls} == {(2, 1), (1, 0)}


@pytest.mark.parametrize("argv,message", [
    (["--windows", "0"], r"--windows: expected an int >= 1"),
    (["--batch-size", "2.5"], r"--batch-size: expected an int >= 1 .*, got '2.5', not an int"),
    (["--reps", "nan"], r"--reps: expected an int >= 1"),
    (["--backbones", "x"], r"--backbones: invalid choice: 'x'"),
])
def test_epoch_speed_refuses_bad_sizes(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        epoch_speed.main(argv)
    assert exit_.value.code == 2 and re.search(message, capsys.readouterr().err)


# --- the experiments build against today's library -------------------------------------------------

def test_every_experiments_models_build_against_the_library():
    from argparse import Namespace
    from functools import partial

    from labsupport.attention import linear_attention, performer_attention
    from tools.experiments import sections, speed

    for build, _ in speed.CONFIGS.values():
        build()
    unset = Namespace(width=32, attn_dropout=None)              # sections.py without --attn-dropout
    full = sections.patch_model(unset, True, dropout=0.1)
    assert full.encoder.layers[0].attn.dropout == 0.1           # the model's dropout, where it applies
    for kernel in (linear_attention, partial(performer_attention, num_features=8, generator=0)):
        model = sections.patch_model(unset, True, kernel=kernel, dropout=0.1)
        assert model.encoder.layers[0].attn.dropout == 0.0      # a kernel that cannot drop weights
    with pytest.raises(ValueError, match=r"does not apply dropout to its attention weights"):
        sections.patch_model(Namespace(width=32, attn_dropout=0.2), True, kernel=linear_attention)
