"""The explorers' figures, the saved sweeps they read, and the live widgets (``live=True``;
the explorers without a kernel are tests/test_explorers.py's)."""
import json

import matplotlib
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from labsupport import widgets  # noqa: E402
from labsupport.provenance import load_sweep, save_sweep  # noqa: E402
from labsupport.timing import cost_sweep  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def series_and_weights(heads=3, queries=4, keys=48):
    series = torch.sin(torch.arange(keys) / 4.0)
    weights = torch.rand(heads, queries, keys).softmax(-1)          # (H, L, S)
    return series, weights


def test_attention_figure_draws_the_chosen_head_and_query():
    series, weights = series_and_weights()
    fig = widgets.attention_figure(series, weights, query=2, head=1)
    top, bottom = fig.axes
    assert top.lines[0].get_ydata().tolist() == pytest.approx(series.tolist())
    chosen = [line for line in bottom.lines if line.get_label().startswith("head 1")]
    assert len(chosen) == 1
    assert chosen[0].get_ydata().tolist() == pytest.approx(weights[1, 2].tolist())
    assert top.get_title().startswith("Query 2 (hour 50), head 1")


@pytest.mark.parametrize("kwargs, message", [
    (dict(query=4), "query must be in"), (dict(head=3), "head in"), (dict(query=-1), "query")])
def test_attention_figure_rejects_positions_out_of_range(kwargs, message):
    series, weights = series_and_weights()
    with pytest.raises(ValueError, match=message):
        widgets.attention_figure(series, weights, **kwargs)


def test_attention_figure_rejects_weights_that_do_not_match_the_series():
    series, weights = series_and_weights()
    with pytest.raises(ValueError, match=r"\(heads, queries, 48\).*got \(4, 47\)"):
        widgets.attention_figure(series, weights[0, :, :47])


@pytest.mark.parametrize("kind", widgets.ENCODINGS)
def test_encoding_figure_every_kind(kind):
    fig = widgets.encoding_figure(kind, d_model=16, length=32)
    assert len(fig.axes) >= 2 and fig.axes[1].get_xlabel().startswith("offset")


def test_encoding_figure_rejects_an_unknown_kind():
    with pytest.raises(ValueError, match="kind must be one of"):
        widgets.encoding_figure("wavelet")


@pytest.fixture(scope="module")
def saved_sweep(tmp_path_factory):
    """A tiny sweep with an out-of-memory point, saved once for the module (a sweep measures
    peak memory with the profiler: seconds, not milliseconds); tests only read it."""
    def fails_long(q, k, v):
        if q.shape[-2] > 64:
            raise MemoryError("simulated: can't allocate")
        return q
    rows = cost_sweep({"identity": lambda q, k, v: q, "fails long": fails_long},
                      [32, 64, 128], reps=1, progress=False,
                      make_inputs=lambda L: (torch.ones(1, L, 4),) * 3)
    return save_sweep(rows, tmp_path_factory.mktemp("sweeps") / "tiny.json", title="tiny", profile="cpu")


def test_saved_sweep_round_trips_with_where_it_was_measured(saved_sweep):
    record = load_sweep(saved_sweep)
    assert record["device"].startswith(("CPU", "NVIDIA")) and record["profile"] == "cpu"
    assert [r["status"] for r in record["rows"]] == ["ok"] * 3 + ["ok", "ok", "oom"]
    assert record["torch"] == torch.__version__


@pytest.mark.parametrize("content", ["not json", json.dumps([1, 2]), json.dumps({"rows": [{"x": 1}]})])
def test_load_sweep_names_what_is_wrong(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ValueError, match="bad.json"):
        load_sweep(path)


def test_cost_figure_one_line_per_kernel_and_marks_the_wall(saved_sweep):
    fig = widgets.cost_figure([saved_sweep], metric="time_s")
    ax = fig.axes[0]
    assert sorted(line.get_label() for line in ax.lines) == ["fails long", "identity"]
    assert [t.get_text() for t in ax.texts] == ["x"]               # the OOM point
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"


def test_cost_figure_compares_machines_and_filters_kernels(saved_sweep):
    other = {**load_sweep(saved_sweep), "device": "another machine"}
    fig = widgets.cost_figure([saved_sweep, other], metric="time_s", kernels=["identity"])
    labels = sorted(line.get_label() for line in fig.axes[0].lines)
    assert len(labels) == 2 and labels[1] == "identity, another machine"


def test_cost_figure_rejects_an_unknown_metric_and_no_sweeps(saved_sweep):
    with pytest.raises(ValueError, match="metric must be one of"):
        widgets.cost_figure([saved_sweep], metric="speed")
    with pytest.raises(ValueError, match="at least one saved sweep"):
        widgets.cost_figure([])


def test_the_explorers_build_live_controls(saved_sweep):
    pytest.importorskip("ipywidgets")
    series, weights = series_and_weights()
    attention = widgets.attention_explorer(series, weights, live=True)
    controls = {c.description: c for c in attention.widget.children[:-1]}
    assert controls["query"].max == 3 and list(controls["head"].options) == [0, 1, 2]
    controls["query"].value = 3                                    # redraws without error
    cost = widgets.cost_explorer([saved_sweep], live=True)
    controls = {c.description: c for c in cost.widget.children[:-1]}
    assert set(controls["kernels"].options) == {"identity", "fails long"}
    controls["metric"].value = "peak_bytes"
    encoding = widgets.encoding_explorer(live=True)
    assert {c.description for c in encoding.widget.children[:-1]} >= {"encoding", "base"}
