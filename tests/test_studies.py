"""The sections' experiment code (labsupport.studies): what 12.3 and 12.4 rely on, checked on
small inputs against what it must compute."""
import math

import matplotlib
import pytest
import torch

from labsupport.compare import RIDGE, Comparison, Entry, TrainingRecord
from labsupport.compare.tables import legend, mean_range, verdict_table
from labsupport.data import LOOKBACK, book_task, load_vic_elec
from labsupport.memory import CompressiveMemory
from labsupport.positional import relative_position_bucket
from labsupport.sections.long_sequences import study as mem
from labsupport.sections.positional_encodings import study as pos
from labsupport.train import Metrics

matplotlib.use("Agg")


# --- 12.3 ----------------------------------------------------------------------------------

def test_the_control_ignores_the_order_of_the_days_and_every_other_variant_does_not():
    torch.manual_seed(0)
    x = torch.randn(2, LOOKBACK, 1)
    days = x.view(2, 14, 24, 1)
    shuffled = days[:, torch.randperm(14)].reshape(2, LOOKBACK, 1)
    for name in pos.ENCODINGS:
        torch.manual_seed(1)
        model = pos.forecaster(name, revin=True, width=16).eval()
        with torch.no_grad():
            same = torch.allclose(model(shuffled), model(x), atol=1e-5)
        assert same == (name == pos.CONTROL), name
    assert pos.forecaster("T5 buckets", revin=False, width=16).n_patches == 14
    with pytest.raises(ValueError, match="name must be one of"):
        pos.forecaster("rotary", revin=True, width=16)


def test_counting_back_changes_only_the_absolute_encodings():
    torch.manual_seed(0)
    x = torch.randn(3, 4 * LOOKBACK, 1)                               # 56 tokens, trained on 14
    for name, changes in (("sinusoidal", True), ("RoPE", False), ("ALiBi", False), ("T5 buckets", False),
                          ("causal mask only", False)):
        model = pos.forecaster(name, revin=True, width=16).eval()
        with torch.no_grad():
            same = torch.allclose(model(x), pos.CountedBack(model)(x), atol=1e-5)
        assert same != changes, name
        at_length = torch.randn(2, LOOKBACK, 1)                       # the training length: no change
        with torch.no_grad():
            torch.testing.assert_close(model(at_length), pos.CountedBack(model)(at_length))


def test_counted_back_renames_and_wraps_the_runs():
    models = [pos.forecaster("sinusoidal", revin=True, width=8) for _ in range(2)]
    e = Entry("sinusoidal", True, 10, metrics=[Metrics(0.1, 0.2)] * 2, models=models, seeds=[0, 1])
    result = Comparison({"sinusoidal": e, "other": Entry("other", True, 1)}, True,
                        dict(train=1, val=1, test=1), overlap=1)
    back = pos.counted_back(result, ["sinusoidal"])
    assert list(back.entries) == ["sinusoidal, counted back"]
    assert all(isinstance(m, pos.CountedBack) and m.model is o
               for m, o in zip(back["sinusoidal, counted back"].models, models))


def test_the_buckets_only_a_longer_window_reads():
    assert pos.untrained_buckets(14, 56) == list(range(14, 26))
    assert pos.untrained_buckets(27, 111) == list(range(20, 31))
    read = set(relative_position_bucket(torch.arange(56)).tolist())
    assert set(pos.untrained_buckets(14, 56)) == read - set(range(14))


def test_the_holidays_of_the_test_half_year():
    flagged, holiday = pos.holiday_days(book_task(train_stride=64, calendar=True))
    assert flagged[flagged > 0].tolist() == [1, 23, 1, 24, 23]
    days = [str(pos.first_test_day() + int(d)) for d in torch.nonzero(holiday).flatten()]
    assert days == ["2014-11-04", "2014-12-25", "2014-12-26"]


def test_irregular_windows_read_the_last_readings_before_each_forecast():
    task, info = pos.irregular_task(missing=0.3, seed=0, train_stride=48)
    (x, time, positions), y = task.test
    assert time is None and x.shape[1:] == (LOOKBACK, 1) and y.shape[1:] == (24, 1)
    assert positions.shape == (len(x), 14) and bool((positions <= 13).all())
    assert bool((positions.diff(dim=1) > 0).all())                   # later patches, later times
    assert 0.69 < info.kept < 0.71 and 18 < info.span_days < 22     # 30% missing: about 20 days
    complete = torch.arange(-LOOKBACK, 0, dtype=torch.float32)[None]  # every hour kept
    torch.testing.assert_close(pos.token_times(complete), torch.arange(14.0)[None])
    naive = pos.weekly_naive_entry("weekly naive", info)
    assert not naive.trained and math.isfinite(naive.mean()) and len(naive.window_loss()) == len(x)


def test_the_figures_draw():
    for fig in (pos.rope_figure(), pos.alibi_figure(), pos.t5_figure(), mem.segment_figure()):
        assert len(fig.axes) >= 1
        matplotlib.pyplot.close(fig)


# --- tables ---------------------------------------------------------------------------------

def _entry(name, values, trained=True):
    losses = [{"mse": torch.full((30,), v, dtype=torch.float64) + 0.01 * torch.randn(30, dtype=torch.float64),
               "mae": torch.full((30,), v, dtype=torch.float64)} for v in values]
    return Entry(name, trained, 5, metrics=[Metrics(v, v) for v in values], window_losses=losses,
                 records=[TrainingRecord("converged", 3, 2, 0.1, 1.0, 3.0)] * len(values) if trained else [])


def test_a_verdict_table_has_one_column_per_reference(capsys):
    torch.manual_seed(0)
    result = Comparison({"A": _entry("A", [0.10, 0.11]), "B": _entry("B", [0.30, 0.31]),
                         RIDGE: _entry(RIDGE, [0.2], trained=False)}, True,
                        dict(train=5, val=2, test=30), overlap=1, steps=(336, 24))
    verdict_table(result, ["B", RIDGE])
    out = capsys.readouterr().out
    assert "vs B" in out and f"vs {RIDGE}" in out and "reference" in out
    assert "better: beyond the seed spread" in out and "better: every seed" in out
    assert "windows of 336 steps in, 24 out" in out and "protocol.md" in out
    assert "mean (min-max) over seeds" not in legend(result, seeds=False)
    assert mean_range([]) == "-" and mean_range([0.25]) == "0.250"


# --- 12.4 ----------------------------------------------------------------------------------

@pytest.mark.parametrize("layers", [1, 2, 3])
def test_the_reach_of_the_first_and_the_last_position_of_a_segment(layers):
    assert mem.reach(layers, position=0, segment=4, mem_len=4, n_segments=5, d=8) == 4 * layers
    assert mem.reach(layers, position=3, segment=4, mem_len=4, n_segments=5, d=8) == 3 + 4 * layers


def test_memory_snapshots_are_the_slots_of_the_library_memory_at_each_midnight():
    hours = torch.randn(1, 24 * 10, 1, dtype=torch.float64)
    snaps = mem.memory_snapshots(hours, 24, 3, 8)
    assert snaps.shape == (9, 27)
    memory = CompressiveMemory(1, mem_len=24, cmem_len=3, rate=8)
    short = compressed = None
    for day in range(5):
        short, compressed = memory.update(short, compressed, hours[:, 24 * day:24 * day + 24])
    torch.testing.assert_close(snaps[4], memory.context(short, compressed).flatten())
    assert bool((snaps[0, :3] == 0).all())                           # before the compressed slots fill


def test_the_memory_study_judges_deterministic_read_outs_by_the_paired_test():
    series = load_vic_elec().select("demand_mw")
    memories = {"exact 48": (24, 24, 1), "rate 24": (24, 24, 24)}
    result, sizes = mem.memory_study(series, memories)
    again, _ = mem.memory_study(series, memories)
    assert sizes == {"exact 48": (48, 48), "rate 24": (48, 600)}
    assert not any(e.trained for e in result.entries.values())
    assert result.windows["test"] == len(result["rate 24"].window_loss())
    assert result.mean("rate 24") == again.mean("rate 24")           # deterministic
    assert result.outcome("rate 24", "exact 48") in ("a", "b", "within")
    assert result.judgement("rate 24", "exact 48").split(";")[0] in (
        "better: paired test", "worse: paired test", "not separated")
