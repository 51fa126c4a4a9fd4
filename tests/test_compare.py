import dataclasses
import math

import matplotlib
import numpy as np
import pytest
import torch

import labsupport.compare.protocol as protocol
from labsupport.compare import (
    NAIVE,
    RIDGE,
    Comparison,
    Entry,
    RunFailure,
    Trainable,
    TrainingRecord,
    compare,
    diebold_mariano,
)
from labsupport.data import ForecastTask, Standardizer
from labsupport.models import GRUForecaster, LinearForecaster, RidgeForecaster, seasonal_naive
from labsupport.schedules import warmup_cosine
from labsupport.train import History, Metrics, evaluate, window_errors

matplotlib.use("Agg")
LOOKBACK, HORIZON, STRIDE = 192, 12, 6


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def small_task():
    """Windows of a noisy daily-and-weekly pattern, cut like book_task's (192 h in, 12 out),
    6 h apart: each test window's targets overlap the next one's (overlap 2)."""
    g = torch.Generator().manual_seed(3)
    t = torch.arange(1400, dtype=torch.float32)
    series = (torch.sin(2 * torch.pi * t / 24) + 0.5 * torch.sin(2 * torch.pi * t / 168)
              + 0.2 * torch.randn(t.shape, generator=g))
    windows = series.unfold(0, LOOKBACK + HORIZON, STRIDE)[:, :, None]     # (N, L + T, 1)
    x, y = windows[:, :LOOKBACK], windows[:, LOOKBACK:]
    parts = [(x[a:b], y[a:b]) for a, b in ((0, 120), (120, 160), (160, 200))]
    scaler = Standardizer().fit(series[:, None].numpy())
    return ForecastTask(*parts, scaler, ("value",), LOOKBACK, HORIZON, eval_stride=STRIDE, unit="MW")


def dlinear(revin):
    return LinearForecaster(lookback=LOOKBACK, horizon=HORIZON, revin=revin)


def tiny_gru(revin):
    return GRUForecaster(lookback=LOOKBACK, horizon=HORIZON, hidden=4, revin=revin)


FIT = dict(epochs=3, patience=2, batch_size=32, lr=1e-2)


@pytest.fixture(scope="module")
def result():
    return compare(small_task(), {"DLinear": Trainable(dlinear), "GRU": Trainable(tiny_gru, seeds=1)},
                   revin=True, seeds=2, progress=False, **FIT)


# --- the rule, on hand-made entries -----------------------------------------------------------------

N = 40
WIGGLE = torch.sin(torch.arange(N, dtype=torch.float64))              # a zero-ish-mean pattern


def losses(value, noise=0.0, seed=0):
    """Per-window losses with mean ``value``: the same small wiggle for every model (so the
    paired differences are nearly constant) plus independent noise of size ``noise``."""
    g = torch.Generator().manual_seed(seed)
    w = 0.01 * (WIGGLE - WIGGLE.mean()) + noise * torch.randn(N, generator=g, dtype=torch.float64)
    w = w - w.mean()
    return value + w


def entry(name, values, trained=True, stops=None, noise=0.0, windows=True):
    """An Entry with one run per value, each run's per-window losses around its value."""
    stops = stops or ["converged"] * len(values)
    e = Entry(name, trained, 0, metrics=[Metrics(mse=v, mae=v) for v in values],
              records=[TrainingRecord(s, 3, 2, 0.1, 1.0, 3.0) for s in stops] if trained else [],
              seeds=list(range(len(values))))
    if windows:
        base = 100 * sum(map(ord, name))                              # each model its own noise
        e.window_losses = [{"mse": losses(v, noise, base + i), "mae": losses(v, noise, base + 50 + i)}
                           for i, v in enumerate(values)]
    return e


def table_of(*entries, overlap=1):
    return Comparison({e.name: e for e in entries}, True, dict(train=1, val=1, test=N), overlap=overlap)


def test_a_model_with_nan_scores_is_failed_and_never_beats_anything(capsys):
    t = Comparison({"A": Entry("A", True, 0, metrics=[Metrics(0.5, 0.5), Metrics(0.6, 0.6)]),
                    "B": Entry("B", True, 0, metrics=[Metrics(math.nan, math.nan)] * 2)},
                   True, dict(train=1, val=1, test=1), overlap=1)
    assert t.verdict("A", "B") == "failed" and t.outcome("B", "A") == "failed"
    assert capsys.readouterr().out == "A vs B: no verdict, B failed (NaN test MSE in 2 of 2 runs)\n"
    assert not t.beats("A", "B") and not t.beats("B", "A")
    assert t.failed("B") and not t.failed("A") and t.failure("B") == "NaN test MSE in 2 of 2 runs"


def test_a_non_finite_forecast_on_any_window_fails_the_model_and_names_the_count(capsys):
    bad = entry("B", [0.2, 0.21])
    bad.window_losses[1]["mse"][[3, 7, 9]] = math.nan
    bad.window_losses[1]["mae"][[3, 7, 9]] = math.nan
    t = table_of(entry("A", [0.5, 0.51]), bad, entry(RIDGE, [0.4], trained=False))
    assert t.failure("B") == "NaN forecast on 3 of 40 test windows in 1 of 2 runs"
    assert t.outcome("A", "B") == "failed" and t.outcome("B", RIDGE) == "failed"
    t.verdict("B", "A")
    assert capsys.readouterr().out == ("B vs A: no verdict, B failed (NaN forecast on 3 of 40 test "
                                       "windows in 1 of 2 runs)\n")
    with pytest.raises(ValueError, match=r"no paired interval: B failed \(NaN forecast on 3 of 40"):
        t.interval("A", "B")
    t.table()
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.lstrip().startswith("B "))
    assert "failed: NaN forecast on 3 of 40 test windows in 1 of 2 runs" in row
    infinite = entry("C", [0.3, 0.3])
    for run in infinite.window_losses:
        run["mse"][0], run["mae"][0] = math.inf, math.inf
    overflow = entry("D", [0.3, 0.3])
    overflow.window_losses[0]["mse"][5] = math.inf                  # a finite forecast whose square overflows
    t = table_of(infinite, overflow)
    assert t.failure("C") == "infinite forecast on 1 of 40 test windows"
    assert t.failure("D") == "non-finite test MSE on 1 of 40 test windows in 1 of 2 runs"


def test_a_gap_beyond_the_spread_and_the_paired_test_is_a_win(capsys):
    t = table_of(entry("A", [0.10, 0.12]), entry("B", [0.20, 0.23]), entry(RIDGE, [0.125], trained=False))
    assert t.outcome("A", "B") == "a" and t.outcome("B", "A") == "b"
    assert t.beats("A", "B") and not t.beats("B", "A")
    assert t.spread("A") == pytest.approx(0.02) and t.spread(RIDGE) == 0.0
    assert t.outcome("A", RIDGE) == "a"          # every seed below the ridge, paired test too
    assert t.outcome(RIDGE, "B") == "a"
    t.verdict("A", "B")
    t.verdict("B", "A")
    assert capsys.readouterr().out.splitlines() == [
        "A beats B (test MSE: beyond the seed spread and the paired test)"] * 2


def test_both_the_seed_spread_and_the_paired_test_must_separate(capsys):
    # a gap of 0.1 beyond the seed ranges (0.01), but per-window noise of 0.5 swamps it
    noisy = table_of(entry("A", [0.10, 0.11], noise=0.5), entry("B", [0.20, 0.21], noise=0.5))
    paired = noisy.interval("A", "B")
    assert paired.low < 0 < paired.high and noisy.outcome("A", "B") == "within"
    # the paired interval excludes 0, but the gap 0.03 is within A's range of 0.05
    steady = table_of(entry("A", [0.10, 0.15]), entry("B", [0.155, 0.16]))
    assert steady.interval("A", "B").excludes_zero and steady.outcome("A", "B") == "within"
    steady.verdict("A", "B")
    assert capsys.readouterr().out == ("A and B: not separated by the seed spread and the paired test "
                                       "(test MSE)\n")


# The cases where a rule that asked a model's seed spread to clear a baseline without seeds
# would say "not separated" although every seed lay on one side and the paired interval
# excluded 0: the lab's PatchTransformer against the ridge (seeds 0.104 and 0.149 against 0.095), 12.3's
# sinusoidal encoding at 1,344 h against the weekly naive, 12.4's forecaster at 28 days
# against the ridge; and 12.5's Linformer, whose paired interval against full attention (a
# trained model) excludes 0 while the gap lies inside the seed spread.
BASELINE_CASES = {
    "lab, 24 h": (entry("PatchTransformer", [0.104, 0.149], noise=0.05),
                  entry(RIDGE, [0.095], False, noise=0.05)),
    "12.3, 1,344 h": (entry("sinusoidal", [0.58, 0.97], noise=0.2), entry(NAIVE, [0.45], False, noise=0.2)),
    "12.4, 28 days": (entry("forecaster", [0.092, 0.110], noise=0.02),
                      entry(RIDGE, [0.084], False, noise=0.02)),
}


@pytest.mark.parametrize("case", BASELINE_CASES)
def test_against_a_baseline_every_seed_on_one_side_and_the_paired_test_rank(case, capsys):
    model, baseline = BASELINE_CASES[case]
    t = table_of(model, baseline)
    a, b = model.name, baseline.name
    gap, spread = t.mean(a) - t.mean(b), t.spread(a)
    assert 0 < gap <= spread                  # the old rule's "gap beyond the spread" fails here
    assert t.interval(a, b).low > 0 and all(v > t.mean(b) for v in model.values())
    assert t.outcome(a, b) == "b" and t.outcome(b, a) == "a" and t.beats(b, a)
    t.verdict(a, b)
    assert capsys.readouterr().out == f"{b} beats {a} (test MSE: every seed and the paired test)\n"
    paired = t.interval(a, b)
    assert t.judgement(a, b) == f"worse: every seed; paired {paired.low:+.3f} to {paired.high:+.3f}"
    assert t.judgement(b, a).startswith("better: every seed; paired -")


def test_against_a_baseline_seeds_on_both_sides_are_not_separated(capsys):
    t = table_of(entry("A", [0.09, 0.13]), entry(RIDGE, [0.10], trained=False))
    assert t.interval("A", RIDGE).excludes_zero and t.outcome("A", RIDGE) == "within"
    assert t.judgement("A", RIDGE).startswith("not separated: seeds on both sides; paired +")
    t.verdict("A", RIDGE)
    assert capsys.readouterr().out == ("A and ridge (closed form): not separated by its seeds and the "
                                       "paired test (test MSE)\n")
    noisy = table_of(entry("A", [0.11, 0.12], noise=0.5), entry(RIDGE, [0.10], trained=False, noise=0.5))
    assert noisy.outcome("A", RIDGE) == "within"
    assert noisy.judgement("A", RIDGE).startswith("not separated; paired -")
    limited = table_of(entry("A", [0.11, 0.12], stops=["epochs", "converged"]),
                       entry(RIDGE, [0.10], trained=False))
    assert limited.outcome("A", RIDGE) == "unsettled"
    assert limited.judgement("A", RIDGE).startswith("not settled at this budget; paired +")
    assert limited.outcome(RIDGE, "A") == "unsettled"
    single = table_of(entry("A", [0.2]), entry(RIDGE, [0.10], trained=False))
    assert single.judgement("A", RIDGE) == "too few seeds"


def test_between_trained_models_a_paired_interval_inside_the_seed_spread_is_not_a_ranking():
    # 12.5's Linformer against full attention: the paired interval excludes 0, the gap does not
    # exceed the seed spread, and the verdict says which of the two failed
    t = table_of(entry("Linformer", [0.100, 0.140]), entry("full attention", [0.095, 0.125, 0.110]))
    assert t.interval("Linformer", "full attention").excludes_zero
    assert t.outcome("Linformer", "full attention") == "within"
    assert t.judgement("Linformer", "full attention").startswith(
        "not separated: within the seed spread; paired +")


def test_the_interval_is_the_paired_test_of_the_seed_mean_losses_with_the_overlap():
    a, b = entry("A", [0.10, 0.12], noise=0.05), entry("B", [0.20, 0.23], noise=0.05)
    t = table_of(a, b, overlap=3)
    d = (a.window_losses[0]["mse"] + a.window_losses[1]["mse"]) / 2 - (
        b.window_losses[0]["mse"] + b.window_losses[1]["mse"]) / 2
    expected = diebold_mariano(d.numpy(), overlap=3)
    got = t.interval("A", "B")
    assert (got.mean, got.low, got.high, got.overlap, got.lag) == pytest.approx(
        (expected.mean, expected.low, expected.high, 3, 3))
    assert t.interval("B", "A").mean == pytest.approx(-got.mean)
    mae = t.interval("A", "B", "mae")
    mean_mae = [float((e.window_losses[0]["mae"] + e.window_losses[1]["mae"]).mean() / 2) for e in (a, b)]
    assert mae.mean == pytest.approx(mean_mae[0] - mean_mae[1])


def test_a_single_run_gives_no_verdict_and_borrows_nothing(capsys):
    t = table_of(entry("A", [0.10, 0.12]), entry("B", [0.20, 0.26]), entry("one", [0.5]))
    assert t.spread("one") is None and t.outcome("one", "A") == "unknown"
    t.verdict("A", "one")
    assert capsys.readouterr().out == ("A vs one: no verdict, one has one run; a verdict needs at least "
                                       "2 seeds (test MSE)\n")
    lonely = table_of(entry("one", [0.15]), entry(RIDGE, [0.30], trained=False))
    assert lonely.outcome("one", RIDGE) == "unknown"
    hand_made = table_of(entry("A", [0.1, 0.12]), entry("W", [0.3], trained=False, windows=False))
    assert hand_made.outcome("A", "W") == "unknown"
    hand_made.verdict("A", "W")
    assert capsys.readouterr().out == ("A vs W: no verdict, W has no per-window test losses for the "
                                       "paired test (test MSE)\n")


def test_a_loser_stopped_by_its_budget_is_not_settled(capsys):
    budget = ["epochs", "converged"]
    t = table_of(entry("A", [0.10, 0.12]), entry("B", [0.20, 0.23], stops=budget),
                 entry("C", [0.20, 0.23], stops=["converged", "diverged"]),
                 entry("D", [0.11, 0.115], stops=["time", "time"]), entry("E", [0.105, 0.11]))
    assert t.outcome("A", "B") == "unsettled" and t.outcome("B", "A") == "unsettled"
    assert t.budget_limited("B") and not t.settled("B") and t.settled("A") and not t.budget_limited("A")
    assert t.outcome("A", "C") == "a" and t.settled("C")          # a kept diverged run is settled
    assert t.outcome("D", "C") == "a"                             # only the winner ran out of time
    assert t.outcome("A", "D") == "unsettled"                     # not separated, D hit its budget
    assert t.outcome("A", "E") == "within"
    t.verdict("A", "B")
    t.verdict("A", "D")
    assert capsys.readouterr().out.splitlines() == [
        "A vs B: not settled at this budget (B stopped at its epoch budget; more training could "
        "reverse it) (test MSE)",
        "A vs D: not settled at this budget (D stopped at its time budget; more training could "
        "reverse it) (test MSE)"]
    interrupted = table_of(entry("A", [0.10, 0.12]),
                           entry("B", [0.20, 0.23], stops=["interrupted", "epochs"]))
    interrupted.verdict("A", "B")
    assert capsys.readouterr().out == ("A vs B: not settled at this budget (B stopped at its epoch budget "
                                       "or was interrupted; more training could reverse it) (test MSE)\n")


def test_verdict_lines_carry_no_numbers(capsys):
    t = table_of(entry("A", [0.10, 0.12]), entry("W", [0.6, 0.61]), entry("M", [0.29, 0.33]),
                 entry("L", [0.3, 0.31], stops=["epochs"] * 2),
                 entry(RIDGE, [0.3], trained=False), entry(NAIVE, [0.5], trained=False))
    outcomes = t.verdicts()
    assert set(outcomes.values()) == {"a", "b", "within", "unsettled"}
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 4 * 2
    assert "A beats ridge (closed form) (test MSE: every seed and the paired test)" in out
    assert not any(ch.isdigit() for line in out for ch in line)
    t.verdict("A", "M", metric="mae")
    assert capsys.readouterr().out == "A beats M (test MAE: beyond the seed spread and the paired test)\n"


def test_rule_refuses_bad_questions():
    t = table_of(entry("A", [0.1, 0.2]), entry("B", [0.3, 0.4]))
    with pytest.raises(ValueError, match="compare two different models, got 'A' twice"):
        t.outcome("A", "A")
    with pytest.raises(KeyError, match=r"no model 'Z' in this comparison; it has \['A', 'B'\]"):
        t.outcome("A", "Z")
    with pytest.raises(ValueError, match=r"metric must be one of \['mae', 'mae_orig', 'mse'\], got 'rmse'"):
        t.outcome("A", "B", metric="rmse")
    short = entry("S", [0.1, 0.2])
    short.window_losses = [{k: v[:30] for k, v in run.items()} for run in short.window_losses]
    with pytest.raises(ValueError, match=r"A and S were scored on different test windows \(40 and 30\)"):
        table_of(entry("A", [0.1, 0.2]), short).outcome("A", "S")
    with pytest.raises(TypeError, match=r"overlap"):
        Comparison({}, True, dict(train=1, val=1, test=1))


# --- the table ----------------------------------------------------------------------------------------

def test_table_rows_legend_and_the_verdict_column(capsys):
    t = table_of(entry("A", [0.10, 0.12], stops=["epochs", "converged"]), entry("B", [0.20, 0.23]),
                 entry(RIDGE, [0.125], trained=False), overlap=2)
    t.table()
    lines = capsys.readouterr().out.splitlines()
    header = lines[0]
    for column in ("model", "params", "seeds", "test MSE: mean (min-max)", "MAE", "MAE (MW)",
                   "epochs (best)", "s/epoch", "train s", "stopped", f"vs {RIDGE}"):
        assert column in header
    rows = {line.split()[0]: line for line in lines[1:4]}
    a, b = t.interval("A", RIDGE), t.interval("B", RIDGE)
    assert f"better: every seed; paired {a.low:+.3f} to {a.high:+.3f}" in rows["A"]
    assert f"worse: every seed; paired {b.low:+.3f} to {b.high:+.3f}" in rows["B"]
    assert "reference" in rows["ridge"] and "epoch budget 1/2, converged 1/2" in rows["A"]
    assert "converged 2/2" in rows["B"] and "0.110 (0.100-0.120)" in rows["A"]
    legend = " ".join(line.strip() for line in lines[4:])
    for phrase in ("mean (min-max) over seeds", "test 40)", "RevIN", "standardised series",
                   f"verdicts against {RIDGE}", "comparison protocol (https://github.com/"):
        assert phrase in legend
    assert all(len(line) <= 100 for line in lines[4:])
    t.table(reference="B")
    lines = capsys.readouterr().out.splitlines()
    assert "reference" in next(line for line in lines if line.lstrip().startswith("B "))
    assert "vs B" in lines[0] and "verdicts against B" in " ".join(lines[4:])
    with pytest.raises(KeyError, match=r"no model 'Z'"):
        t.table(reference="Z")
    t.table(caption="The race, 24 hours ahead")
    assert capsys.readouterr().out.splitlines()[0] == "The race, 24 hours ahead"


def test_the_legend_is_one_markdown_line_that_links_to_the_protocol(monkeypatch):
    from labsupport import display
    from labsupport.links import PROTOCOL

    shown = []
    monkeypatch.setattr(display, "in_notebook", lambda: True)
    monkeypatch.setattr("IPython.display.display", lambda data, raw=False: shown.append(data))
    table_of(entry("A", [0.10, 0.12]), entry(RIDGE, [0.125], trained=False)).table()
    [data] = shown
    table_part, legend = data["text/markdown"].split("\n\n")
    assert table_part.startswith("| model |") and "\n" not in legend
    assert legend.endswith(f"by [the book's comparison protocol]({PROTOCOL}).")


def test_rows_carry_the_numbers_of_the_table():
    t = table_of(entry("A", [0.10, 0.12]), entry("one", [0.3]), entry(RIDGE, [0.125], trained=False))
    rows = {r["model"]: r for r in t.rows()}
    a = rows["A"]
    assert (a["runs"], a["failed_runs"], a["failure"]) == (2, 0, None)
    assert a["mean"] == pytest.approx(0.11) and a["spread"] == pytest.approx(0.02)
    assert a["stopped"] == "converged 2/2" and a["settled"] and not a["budget_limited"]
    assert a["versus"].mean == pytest.approx(t.interval("A", RIDGE).mean) and a["reference"] == RIDGE
    assert a["verdict"] == t.judgement("A", RIDGE) and rows[RIDGE]["verdict"] is None
    assert rows["one"]["spread"] is None and rows[RIDGE]["versus"] is None and rows[RIDGE]["spread"] == 0.0
    assert "spread_borrowed" not in a


# --- the protocol end to end --------------------------------------------------------------------------

def test_every_model_on_the_same_windows_with_its_seeds_and_two_baselines(result):
    task = small_task()
    assert list(result.entries) == ["DLinear", "GRU", RIDGE, NAIVE]
    assert result["DLinear"].seeds == [0, 1] and result["GRU"].seeds == [0]
    assert result.windows == dict(train=120, val=40, test=40)
    assert result.overlap == 2 and not result.interrupted                 # ceil(12 / 6)
    assert result["DLinear"].params == sum(p.numel() for p in dlinear(True).parameters())
    assert result[RIDGE].params == LOOKBACK * HORIZON + HORIZON and result[NAIVE].params == 0
    naive = evaluate(lambda x: seasonal_naive(x, 168, HORIZON), task.test)
    assert result.mean(NAIVE) == pytest.approx(naive.mse, rel=1e-6)
    ridge = RidgeForecaster(lookback=LOOKBACK, horizon=HORIZON, revin=True).fit(task.train, task.val)
    assert result.mean(RIDGE) == pytest.approx(evaluate(ridge, task.test).mse, rel=1e-6)
    for name in ("DLinear", "GRU"):
        e = result[name]
        for model, metrics, errors in zip(e.models, e.metrics, e.window_losses):
            assert model.revin is not None
            assert metrics.mse == pytest.approx(evaluate(model, task.test).mse, rel=1e-6)
            assert metrics.mae_orig is not None
            own = window_errors(model, task.test, scaler=task.scaler, channels=[0])
            torch.testing.assert_close(errors["mse"], own["mse"])
            assert errors["mae_orig"].mean().item() == pytest.approx(metrics.mae_orig, rel=1e-5)
    assert result[NAIVE].window_losses[0]["mse"].shape == (40,)


def test_runs_are_reproducible_and_seeds_differ(result):
    again = compare(small_task(), {"DLinear": Trainable(dlinear)}, revin=True, seeds=2,
                    progress=False, **FIT)
    assert again["DLinear"].values() == result["DLinear"].values()
    first, second = result["DLinear"].values()
    assert first != second


def test_a_schedule_reaches_fit_as_given(monkeypatch):
    seen = []
    real_fit = protocol.fit

    def spy(model, train, val, **options):
        seen.append(options.get("schedule", "absent"))
        return real_fit(model, train, val, **options)

    monkeypatch.setattr(protocol, "fit", spy)
    halve = lambda epoch: 0.5 ** epoch          # noqa: E731
    compare(small_task(), {"A": Trainable(dlinear, seeds=1), "B": Trainable(dlinear, seeds=1, schedule=None)},
            revin=True, progress=False, schedule=halve, **FIT)
    assert seen == [halve, None]


def test_a_budget_that_ends_training_is_marked(capsys):
    result = compare(small_task(), {"GRU": Trainable(tiny_gru, seeds=[5, 6])}, revin=False,
                     progress=False, epochs=1, patience=3, lr=1e-2)
    assert [r.stop_reason for r in result["GRU"].records] == ["epochs", "epochs"]
    assert result.budget_limited("GRU") and result.outcome("GRU", NAIVE) in ("unsettled", "a")
    result.table()
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.lstrip().startswith("GRU"))
    assert "epoch budget 2/2" in row and "converged" not in row
    assert "; no RevIN; verdicts against" in " ".join(out.split())
    assert result.steps == (LOOKBACK, HORIZON)
    assert f"windows of {LOOKBACK} steps in, {HORIZON} out" in " ".join(out.split())
    unitless = compare(small_task(), {}, revin=False, unit=None)
    assert unitless[RIDGE].metrics[0].mae_orig is None and "mae_orig" not in unitless[RIDGE].window_losses[0]
    unitless.table()
    out = capsys.readouterr().out
    assert "MAE (" not in out.splitlines()[0] and "MAE" in out


def test_plot_shows_seeds_as_dots_and_baselines_as_lines(result):
    ax = result.plot()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["DLinear", "GRU"]
    dots = [line for line in ax.lines if line.get_marker() == "o"]
    assert sorted(x for line in dots for x in line.get_xdata()) == sorted(
        result["DLinear"].values() + result["GRU"].values())
    vertical = [line for line in ax.lines if line.get_label() in (RIDGE, NAIVE)]
    assert [line.get_xdata()[0] for line in vertical] == [result.mean(RIDGE), result.mean(NAIVE)]


def test_calendar_inputs_reach_the_models_and_the_baselines_read_the_window():
    task = small_task()
    with_time = [((x, torch.zeros(len(x), LOOKBACK + HORIZON, 2)), y)
                 for x, y in (task.train, task.val, task.test)]
    calendar = dataclasses.replace(task, train=with_time[0], val=with_time[1], test=with_time[2])

    class Reader(torch.nn.Module):                  # uses the window only, takes the time too
        def __init__(self, revin):
            super().__init__()
            self.inner = dlinear(revin)
            self.revin = self.inner.revin

        def forward(self, x, time):
            return self.inner(x)

    result = compare(calendar, {"R": Trainable(Reader, seeds=1)}, revin=True, progress=False, **FIT)
    plain = compare(task, {"R": Trainable(dlinear, seeds=1)}, revin=True, progress=False, **FIT)
    assert result.mean("R") == pytest.approx(plain.mean("R"), rel=1e-6)
    assert result.mean(RIDGE) == pytest.approx(plain.mean(RIDGE), rel=1e-9)


def test_records_are_read_from_fit_and_frozen():
    h = History(train_loss=[3, 2], val_loss=[3, 2], epoch_seconds=[1.0, 3.0], best_epoch=1,
                stop_reason="time", total_seconds=42.0)
    record = TrainingRecord.of(h)
    assert record == TrainingRecord("time", 2, 2, 2, 2.0, 42.0) and record.budget_limited
    with pytest.raises(AttributeError):
        record.best_epoch = 2
    with pytest.raises(ValueError, match=r"a History with no finished epoch has no record"):
        TrainingRecord.of(History(stop_reason="interrupted"))


def test_a_window_shorter_than_the_period_can_leave_the_naive_out():
    result = compare(small_task(), {}, revin=False, naive_period=None)
    assert list(result.entries) == [RIDGE]
    daily = compare(small_task(), {}, revin=False, naive_period=24)
    naive = evaluate(lambda x: seasonal_naive(x, 24, HORIZON), small_task().test)
    assert daily.mean("seasonal naive (daily)") == pytest.approx(naive.mse, rel=1e-6)


# --- failures are recorded, never ranked ----------------------------------------------------------------

class Exploding(torch.nn.Module):
    """Forecasts like DLinear until its ``after``-th training call, then NaN (a diverging model)."""

    def __init__(self, revin, after):
        super().__init__()
        self.inner, self.calls, self.after = dlinear(revin), 0, after
        self.revin = self.inner.revin

    def forward(self, x):
        y = self.inner(x)
        if self.training:
            self.calls += 1
            if self.calls > self.after:
                return y * float("nan")
        return y


class NaNOnTest(torch.nn.Module):
    """DLinear whose forecast is NaN on the first ``bad`` windows of a batch of ``n`` (the test set)."""

    def __init__(self, revin, n, bad):
        super().__init__()
        self.inner, self.n, self.bad = dlinear(revin), n, bad
        self.revin = self.inner.revin

    def forward(self, x):
        y = self.inner(x)
        if not self.training and len(x) == self.n:
            y = y.clone()
            y[:self.bad] = float("nan")
        return y


def test_a_run_that_raises_is_recorded_with_its_seed_and_the_rest_are_kept(capsys):
    calls = [0]                                       # the builds

    def flaky(revin):
        calls[0] += 1
        if calls[0] == 3:                             # build 1: the check before training; 2: seed 0
            raise RuntimeError("boom on the second seed\nsecond line")
        return dlinear(revin)

    task = small_task()
    one_epoch = -(-len(task.train[1]) // FIT["batch_size"])                 # batches per epoch
    result = compare(task, {"flaky": Trainable(flaky), "early": Trainable(lambda revin: Exploding(revin, 0)),
                            "late": Trainable(lambda revin: Exploding(revin, one_epoch + 1)),
                            "fine": Trainable(dlinear)},
                     revin=True, seeds=3, progress=False, **FIT)
    flaky_entry = result["flaky"]
    assert flaky_entry.seeds == [0, 2] and len(flaky_entry.metrics) == 2
    assert flaky_entry.failures == [RunFailure(1, "RuntimeError", "boom on the second seed")]
    assert result.failure("flaky") == "1 of 3 runs failed: RuntimeError: boom on the second seed"
    assert len(result["early"].failures) == 3 and result["early"].metrics == []
    assert result["early"].failures[0].error == "FloatingPointError"
    assert "no epoch finished" in result["early"].failures[0].message
    assert [r.stop_reason for r in result["late"].records] == ["diverged"] * 3 and not result.failed("late")
    assert result["fine"].seeds == [0, 1, 2] and not result.failed("fine")
    assert result.outcome("fine", "flaky") == "failed" and result.outcome("early", RIDGE) == "failed"
    result.verdict("fine", "flaky")
    assert capsys.readouterr().out == ("fine vs flaky: no verdict, flaky failed (1 of 3 runs raised "
                                       "RuntimeError)\n")
    result.table()
    out = capsys.readouterr().out
    assert "failed: 1 of 3 runs raised RuntimeError" in out
    assert "flaky: 1 of 3 runs failed: RuntimeError: boom on the second seed" in out
    assert "diverged 3/3" in out and "second line" not in out


def test_a_nan_forecast_on_some_test_windows_fails_the_model():
    task = small_task()
    test = (task.test[0][:37], task.test[1][:37])
    result = compare(dataclasses.replace(task, test=test),
                     {"holes": Trainable(lambda revin: NaNOnTest(revin, 37, 3)), "fine": Trainable(dlinear)},
                     revin=True, seeds=2, progress=False, **FIT)
    assert result.failure("holes") == "NaN forecast on 3 of 37 test windows"
    assert result.outcome("holes", "fine") == "failed" and not result.beats("fine", "holes")
    assert {r["model"]: r["failure"] for r in result.rows()}["holes"] == result.failure("holes")


def stopping_at(build_number):
    """DLinear's build, pressing Stop (KeyboardInterrupt) at its ``build_number``-th call."""
    calls = [0]

    def build(revin):
        calls[0] += 1
        if calls[0] == build_number:
            raise KeyboardInterrupt
        return dlinear(revin)
    return build


def test_stop_ends_the_comparison_with_what_finished_and_the_baselines():
    # build 1: the check before training; 2 and 3: seeds 0 and 1; Stop at seed 2
    result = compare(small_task(), {"A": Trainable(stopping_at(4)), "B": Trainable(dlinear)}, revin=True,
                     seeds=3, progress=False, **FIT)
    assert result.interrupted and list(result.entries) == ["A", RIDGE, NAIVE]
    assert result["A"].seeds == [0, 1] and result["A"].failures == []
    first_run = compare(small_task(), {"A": Trainable(dlinear, seeds=1), "B": Trainable(stopping_at(2))},
                        revin=True, seeds=3, progress=False, **FIT)  # Stop in B's first run: no row for B
    assert first_run.interrupted and list(first_run.entries) == ["A", RIDGE, NAIVE]


def test_stop_inside_fit_keeps_the_run_and_ends_the_comparison(monkeypatch):
    real_fit, calls = protocol.fit, []

    def interrupted(model, train, val, **options):
        calls.append(1)
        history = real_fit(model, train, val, **{**options, "epochs": 1})
        history.stop_reason = "interrupted"
        return history

    monkeypatch.setattr(protocol, "fit", interrupted)
    result = compare(small_task(), {"A": Trainable(dlinear), "B": Trainable(dlinear)}, revin=True,
                     seeds=3, progress=False, **FIT)
    assert len(calls) == 1 and list(result.entries) == ["A", RIDGE, NAIVE] and result.interrupted
    assert result["A"].records[0].stop_reason == "interrupted" and result.budget_limited("A")


# --- what is checked before any training ---------------------------------------------------------------

def fit_calls(monkeypatch) -> list:
    """The calls of fit from the protocol, recorded and not run."""
    calls = []
    monkeypatch.setattr(protocol, "fit", lambda *args, **kwargs: calls.append(args))
    return calls


def test_a_forecast_of_the_wrong_shape_is_refused_before_any_training(monkeypatch):
    calls = fit_calls(monkeypatch)
    task = small_task()
    wrong_horizon = Trainable(lambda revin: LinearForecaster(lookback=LOOKBACK, horizon=24, revin=revin))
    with pytest.raises(ValueError, match=r"short forecasts shape \(2, 24, 1\) on two training windows, but "
                                         r"the task's targets are \(2, 12, 1\) \(N, horizon, channels\); "
                                         r"build it with horizon=12 and 1 channel"):
        compare(task, {"fine": Trainable(dlinear), "short": wrong_horizon}, revin=True, progress=False, **FIT)
    two_channels = Trainable(lambda revin: LinearForecaster(lookback=LOOKBACK, horizon=HORIZON, channels=2,
                                                            revin=revin))
    task2 = dataclasses.replace(task, train=(task.train[0].expand(-1, -1, 2), task.train[1]))
    with pytest.raises(ValueError, match=r"wide forecasts shape \(2, 12, 2\) on two training windows"):
        compare(task2, {"wide": two_channels}, revin=True, progress=False, **FIT)
    assert calls == []


def test_other_setups_are_refused_before_any_training(monkeypatch):
    calls = fit_calls(monkeypatch)
    task = small_task()
    ignores_revin = Trainable(lambda revin: LinearForecaster(lookback=LOOKBACK, horizon=HORIZON))
    with pytest.raises(ValueError, match=r"M was built with revin=False, but this comparison uses "
                                         r"revin=True .* lambda revin: Model\(\.\.\., revin=revin\)"):
        compare(task, {"M": ignores_revin}, revin=True, progress=False, **FIT)
    with pytest.raises(TypeError, match=r"M: build\(revin=\.\.\.\) must return an nn.Module, got str"):
        compare(task, {"M": Trainable(lambda revin: "model")}, revin=True, progress=False, **FIT)

    class Frozen(torch.nn.Module):
        revin = True

        def forward(self, x):
            return x[:, -HORIZON:]

    with pytest.raises(ValueError, match=r"F has no trainable parameters"):
        compare(task, {"F": Trainable(lambda revin: Frozen())}, revin=True, progress=False, **FIT)
    with pytest.raises(ZeroDivisionError) as err:
        compare(task, {"Z": Trainable(lambda revin: 1 / 0)}, revin=True, progress=False, **FIT)
    assert "Z: build(revin=True) raised this while the models were checked, before any training" in str(
        err.value.__notes__)
    with pytest.raises(ValueError, match=r"patience must be an int >= 1"):
        compare(task, {"A": Trainable(dlinear)}, revin=True, progress=False, epochs=2, patience=0)
    with pytest.raises(ValueError, match=r"A: schedule\(2\) returned 0.0"):
        compare(task, {"A": Trainable(dlinear, schedule=lambda e: 1.0 if e < 2 else 0.0)}, revin=True,
                progress=False, epochs=4)
    holed = task.test[1].clone()
    holed[4, 2, 0] = math.nan
    bad_test = dataclasses.replace(task, test=(task.test[0], holed))
    with pytest.raises(ValueError, match=r"test targets hold NaN or inf values in 1 window\(s\), first in "
                                         r"window 4"):
        compare(bad_test, {"A": Trainable(dlinear)}, revin=True, progress=False, **FIT)
    two = {part: (getattr(task, part)[0], getattr(task, part)[1].expand(-1, -1, 2))
           for part in ("train", "val", "test")}                           # targets of two channels
    with pytest.raises(ValueError, match=r"task.scaler cannot map the targets' 2 channel\(s\) back to MW "
                                         r"\(channels must be a list of indices.*or pass unit=None"):
        compare(dataclasses.replace(task, **two), {"A": Trainable(dlinear)}, revin=True, progress=False)
    assert calls == []


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(revin="yes"), TypeError, r"revin must be a bool \(True or False\), got str 'yes'"),
    (dict(models={"M": dlinear}), TypeError, r"models must be a dict of name -> Trainable"),
    (dict(models={RIDGE: Trainable(dlinear)}), ValueError, r"names \['ridge \(closed form\)'\] are taken"),
    (dict(models={3: Trainable(dlinear)}), TypeError, r"each name a non-empty str"),
    (dict(naive_period=336), ValueError, r"needs 336 steps of history, but the windows hold 192.*"
                                         r"naive_period=None"),
    (dict(naive_period=0), ValueError, r"naive_period must be None or an int >= 1 .*got 0"),
    (dict(naive_period=-24), ValueError, r"naive_period must be None or an int >= 1 .*got -24"),
    (dict(naive_period=24.0), TypeError, r"naive_period must be None or an int >= 1 .*got the float 24.0; "
                                          r"pass naive_period=24"),
    (dict(naive_period=True), TypeError, r"naive_period must be None or an int >= 1 .*a bool"),
    (dict(seeds=0), ValueError, r"seeds must be a count >= 1 or a list of distinct ints >= 0, got 0"),
    (dict(seeds=True), TypeError, r"seeds must be a count >= 1 .*got True"),
    (dict(seeds=2.0), TypeError, r"seeds must be a count >= 1 .*got 2.0; pass seeds=2"),
    (dict(seeds=[1, 1]), ValueError, r"seeds must be .* distinct ints >= 0, got \[1, 1\]"),
    (dict(seeds=[0, -1]), ValueError, r"seeds must be .* distinct ints >= 0, got \[0, -1\]"),
    (dict(seeds=[0, 2 ** 32]), ValueError, r"seeds .* below 2\*\*32"),
    (dict(seeds=[]), ValueError, r"seeds must be .*got \[\]"),
    (dict(seeds=[0, True]), TypeError, r"seeds must be .*got \[0, True\]"),
    (dict(unit=3), TypeError, r"unit must be None or a str such as 'MW', got int"),
    (dict(progress="no"), TypeError, r"progress must be a bool \(True or False\), got str 'no'"),
    (dict(seed=3), TypeError, r"compare seeds every run itself: pass seeds=\.\.\. \(a count or a list\), "
                              r"not seed"),
    (dict(lrr=0.1), TypeError, r"fit takes no option 'lrr'"),
    (dict(lr=-0.1), ValueError, r"lr must be a positive finite number"),
])
def test_bad_arguments_of_compare_are_refused_saying_what_to_do(kwargs, error, message):
    task = small_task()
    models = kwargs.pop("models", {})
    with pytest.raises(error, match=message):
        compare(task, models, **{"revin": True, **kwargs})


@pytest.mark.parametrize("change, error, message", [
    (lambda t: (t.train, t.val), TypeError, r"task must be a labsupport.data.ForecastTask .*got tuple"),
    (lambda t: dataclasses.replace(t, eval_stride=0), ValueError, r"task.eval_stride must be an int >= 1"),
    (lambda t: dataclasses.replace(t, horizon=24), ValueError, r"task.horizon 24 != the targets' 12"),
    (lambda t: dataclasses.replace(t, test=(t.test[0][:2], t.test[1][:2])), ValueError,
     r"2 test windows: the paired test needs more than overlap = 2"),
    (lambda t: dataclasses.replace(t, val=(t.val[0], t.val[1][:, :6])), ValueError,
     r"val targets are \(N, 6, 1\) but train targets \(N, 12, 1\)"),
])
def test_a_task_that_does_not_fit_the_protocol_is_refused(change, error, message):
    with pytest.raises(error, match=message):
        compare(change(small_task()), {}, revin=True)


@pytest.mark.parametrize("make, error, message", [
    (lambda: Trainable(3), TypeError, r"build must be a callable build\(revin=bool\) -> nn.Module, got int"),
    (lambda: Trainable(dlinear, seeds=[1, 1]), ValueError, r"seeds must be .* distinct ints >= 0, "
                                                           r"got \[1, 1\]"),
    (lambda: Trainable(dlinear, seeds=0), ValueError, r"seeds must be a count >= 1"),
    (lambda: Trainable(dlinear, clip=0), ValueError, r"clip must be None or a positive finite number"),
    (lambda: Trainable(dlinear, epochs=2.0), TypeError, r"epochs must be an int >= 1 .*pass epochs=2"),
    (lambda: Trainable(dlinear, max_seconds=math.nan), ValueError, r"max_seconds must be None or a positive"),
    (lambda: Trainable(dlinear, device="cpu"), TypeError, r"compare sets device for every model: pass "
                                                         r"device=\.\.\. to compare"),
    (lambda: Trainable(dlinear, lr_=1.0), TypeError, r"fit takes no option 'lr_'"),
])
def test_bad_trainables_are_refused_when_made(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_warmup_cosine_rises_then_falls_to_the_floor():
    m = [warmup_cosine(10, warmup=2, floor=0.1)(e) for e in range(12)]
    assert m[:2] == pytest.approx([1 / 3, 2 / 3]) and m[2] == pytest.approx(1.0)
    assert m[9] == pytest.approx(0.1) and m[11] == pytest.approx(0.1)     # stays at the floor
    assert all(a >= b for a, b in zip(m[2:], m[3:]))
    assert warmup_cosine(1, warmup=0)(0) == pytest.approx(1.0)


@pytest.mark.parametrize("epochs", range(2, 13))
def test_warmup_cosine_ends_at_the_floor_for_every_budget_and_warmup(epochs):
    """The last epoch runs at the floor whatever the length: warmup_cosine(2) (one warm-up
    epoch, then one more) once gave [0.5, 1.0], its last epoch at the full rate; the warm-up
    rises, the cosine never rises nor goes below the floor."""
    for warmup in range(epochs):
        m = [warmup_cosine(epochs, warmup=warmup, floor=0.1)(e) for e in range(epochs)]
        assert m[-1] == pytest.approx(0.1), (epochs, warmup, m)
        assert m[:warmup] == pytest.approx([(e + 1) / (warmup + 1) for e in range(warmup)])
        assert all(a >= b for a, b in zip(m[warmup:], m[warmup + 1:])) and min(m[warmup:]) >= 0.1 - 1e-12
        if epochs - warmup >= 2:
            assert m[warmup] == pytest.approx(1.0)              # the cosine starts at the full rate
    assert warmup_cosine(2)(0) == 0.5 and warmup_cosine(2)(1) == pytest.approx(0.05)


@pytest.mark.parametrize("args, kwargs, error, message", [
    ((3,), dict(warmup=3), ValueError, r"warmup must be below epochs \(warm-up epochs, then the cosine\), "
                                       r"got warmup 3, epochs 3"),
    ((0,), {}, ValueError, r"epochs must be an int >= 1 .*got 0"),
    ((True,), {}, TypeError, r"epochs must be an int >= 1 .*a bool"),
    ((4.0,), {}, TypeError, r"epochs must be an int >= 1 .*pass epochs=4"),
    ((4,), dict(warmup=-1), ValueError, r"warmup must be an int >= 0 .*got -1"),
    ((4,), dict(warmup=1.0), TypeError, r"warmup must be an int >= 0 .*pass warmup=1"),
    ((4,), dict(warmup=True), TypeError, r"warmup must be an int >= 0 .*a bool"),
    ((4,), dict(floor=0.0), ValueError, r"floor must be a number in \(0, 1\] .*got 0.0; 0 would make the "
                                        r"last epoch's learning rate 0, which fit refuses"),
    ((4,), dict(floor=-0.1), ValueError, r"floor must be a number in \(0, 1\]"),
    ((4,), dict(floor=1.5), ValueError, r"floor must be a number in \(0, 1\]"),
    ((4,), dict(floor=math.nan), ValueError, r"floor must be a number in \(0, 1\] .*got nan"),
    ((4,), dict(floor=True), TypeError, r"floor must be a number in \(0, 1\] .*got True"),
])
def test_warmup_cosine_refuses_bad_settings(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        warmup_cosine(*args, **kwargs)


def test_the_book_tasks_overlap_comes_from_its_stride():
    task = small_task()
    assert np.ceil(task.horizon / task.eval_stride) == 2
    result = compare(dataclasses.replace(task, eval_stride=12), {}, revin=False)
    assert result.overlap == 1


# --- rescore: the trained runs on other test windows -----------------------------------------------

class Tail(torch.nn.Module):
    """A DLinear that reads the last LOOKBACK steps of a window of any length."""

    def __init__(self, revin):
        super().__init__()
        self.inner = dlinear(revin)
        self.revin = self.inner.revin

    def forward(self, x):                                        # x (B, L >= LOOKBACK, 1)
        return self.inner(x[:, -LOOKBACK:])


def longer_task(factor=2):
    """small_task's series cut into windows of factor x LOOKBACK, the same horizon."""
    task = small_task()
    g = torch.Generator().manual_seed(3)
    t = torch.arange(1400, dtype=torch.float32)
    series = (torch.sin(2 * torch.pi * t / 24) + 0.5 * torch.sin(2 * torch.pi * t / 168)
              + 0.2 * torch.randn(t.shape, generator=g))
    windows = series.unfold(0, factor * LOOKBACK + HORIZON, STRIDE)[:, :, None]
    x, y = windows[:, :factor * LOOKBACK], windows[:, factor * LOOKBACK:]
    n = len(x)
    parts = [(x[a:b], y[a:b]) for a, b in ((0, n - 80), (n - 80, n - 40), (n - 40, n))]
    return ForecastTask(*parts, task.scaler, ("value",), factor * LOOKBACK, HORIZON, eval_stride=STRIDE,
                        unit="MW")


def test_rescore_scores_every_run_on_the_new_windows_and_refits_the_baselines():
    trained = compare(small_task(), {"tail": Trainable(Tail), "DLinear": Trainable(dlinear)},
                      revin=True, seeds=2, progress=False, **FIT)
    long = longer_task()
    again = protocol.rescore(trained, long)
    tail = again["tail"]
    assert [m.mse for m in tail.metrics] == pytest.approx(
        [evaluate(m, long.test).mse for m in trained["tail"].models], rel=1e-6)
    assert tail.records == trained["tail"].records and tail.seeds == trained["tail"].seeds
    assert all(len(w["mse"]) == len(long.test[1]) for w in tail.window_losses)
    assert again.failed("DLinear") and "ValueError" in again.failure("DLinear")   # 384 steps: cannot read
    assert "no verdict, DLinear failed" in again.verdict_text("tail", "DLinear")
    ridge = again[RIDGE].models[0].forecast
    assert ridge.lookback == 2 * LOOKBACK and again.windows["test"] == len(long.test[1])
    assert again.outcome("tail", NAIVE) in ("a", "b", "within", "unsettled")
    assert again.mean(NAIVE) == pytest.approx(evaluate(
        lambda x: seasonal_naive(x, 168, HORIZON), long.test).mse, rel=1e-6)
    assert trained.failure("DLinear") is None and trained.windows["test"] == 40   # the original as it was
    # the same targets as small_task's test windows, and the tail reads the same 192 steps
    assert [m.mse for m in tail.metrics] == pytest.approx([m.mse for m in trained["tail"].metrics])
    with pytest.raises(TypeError, match=r"comparison must be what compare\(...\) returned, got str"):
        protocol.rescore("a table", long)
