"""A comparison repeated along one setting (the input length, say): one `Comparison` per
value, shown as a compact table with the verdict of one model against another at each
value, and as a figure of the test error against the setting.

``results`` is a dict ``{value: Comparison}`` in the order to show, each made by
`labsupport.compare.compare` on the task of that value (its own windows, its own ridge and
seasonal naive).

>>> import torch
>>> from labsupport.compare.results import Comparison, Entry
>>> from labsupport.train import Metrics
>>> def entry(name, values, trained=True):
...     losses = [{"mse": torch.full((8,), v, dtype=torch.float64)} for v in values]
...     return Entry(name, trained, 10, metrics=[Metrics(v, v) for v in values], window_losses=losses)
>>> c = Comparison({"a": entry("a", [0.3, 0.31]), "b": entry("b", [0.2, 0.21]),
...                 "ridge (closed form)": entry("ridge (closed form)", [0.25], trained=False)},
...                False, {"train": 100, "val": 8, "test": 8}, None, overlap=1)
>>> [round(v, 3) for v in curve_means({24: c}, "b")]
[0.205]
"""
from __future__ import annotations

from ..display import table
from ..links import PROTOCOL
from ..markdown import Markdown
from .results import NAIVE, RIDGE

__all__ = ["curve_means", "curve_table", "curve_plot"]


def _check(results) -> dict:
    if not isinstance(results, dict) or not results:
        raise TypeError("results must be a non-empty dict {setting: Comparison}, got "
                        f"{type(results).__name__}")
    return results


def curve_means(results: dict, name: str, metric: str = "mse") -> list:
    """The mean of ``metric`` over the seeds of model ``name``, at each setting of ``results``."""
    return [comparison.mean(name, metric) for comparison in _check(results).values()]


def _naive_name(comparison) -> str | None:
    """The seasonal naive's row in ``comparison`` (weekly, or another period), if any."""
    names = [n for n, e in comparison.entries.items() if not e.trained and n != RIDGE]
    return NAIVE if NAIVE in names else (names[0] if names else None)


def _cell(comparison, name, metric) -> str:
    entry = comparison[name]
    if entry.failure() is not None:
        return "failed"
    values = entry.values(metric)
    if not entry.trained:
        return f"{values[0]:.3f}"
    return f"{entry.mean(metric):.3f} ({min(values):.3f}-{max(values):.3f})"


def _stopped(comparison, names) -> str:
    """'3/3 converged' over the trained models' runs, or how many stopped at their budget."""
    records = [r for name in names for r in comparison[name].records]
    done = sum(r.converged for r in records)
    return f"{done}/{len(records)} converged"


def curve_table(results: dict, a: str, b: str, *, setting: str, metric: str = "mse",
                caption: str | None = None) -> None:
    """Show one row per setting: ``a`` and ``b`` (mean and min-max over seeds), the ridge and
    the seasonal naive on that setting's windows, how the runs stopped, and the verdict of
    ``b`` against ``a`` by the book's rule, with the paired interval of ``b - a``
    (`Comparison.judgement`). ``setting`` heads the first column ("input (hours)"). A
    one-line legend under it links the protocol page. Numbers depend on the machine: show
    it in a cell whose output the regression tests ignore."""
    results = _check(results)
    label = next(iter(results.values())).label(metric)
    rows = []
    for value, comparison in results.items():
        naive = _naive_name(comparison)
        rows.append((value, _cell(comparison, a, metric), _cell(comparison, b, metric),
                     _cell(comparison, RIDGE, metric) if RIDGE in comparison.entries else "-",
                     _cell(comparison, naive, metric) if naive else "-",
                     _stopped(comparison, (a, b)), comparison.judgement(b, a, metric)))
    first = next(iter(results.values()))
    legend = Markdown(
        f"{label} on the standardised series, mean (min-max) over seeds; at each setting every model "
        f"and baseline reads the same windows ({first.windows['test']:,} test forecasts); the naive "
        f"repeats the last day, or the last week where the input holds one; {b} against {a} by "
        f"[the book's comparison protocol]({PROTOCOL}).")
    table([setting, a, b, "ridge", "seasonal naive", "runs", f"{b} vs {a}"], rows,
          caption=caption, notes=[legend])


def curve_plot(ax, results: dict, names, *, xlabel: str, metric: str = "mse", colours=None,
               markers=None):
    """Test error against the setting: each seed a dot, each model's mean a line, the ridge a
    dashed line and the seasonal naive a dotted one. Returns the axes."""
    from ..plots import MARKERS, PALETTE

    results = _check(results)
    x = list(results)
    colours, markers = colours or PALETTE, markers or MARKERS
    for i, name in enumerate(names):
        for value, comparison in results.items():
            seeds = comparison[name].values(metric)
            ax.plot([value] * len(seeds), seeds, markers[i], color=colours[i], alpha=0.45, markersize=4)
        ax.plot(x, curve_means(results, name, metric), "-", marker=markers[i], color=colours[i],
                label=f"{name} (mean; dots: seeds)")
    ax.plot(x, curve_means(results, RIDGE, metric), "--", color="0.3", label="ridge")
    naive = [c.mean(_naive_name(c), metric) for c in results.values()]
    ax.plot(x, naive, ":", color="0.5", label="seasonal naive")
    ax.set_xlabel(xlabel)
    label = next(iter(results.values())).label(metric)
    ax.set_ylabel(f"{label} (standardised)")
    ax.legend()
    return ax
