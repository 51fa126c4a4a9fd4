"""The encoder-decoder comparison of 12.1: a model with a single context vector and the same model
with attention over the encoder's states, trained at several input lengths under the book's
protocol, beside the ridge and the weekly seasonal naive on the same test days; its table (plain
words) and its figure."""
from __future__ import annotations

from ...compare import NAIVE, RIDGE, Trainable, compare
from ...data import book_task
from ...display import table
from ...links import PROTOCOL
from ...markdown import Markdown
from ...plots import MARKERS, PALETTE

__all__ = ["bottleneck", "weekly_naive", "in_words", "curve_table", "curve_plot"]

WEEK = 168


def bottleneck(hours: int, builds: dict, sizes):
    """Train every model of ``builds`` (name -> ``build(revin) -> model`` reading ``hours`` of
    demand) on the book's task with ``hours`` of input, over ``sizes.bottleneck_seeds`` seeds,
    each until its validation error stops improving (plateau schedule, at most
    ``sizes.bottleneck_max_epochs`` epochs), on the CPU. Returns the `Comparison`. The test days
    (a forecast at each midnight of the test half-year) are the same at every length; the weekly
    naive needs a week of input, so a shorter input is compared without it (`weekly_naive`)."""
    task = book_task(lookback=hours, train_stride=sizes.bottleneck_train_stride)
    models = {name: Trainable(build) for name, build in builds.items()}
    return compare(task, models, revin=True, seeds=sizes.bottleneck_seeds, progress=False,
                   naive_period=WEEK if hours >= WEEK else None, epochs=sizes.bottleneck_max_epochs,
                   patience=3, schedule="plateau", lr=3e-3, batch_size=64, device="cpu")


def weekly_naive(results: dict) -> float:
    """The weekly naive's test MSE: the same test days at every length, so one number."""
    return next(c for c in results.values() if NAIVE in c.entries).mean(NAIVE)


OUTCOME = {"a": "{a} better", "b": "{b} better", "within": "tie", "unsettled": "not settled",
           "unknown": "no verdict", "failed": "a run failed"}


def in_words(comparison, a: str, b: str) -> str:
    """``a`` against ``b`` by the book's rule, in words: "attention better", "tie", ..."""
    return OUTCOME[comparison.outcome(a, b)].format(a=a, b=b)


def _cell(comparison, name) -> str:
    if name not in comparison.entries:
        return "-"
    values = comparison[name].values()
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{sum(values) / len(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def _sizes(comparison, names) -> tuple[str, str]:
    """The trained models' parameters and mean training seconds per seed, "a / b / c"."""
    ran = [n for n in names if n in comparison.entries]
    params = " / ".join(f"{comparison.entries[n].params:,}" for n in ran)
    mean = lambda records: sum(r.total_seconds for r in records) / len(records)   # noqa: E731
    seconds = " / ".join(f"{mean(comparison[n].records):.0f}" for n in ran)
    return params, seconds


def curve_table(results: dict, a: str, b: str, *, extra: str | None = None) -> None:
    """One row per input length: ``a`` and ``b`` (mean and min-max over seeds), ``extra`` where it
    ran, the ridge and the weekly naive on the same test days, ``b`` against ``a`` in words, and
    each trained model's parameters and training seconds per seed (in the order of the columns).
    Its numbers depend on the machine: show it in a cell that nbval ignores."""
    naive = weekly_naive(results)
    names = [a, b] + ([extra] if extra else [])
    rows = [(hours, *(_cell(c, n) for n in names), _cell(c, RIDGE), f"{naive:.3f}", in_words(c, b, a),
             *_sizes(c, names)) for hours, c in results.items()]
    first = next(iter(results.values()))
    seeds = len(first[a].values())
    legend = Markdown(
        f"Test MSE of the day-ahead forecast on the standardised series, mean (min-max) over {seeds} "
        f"seeds; every model and baseline forecasts the same {first.windows['test']} test days. "
        f"Tie: the gap is within the seeds' spread, or the paired test over the test days cannot "
        f"tell the two apart ([the comparison protocol]({PROTOCOL})). Parameters and training seconds "
        f"per seed: the trained models in the order of their columns.")
    table(["input (hours)", *names, "ridge", "weekly naive", f"{b} against {a}", "parameters",
           "training (s per seed)"], rows, notes=[legend])


def curve_plot(ax, results: dict, names) -> None:
    """Test MSE against the input length: each seed a dot, each model's mean a line, the ridge
    dashed (one fit per length) and the weekly naive dotted (the same test days throughout)."""
    hours = list(results)
    for i, name in enumerate(names):
        ran = [h for h in hours if name in results[h].entries]
        for h in ran:
            seeds = results[h][name].values()
            ax.plot([h] * len(seeds), seeds, MARKERS[i], color=PALETTE[i], alpha=0.45, markersize=4)
        ax.plot(ran, [results[h].mean(name) for h in ran], "-", marker=MARKERS[i], color=PALETTE[i],
                label=f"{name} (mean; dots: seeds)")
    ax.plot(hours, [results[h].mean(RIDGE) for h in hours], "--", color="0.3", label="ridge")
    ax.axhline(weekly_naive(results), ls=":", color="0.5", label="weekly naive")
    ax.set_xscale("log", base=2)
    ax.set_xticks(hours, [str(h) for h in hours])
    ax.set_xlabel("input length L (hours)")
    ax.set_ylabel("test MSE (standardised)")
    ax.legend(fontsize=8)
