"""The sections' experiment code (labsupport.studies): what 12.3 and 12.4 rely on, checked on
small inputs against what it must compute."""
import matplotlib
import pytest
import torch

from labsupport.compare import RIDGE, Comparison, Entry, TrainingRecord
from labsupport.compare.tables import legend, mean_range, verdict_table
from labsupport.data import LOOKBACK, book_task, load_vic_elec
from labsupport.memory import CompressiveMemory
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


class _CountedBack(torch.nn.Module):
    """The notebook's CountedBack: tokens numbered back from the forecast origin."""

    def __init__(self, model):
        super().__init__()
        self.model, self.revin = model, model.revin

    def forward(self, x):
        n = x.shape[1] // 24
        return self.model(x, positions=torch.arange(n) + self.model.n_patches - n)


def test_counting_back_changes_only_the_absolute_encodings():
    torch.manual_seed(0)
    x = torch.randn(3, 4 * LOOKBACK, 1)                               # 56 tokens, trained on 14
    for name, changes in (("sinusoidal", True), ("RoPE", False), ("ALiBi", False), ("T5 buckets", False),
                          ("causal mask only", False)):
        model = pos.forecaster(name, revin=True, width=16).eval()
        with torch.no_grad():
            same = torch.allclose(model(x), _CountedBack(model)(x), atol=1e-5)
        assert same != changes, name
        at_length = torch.randn(2, LOOKBACK, 1)                       # the training length: no change
        with torch.no_grad():
            torch.testing.assert_close(model(at_length), _CountedBack(model)(at_length))


def test_counted_back_renames_and_wraps_the_runs():
    models = [pos.forecaster("sinusoidal", revin=True, width=8) for _ in range(2)]
    e = Entry("sinusoidal", True, 10, metrics=[Metrics(0.1, 0.2)] * 2, models=models, seeds=[0, 1])
    result = Comparison({"sinusoidal": e, "other": Entry("other", True, 1)}, True,
                        dict(train=1, val=1, test=1), overlap=1)
    back = pos.counted_back(result, ["sinusoidal"], _CountedBack)
    assert list(back.entries) == ["sinusoidal, counted back"]
    assert all(isinstance(m, _CountedBack) and m.model is o
               for m, o in zip(back["sinusoidal, counted back"].models, models))


def test_the_holidays_of_the_test_half_year():
    flagged, holiday = pos.holiday_days(book_task(train_stride=64, calendar=True))
    assert flagged[flagged > 0].tolist() == [1, 23, 1, 24, 23]
    days = [str(pos.first_test_day() + int(d)) for d in torch.nonzero(holiday).flatten()]
    assert days == ["2014-11-04", "2014-12-25", "2014-12-26"]


def test_the_calendar_variants_drop_one_group_of_columns_each():
    task = book_task(train_stride=64, calendar=True)
    (x, time), _ = task.test
    variants = pos.calendar_trainables("sinusoidal", width=8)
    assert list(variants) == ["calendar", "calendar without the hour", "calendar without the weekday",
                              "calendar without the holiday flag"]
    dropped = {"calendar": (), "calendar without the hour": (0, 1), "calendar without the weekday": (2, 3),
               "calendar without the holiday flag": (6,)}
    for name, spec in variants.items():
        model = spec.build(revin=True)
        assert model.columns == [c for c in range(7) if c not in dropped[name]], name
        assert model.model.time_features == len(model.columns) and model.revin
        seen = []
        model.model.forward = lambda x, t, seen=seen: seen.append(t) or x[:, :24]   # what it is handed
        model(x[:2], time[:2])
        torch.testing.assert_close(seen[0], time[:2][..., model.columns])
    with pytest.raises(ValueError, match="the groups are"):
        pos.calendar_trainables("sinusoidal", width=8, without=("minute",))


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
