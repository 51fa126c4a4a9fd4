import matplotlib
import pytest
import torch

import labsupport.compare as compare_module
from labsupport.compare import (
    NAIVE,
    RIDGE,
    Comparison,
    Entry,
    Trainable,
    TrainingRecord,
    compare,
    training_record,
    warmup_cosine,
)
from labsupport.data import ForecastTask, Standardizer
from labsupport.models import GRUForecaster, LinearForecaster, RidgeForecaster, seasonal_naive
from labsupport.train import History, Metrics, evaluate

matplotlib.use("Agg")
LOOKBACK, HORIZON = 192, 12


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def small_task():
    """Windows of a noisy daily-and-weekly pattern, cut like book_task's (192 h in, 12 out)."""
    g = torch.Generator().manual_seed(3)
    t = torch.arange(1400, dtype=torch.float32)
    series = (torch.sin(2 * torch.pi * t / 24) + 0.5 * torch.sin(2 * torch.pi * t / 168)
              + 0.2 * torch.randn(t.shape, generator=g))
    windows = series.unfold(0, LOOKBACK + HORIZON, 6)[:, :, None]       # (N, L + T, 1)
    x, y = windows[:, :LOOKBACK], windows[:, LOOKBACK:]
    parts = [(x[a:b], y[a:b]) for a, b in ((0, 120), (120, 160), (160, 200))]
    scaler = Standardizer().fit(series[:, None].numpy())
    return ForecastTask(*parts, scaler, ("value",), LOOKBACK, HORIZON)


def dlinear(revin):
    return LinearForecaster(lookback=LOOKBACK, horizon=HORIZON, revin=revin)


def tiny_gru(revin):
    return GRUForecaster(lookback=LOOKBACK, horizon=HORIZON, hidden=4, revin=revin)


FIT = dict(epochs=3, patience=2, batch_size=32, lr=1e-2)


@pytest.fixture(scope="module")
def result():
    return compare(small_task(), {"DLinear": Trainable(dlinear), "GRU": Trainable(tiny_gru, seeds=1)},
                   revin=True, seeds=2, progress=False, **FIT)


# --- reading fit's history ------------------------------------------------------------------

def history(val_loss, best_epoch, stopped_early=False, **extra):
    """A History as a hand or an older `fit` would leave it: no stop_reason, no total."""
    h = History(train_loss=list(val_loss), val_loss=list(val_loss),
                epoch_seconds=[1.0] * len(val_loss), best_epoch=best_epoch, stopped_early=stopped_early)
    for key, value in extra.items():
        setattr(h, key, value)
    return h


def test_stop_reason_from_a_history_without_one():
    converged = history([3, 2, 2.5, 2.6], best_epoch=1, stopped_early=True)
    assert training_record(converged, epochs=10, patience=2).stop_reason == "converged"
    out_of_time = history([3, 2, 2.5], best_epoch=1, stopped_early=True)
    assert training_record(out_of_time, epochs=10, patience=2).stop_reason == "time"
    still_improving = history([3, 2, 1], best_epoch=2)
    record = training_record(still_improving, epochs=3, patience=2, wall_seconds=7.5)
    assert (record.stop_reason, record.converged, record.best_epoch) == ("epochs", False, 3)
    assert record.total_seconds == 7.5 and record.epochs_run == 3 and record.best_val_loss == 1
    assert training_record(still_improving, epochs=3, patience=2).total_seconds == 3.0


def test_stop_reason_and_total_from_a_history_that_has_them():
    h = history([3, 2], best_epoch=1, stop_reason="time", total_seconds=42.0)
    record = training_record(h, epochs=10, patience=1)       # the history's word wins
    assert (record.stop_reason, record.total_seconds) == ("time", 42.0)
    diverged = training_record(history([3, 2], 1, stop_reason="diverged"), epochs=5, patience=3)
    assert diverged.stop_reason == "diverged" and not diverged.converged
    with pytest.raises(ValueError, match=r"stop_reason must be one of .*'converged'.*got 'bored'"):
        training_record(history([1], 0, stop_reason="bored"), epochs=1, patience=1)
    with pytest.raises(ValueError, match="history holds no epoch"):
        training_record(history([], -1), epochs=1, patience=1)


# --- the verdict rule -----------------------------------------------------------------------

def entry(name, values, trained=True):
    return Entry(name, trained, 0, metrics=[Metrics(mse=v, mae=v) for v in values])


def table_of(*entries):
    return Comparison({e.name: e for e in entries}, True, dict(train=1, val=1, test=1))


def test_a_gap_larger_than_the_spread_is_a_win_and_a_smaller_one_is_not():
    t = table_of(entry("A", [0.10, 0.12]), entry("B", [0.20, 0.23]), entry("C", [0.12, 0.16]),
                 entry(RIDGE, [0.125], trained=False))
    assert t.outcome("A", "B") == "a" and t.outcome("B", "A") == "b"
    assert t.beats("A", "B") and not t.beats("B", "A")
    # A 0.11 +- range 0.02, C 0.14 +- range 0.04: gap 0.03 <= 0.04
    assert t.outcome("A", "C") == "within" and not t.beats("A", "C")
    # the baseline has no spread, so A's own range decides: gap 0.015 <= 0.02
    assert t.spread(RIDGE) == (0.0, False)
    assert t.outcome("A", RIDGE) == "within"
    assert t.outcome(RIDGE, "B") == "a"


def test_a_single_run_borrows_the_widest_spread_and_none_gives_no_verdict():
    t = table_of(entry("A", [0.10, 0.12]), entry("B", [0.20, 0.26]), entry("one", [0.15]))
    assert t.spread("one") == (pytest.approx(0.06), True)
    assert t.outcome("one", "A") == "within"          # gap 0.04 <= borrowed 0.06
    lonely = table_of(entry("one", [0.15]), entry(RIDGE, [0.30], trained=False))
    assert lonely.spread("one") == (None, True)
    assert lonely.outcome("one", RIDGE) == "unknown"


def test_verdict_prints_the_outcome_without_numbers(capsys):
    t = table_of(entry("A", [0.10, 0.12]), entry("B", [0.20, 0.23]), entry("C", [0.12, 0.16]),
                 entry(RIDGE, [0.3], trained=False), entry(NAIVE, [0.5], trained=False))
    assert t.verdict("B", "A") == "b"
    assert t.verdict("A", "C") == "within"
    t.verdicts()
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["A beats B (test MSE)", "A and C are within the seed spread (test MSE)"]
    assert "A beats ridge (closed form) (test MSE)" in out and len(out) == 2 + 3 * 2
    assert not any(ch.isdigit() for line in out for ch in line)


def test_rule_refuses_bad_questions():
    t = table_of(entry("A", [0.1, 0.2]), entry("B", [0.3, 0.4]))
    with pytest.raises(ValueError, match="compare two different models, got 'A' twice"):
        t.outcome("A", "A")
    with pytest.raises(KeyError, match=r"no model 'Z' in this comparison; it has \['A', 'B'\]"):
        t.outcome("A", "Z")
    with pytest.raises(ValueError, match=r"metric must be one of \['mae', 'mae_orig', 'mse'\], got 'rmse'"):
        t.outcome("A", "B", metric="rmse")


# --- the protocol end to end ------------------------------------------------------------------

def test_every_model_on_the_same_windows_with_its_seeds_and_two_baselines(result):
    task = small_task()
    assert list(result.entries) == ["DLinear", "GRU", RIDGE, NAIVE]
    assert result["DLinear"].seeds == [0, 1] and result["GRU"].seeds == [0]
    assert result.windows == dict(train=120, val=40, test=40)
    assert result["DLinear"].params == sum(p.numel() for p in dlinear(True).parameters())
    assert result[RIDGE].params == LOOKBACK * HORIZON + HORIZON and result[NAIVE].params == 0
    naive = evaluate(lambda x: seasonal_naive(x, 168, HORIZON), task.test)
    assert result.mean(NAIVE) == pytest.approx(naive.mse, rel=1e-6)
    ridge = RidgeForecaster(lookback=LOOKBACK, horizon=HORIZON, revin=True).fit(task.train, task.val)
    assert result.mean(RIDGE) == pytest.approx(evaluate(ridge, task.test).mse, rel=1e-6)
    for name in ("DLinear", "GRU"):
        for model, metrics in zip(result[name].models, result[name].metrics):
            assert model.revin is not None
            assert metrics.mse == pytest.approx(evaluate(model, task.test).mse, rel=1e-6)
            assert metrics.mae_orig is not None


def test_runs_are_reproducible_and_seeds_differ(result):
    again = compare(small_task(), {"DLinear": Trainable(dlinear)}, revin=True, seeds=2,
                    progress=False, **FIT)
    assert again["DLinear"].values() == result["DLinear"].values()
    first, second = result["DLinear"].values()
    assert first != second


def test_a_schedule_reaches_fit_and_none_is_not_passed(monkeypatch):
    seen = []
    real_fit = compare_module.fit

    def spy(model, train, val, **options):
        seen.append(options.get("schedule", "absent"))
        options.pop("schedule", None)
        return real_fit(model, train, val, **options)

    monkeypatch.setattr(compare_module, "fit", spy)
    halve = lambda epoch: 0.5 ** epoch          # noqa: E731
    compare(small_task(), {"A": Trainable(dlinear, seeds=1), "B": Trainable(dlinear, seeds=1, schedule=None)},
            revin=True, progress=False, schedule=halve, **FIT)
    assert seen == [halve, "absent"]
    monkeypatch.setattr(compare_module, "fit", lambda model, train, val, *, epochs, patience, batch_size,
                        lr, seed, progress, device: real_fit(model, train, val))
    with pytest.raises(TypeError, match="A: schedule given, but this labsupport.train.fit takes none"):
        compare(small_task(), {"A": Trainable(dlinear, seeds=1)}, revin=True, schedule=halve, **FIT)


def test_the_callers_random_state_and_data_are_left_alone():
    task = small_task()
    before = [t.clone() for t in (*task.train, *task.test)]
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    compare(task, {"DLinear": Trainable(dlinear, seeds=1)}, revin=False, progress=False, **FIT)
    assert torch.equal(torch.rand(3), expected)
    assert all(torch.equal(a, b) for a, b in zip(before, (*task.train, *task.test)))


def test_a_budget_that_ends_training_is_marked(capsys):
    result = compare(small_task(), {"GRU": Trainable(tiny_gru, seeds=[5])}, revin=False,
                     progress=False, epochs=1, patience=3, lr=1e-2)
    assert result["GRU"].records[0].stop_reason == "epochs"
    result.table()
    out = capsys.readouterr().out
    assert "epoch budget" in out and "converged" not in out
    assert "no instance normalisation for any model (revin=False)" in out
    unitless = compare(small_task(), {}, revin=False, unit=None)
    assert unitless[RIDGE].metrics[0].mae_orig is None
    unitless.table()
    out = capsys.readouterr().out
    assert "MAE (" not in out and "MAE" in out


def test_table_prints_the_setup_and_one_row_per_model(result, capsys):
    result.table()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "windows: train 120, validation 40, test 40, the same for every model"
    assert "RevIN) on for every trained model and the ridge" in lines[1]
    header, rows = lines[2], lines[3:7]
    for column in ("params", "runs", "test MSE: mean (min-max)", "MAE (MW)", "s/epoch", "train s", "stopped"):
        assert column in header
    assert [r.split()[0] for r in rows] == ["DLinear", "GRU", "ridge", "seasonal"]
    low, high = sorted(result["DLinear"].values())
    assert f"({low:.3f}-{high:.3f})" in rows[0] and "1 run" in rows[1]
    assert "closed form" in rows[2]
    assert "single-run models (GRU) borrow the widest spread measured here" in lines[-1]


def test_rows_carry_the_numbers_of_the_table(result):
    rows = {r["model"]: r for r in result.rows()}
    d = rows["DLinear"]
    assert d["runs"] == 2 and d["mean"] == pytest.approx(result.mean("DLinear"))
    assert d["spread"] == pytest.approx(d["max"] - d["min"]) and not d["spread_borrowed"]
    assert all(1 <= b <= e <= FIT["epochs"] for b, e in zip(d["best_epochs"], d["epochs"]))
    assert rows[RIDGE]["stopped"] == "closed form" and rows[RIDGE]["spread"] == 0.0


def test_glue_gives_each_name_its_mean(result, monkeypatch):
    glued = []
    monkeypatch.setattr("myst_nb.glue",
                        lambda name, value, display=True: glued.append((name, value, display)))
    values = result.glue({"DLinear": "lab_mse_dlinear", RIDGE: "lab_mse_ridge"})
    assert glued == [("lab_mse_dlinear", result.mean("DLinear"), False),
                     ("lab_mse_ridge", result.mean(RIDGE), False)]
    assert values == {"lab_mse_dlinear": result.mean("DLinear"), "lab_mse_ridge": result.mean(RIDGE)}
    assert all(type(v) is float for v in values.values())


def test_plot_shows_seeds_as_dots_and_baselines_as_lines(result):
    ax = result.plot()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["DLinear", "GRU"]
    dots = [line for line in ax.lines if line.get_marker() == "o"]
    assert sorted(x for line in dots for x in line.get_xdata()) == sorted(
        result["DLinear"].values() + result["GRU"].values())
    vertical = [line for line in ax.lines if line.get_label() in (RIDGE, NAIVE)]
    assert [line.get_xdata()[0] for line in vertical] == [result.mean(RIDGE), result.mean(NAIVE)]


def test_bad_setups_are_refused_saying_what_to_do():
    task = small_task()
    ignores_revin = Trainable(lambda revin: LinearForecaster(lookback=LOOKBACK, horizon=HORIZON))
    with pytest.raises(ValueError, match=r"M was built with revin=False, but this comparison uses "
                                         r"revin=True .* lambda revin: Model\(\.\.\., revin=revin\)"):
        compare(task, {"M": ignores_revin}, revin=True, progress=False, **FIT)
    with pytest.raises(TypeError, match=r"revin must be True or False .*got 'yes'"):
        compare(task, {}, revin="yes")
    with pytest.raises(TypeError, match=r"models must be a dict of name -> Trainable"):
        compare(task, {"M": dlinear}, revin=True)
    with pytest.raises(ValueError, match=r"names \['ridge \(closed form\)'\] are taken by the baselines"):
        compare(task, {RIDGE: Trainable(dlinear)}, revin=True)
    with pytest.raises(ValueError, match=r"needs 336 steps of history, but the windows hold 192.*"
                                         r"naive_period=None"):
        compare(task, {}, revin=True, naive_period=336)
    with pytest.raises(TypeError, match=r"task must be a labsupport.data.ForecastTask .*got tuple"):
        compare((task.train, task.val), {}, revin=True)
    with pytest.raises(ValueError,
                       match=r"seeds must be a count >= 1 or a list of distinct ints, got \[1, 1\]"):
        Trainable(dlinear, seeds=[1, 1])
    with pytest.raises(ValueError, match=r"seeds must be a count >= 1 or a list of ints, got 0"):
        compare(task, {}, revin=True, seeds=0)
    with pytest.raises(TypeError,
                       match=r"build must be a callable build\(revin=bool\) -> nn.Module, got int"):
        Trainable(3)
    with pytest.raises(TypeError, match=r"M: build\(revin=\.\.\.\) must return an nn.Module, got str"):
        compare(task, {"M": Trainable(lambda revin: "model")}, revin=True, progress=False, **FIT)


def test_calendar_inputs_reach_the_models_and_the_baselines_read_the_window():
    task = small_task()
    with_time = [((x, torch.zeros(len(x), LOOKBACK + HORIZON, 2)), y)
                 for x, y in (task.train, task.val, task.test)]
    calendar = ForecastTask(*with_time, task.scaler, task.columns, LOOKBACK, HORIZON)

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


def test_record_is_frozen():
    record = TrainingRecord("converged", 3, 1, 0.5, 1.0, 3.0)
    with pytest.raises(AttributeError):
        record.best_epoch = 2


def test_a_window_shorter_than_the_period_can_leave_the_naive_out():
    result = compare(small_task(), {}, revin=False, naive_period=None)
    assert list(result.entries) == [RIDGE]
    daily = compare(small_task(), {}, revin=False, naive_period=24)
    naive = evaluate(lambda x: seasonal_naive(x, 24, HORIZON), small_task().test)
    assert daily.mean("seasonal naive (24 steps)") == pytest.approx(naive.mse, rel=1e-6)


def test_warmup_cosine_rises_then_falls_to_the_floor():
    m = [warmup_cosine(10, warmup=2, floor=0.1)(e) for e in range(12)]
    assert m[:2] == pytest.approx([1 / 3, 2 / 3]) and m[2] == pytest.approx(1.0)
    assert m[9] == pytest.approx(0.1) and m[11] == pytest.approx(0.1)     # stays at the floor
    assert all(a >= b for a, b in zip(m[2:], m[3:]))
    assert warmup_cosine(1, warmup=0)(0) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="need warmup < epochs and 0 <= floor <= 1, got warmup 3, epochs 3"):
        warmup_cosine(3, warmup=3)
    with pytest.raises(ValueError, match="epochs must be a positive int, got 0"):
        warmup_cosine(0)


class Exploding(torch.nn.Module):
    """Forecasts zero until its ``after``-th training call, then NaN (a diverging model)."""

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


def test_a_diverged_run_is_marked_and_one_without_an_epoch_is_an_error(capsys):
    task = small_task()
    one_epoch = -(-len(task.train[1]) // FIT["batch_size"])                 # batches per epoch
    late = compare(task, {"E": Trainable(lambda revin: Exploding(revin, one_epoch + 1), seeds=1)},
                   revin=True, progress=False, **FIT)
    assert late["E"].records[0].stop_reason == "diverged" and len(late["E"].metrics) == 1
    late.table()
    assert "diverged" in capsys.readouterr().out
    with pytest.raises(FloatingPointError, match=r"E, seed 0: .*no epoch finished"):
        compare(task, {"E": Trainable(lambda revin: Exploding(revin, 0), seeds=1)}, revin=True,
                progress=False, **FIT)


def test_an_interrupted_run_ends_the_comparison_with_what_it_has(monkeypatch):
    real_fit, calls = compare_module.fit, []

    def interrupted(model, train, val, **options):
        calls.append(1)
        history = real_fit(model, train, val, **{**options, "epochs": 1})
        history.stop_reason = "interrupted"
        return history

    monkeypatch.setattr(compare_module, "fit", interrupted)
    result = compare(small_task(), {"A": Trainable(dlinear), "B": Trainable(dlinear)}, revin=True,
                     seeds=3, progress=False, **FIT)
    assert len(calls) == 1 and list(result.entries) == ["A", RIDGE, NAIVE]
    assert result["A"].records[0].stop_reason == "interrupted"
