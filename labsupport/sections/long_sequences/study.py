"""Section 12.4's experiments and figures, the plumbing around what the notebook writes on stage.

- `context_curve`, `context_table`, `context_figure`: the patch forecaster at several context
  lengths beside the ridge on the same lookback and the weekly naive, every context on the same
  target hours, pooled into one `Comparison` so that the protocol compares contexts with each
  other;
- `segment_figure`: Transformer-XL's cache drawn for two segments and three layers;
- `memory_snapshots`, `memory_study`, `memory_table`, `memory_figure`: a linear probe of a memory
  of fixed size. A series is streamed day by day through a `CompressiveMemory` (or an exact
  cache), the memory's slots at every midnight are read out by a ridge regression into the next
  day's 24 hours, and every memory is judged against references by the protocol's paired test
  (deterministic read-outs: judged as two baselines are);
- `length_axis`, `log_y`: the axes of the cost figures.
"""
from __future__ import annotations

import dataclasses

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from ... import plots
from ...compare import NAIVE, RIDGE, Comparison, Entry, Trainable, compare, legend, mean_range
from ...data import HORIZON, Standardizer, book_task, temporal_split
from ...display import table
from ...memory import CompressiveMemory
from ...models import PatchTransformer
from ...train import Metrics

__all__ = ["context_curve", "context_table", "context_figure", "segment_figure", "memory_snapshots",
           "memory_study", "memory_table", "memory_figure", "length_axis", "log_y"]

# --- what a longer context buys ------------------------------------------------------------

LR, PATIENCE, BATCH = 5e-3, 2, 256       # the plateau schedule: early stopping ends every run


def _one_context(series, columns, unit, days, longest, *, seeds, stride, epochs, device):
    """The patch forecaster (one token per day) with ``days`` of context, the ridge on the same
    lookback and (from a week) the weekly naive, trained on the target hours of the longest
    context so that every context forecasts the same hours."""
    L = days * 24
    task = book_task(lookback=L, columns=columns, series=series, train_stride=stride)
    skip = (longest * 24 - L) // stride
    task = dataclasses.replace(task, train=(task.train[0][skip:], task.train[1][skip:]))
    forecaster = Trainable(lambda revin: PatchTransformer(
        lookback=L, horizon=HORIZON, patch_len=24, stride=24, d_model=32, n_heads=4, n_layers=2,
        d_ff=64, attn_dropout=0.0, revin=revin))
    return compare(task, {"forecaster": forecaster}, revin=False, seeds=seeds, epochs=epochs,
                   patience=PATIENCE, lr=LR, batch_size=BATCH, schedule="plateau",
                   naive_period=168 if L >= 168 else None, unit=unit, device=device, progress=False)


def context_curve(series, columns, days, *, seeds: int, stride: int, epochs: int, unit=None,
                  device=None) -> Comparison:
    """Every context of ``days`` on ``series`` in one `Comparison` (the test windows are the same):
    entries ``"forecaster, 7 d"``, ``"ridge, 7 d"``, ... and the weekly naive."""
    entries, first = {}, None
    for d in days:
        result = _one_context(series, columns, unit, d, max(days), seeds=seeds, stride=stride,
                              epochs=epochs, device=device)
        first = first or result
        for model, label in (("forecaster", "forecaster"), (RIDGE, "ridge")):
            entries[f"{label}, {d} d"] = dataclasses.replace(result[model], name=f"{label}, {d} d")
        if NAIVE in result.entries:
            entries[NAIVE] = result[NAIVE]
    return Comparison(entries, first.revin, first.windows, first.unit, overlap=first.overlap)


def context_table(C: Comparison, days, *, caption: str) -> None:
    """One row per context: the forecaster (mean and range over seeds), the ridge, and the
    verdicts against the context before and against the ridge."""
    rows, previous = [], None
    for d in days:
        mine, ridge = f"forecaster, {d} d", f"ridge, {d} d"
        records = C[mine].records
        rows.append((d, mean_range(C[mine].values()), f"{sum(r.converged for r in records)}/{len(records)}",
                     f"{C.mean(ridge):.3f}",
                     "-" if previous is None else C.judgement(mine, f"forecaster, {previous} d"),
                     "-" if previous is None else C.judgement(ridge, f"ridge, {previous} d"),
                     C.judgement(mine, ridge)))
        previous = d
    naive = f"{C.mean(NAIVE):.3f}" if NAIVE in C.entries else "-"
    table(["days", "forecaster", "early-stopped", "ridge", "forecaster vs the context before",
           "ridge vs the context before", "forecaster vs ridge"], rows, caption=caption,
          notes=[f"weekly naive on the same test windows: {naive}", legend(C)])


def context_figure(curves: dict, days: dict):
    """Test MSE against the context, one panel per series (``curves``: name -> Comparison):
    the forecaster's mean with its range over seeds, the ridge and the weekly naive."""
    fig, axes = plt.subplots(1, len(curves), figsize=(8, 3.3))
    for ax, (name, C) in zip(np.atleast_1d(axes), curves.items()):
        x = list(days[name])
        per_seed = [C[f"forecaster, {d} d"].values() for d in x]
        mean = np.array([np.mean(v) for v in per_seed])
        spread = [mean - [min(v) for v in per_seed], [max(v) for v in per_seed] - mean]
        ax.errorbar(x, mean, yerr=spread, marker="o", capsize=3, color=plots.PALETTE[0],
                    label="forecaster (seeds: range)")
        ridge = [C.mean(f"ridge, {d} d") for d in x]
        ax.plot(x, ridge, marker="s", ls="--", color=plots.PALETTE[1], label="ridge, same lookback")
        top = 1.15 * max(max(max(v) for v in per_seed), max(ridge))
        naive = C.mean(NAIVE) if NAIVE in C.entries else None
        if naive is not None and naive <= top:
            ax.axhline(naive, ls=":", color=plots.PALETTE[3], label="weekly naive")
        elif naive is not None:
            ax.text(0.98, 0.97, f"weekly naive: {naive:.2f} (above)", transform=ax.transAxes,
                    ha="right", va="top", fontsize=8, color=plots.PALETTE[3])
        ax.set_xscale("log")
        ax.set_xticks(x, [str(d) for d in x])
        ax.minorticks_off()
        ax.set(xlabel="context (days, log scale)", ylabel="test MSE (scaled)", title=name, ylim=(0, top))
        ax.legend(loc="lower left", fontsize=8)
    return fig


# --- the segment cache, drawn ----------------------------------------------------------------

def segment_figure(steps: int = 4, layers: int = 3, gap: float = 1.5):
    """Two segments side by side, layers stacked: the lines into one query of segment tau at
    layers 2 and 3 come from its own segment (up to itself) and from the layer below's cache
    of segment tau - 1 (no gradient)."""
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    cache_colour, own_colour = plots.PALETTE[1], plots.PALETTE[0]
    x_prev = np.arange(steps, dtype=float)                  # segment tau - 1
    x_now = x_prev + steps + gap                            # segment tau
    for l in range(layers):
        y = 1.6 * l
        if l < layers - 1:                                  # layer l + 1's cache
            ax.add_patch(plt.Rectangle((x_prev[0] - 0.45, y - 0.35), steps - 0.1, 0.7, color="0.9",
                                       zorder=0))
            ax.text(x_prev[-1] + 0.55, y - 0.3, f"$\\mathbf{{m}}^{{{l + 1}}}$", fontsize=9, color="0.35")
        ax.scatter(x_prev, [y] * steps, s=160, color="0.6", zorder=3)
        ax.scatter(x_now, [y] * steps, s=160, color=own_colour, zorder=3)
        ax.text(x_prev[0] - 0.9, y, f"$\\mathbf{{h}}^{{{l + 1}}}$", ha="right", va="center", fontsize=11)
    for l, query in ((1, steps - 1), (2, 0)):               # layer l + 1's query
        q = (x_now[query], 1.6 * l)
        sources = [(x, cache_colour, "--") for x in x_prev]
        sources += [(x, own_colour, "-") for x in x_now[:query + 1]]
        for x, colour, style in sources:
            ax.annotate("", xy=q, xytext=(x, 1.6 * (l - 1)),
                        arrowprops=dict(arrowstyle="-|>", color=colour, lw=1.1, ls=style, shrinkA=6,
                                        shrinkB=6))
    ax.text(x_prev.mean(), 1.6 * layers - 0.6, "segment τ−1\n(shaded: cached, no gradient)", ha="center",
            fontsize=9)
    ax.text(x_now.mean(), 1.6 * layers - 0.6, "segment τ: current", ha="center", fontsize=9)
    ax.annotate("", xy=(x_now[-1] + 0.5, -0.9), xytext=(x_prev[0] - 0.5, -0.9),
                arrowprops=dict(arrowstyle="->", color="0.3"))
    ax.text(x_now[-1] + 0.5, -1.25, "time", ha="right", fontsize=9)
    ax.plot([], [], "--", color=cache_colour, label="key from the cache")
    ax.plot([], [], "-", color=own_colour, label="key from the segment (j ≤ i)")
    ax.legend(loc="center right", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    ax.set_xlim(x_prev[0] - 1.6, x_now[-1] + 4.6)
    ax.set_ylim(-1.4, 1.6 * layers)
    ax.axis("off")
    return fig


# --- a linear probe of a memory of fixed size ---------------------------------------------------

def memory_snapshots(hours: torch.Tensor, mem_len: int, cmem_len: int, rate: int) -> torch.Tensor:
    """Stream ``hours`` (1, T, 1) day by day through a `CompressiveMemory` of ``mem_len`` exact
    and ``cmem_len`` compressed slots (compression ``rate``), and return its slots at every
    midnight but the last: (days - 1, mem_len + cmem_len), zero-padded before they fill."""
    memory = CompressiveMemory(1, mem_len=mem_len, cmem_len=cmem_len, rate=rate)
    short = compressed = None
    snapshots = []
    for day in range(hours.shape[1] // 24 - 1):
        short, compressed = memory.update(short, compressed, hours[:, 24 * day:24 * day + 24])
        slots = memory.context(short, compressed).flatten()                  # oldest first
        snapshots.append(F.pad(slots, (mem_len + cmem_len - len(slots), 0)))
    return torch.stack(snapshots)


PENALTIES = tuple(10.0 ** k for k in range(-3, 4))        # the read-out's ridge penalties


def _readout(X, Y, parts, penalties=PENALTIES):
    """A ridge from the slots X (days, S) to the next day Y (days, 24): fitted on the training
    days, its penalty chosen on the validation days; the test days' forecasts."""
    X = torch.cat([X, torch.ones(len(X), 1, dtype=X.dtype)], dim=1)
    (Xtr, Ytr), (Xva, Yva), (Xte, _) = [(X[p], Y[p]) for p in parts]
    eye = torch.eye(X.shape[1], dtype=X.dtype)

    def solve(lam):
        return torch.linalg.solve(Xtr.T @ Xtr + lam * eye, Xtr.T @ Ytr)

    best = min(penalties, key=lambda lam: ((Xva @ solve(lam) - Yva) ** 2).mean().item())
    return Xte @ solve(best)


def memory_study(series, memories: dict, *, warm_up_days: int = 30) -> tuple:
    """Each memory of ``memories`` (name -> (mem_len, cmem_len, rate)) streamed over the scaled
    ``series`` (one channel, hourly; scaled with the training part's statistics) and read out
    into the next day by a ridge (`memory_snapshots`). Returns ``(comparison, sizes)``: a
    `Comparison` of the memories as baselines without seeds (deterministic), scored per test
    day, and {name: (slots, reach in hours)}."""
    train, val, _ = temporal_split(series)
    hours = torch.from_numpy(Standardizer().fit(train.values).transform(series.values)).double()[None]
    days = hours.shape[1] // 24
    first_val, first_test = len(train.values) // 24, (len(train.values) + len(val.values)) // 24
    next_day = hours[0, 24:24 * days, 0].view(days - 1, 24)                  # the day after each midnight
    parts = [slice(warm_up_days, first_val - 1), slice(first_val - 1, first_test - 1),
             slice(first_test - 1, None)]
    target = next_day[parts[2]]
    entries, sizes = {}, {}
    for name, (mem_len, cmem_len, rate) in memories.items():
        forecast = _readout(memory_snapshots(hours, mem_len, cmem_len, rate), next_day, parts)
        error = forecast - target                                            # (test days, 24)
        losses = {"mse": error.pow(2).mean(1), "mae": error.abs().mean(1)}
        metrics = Metrics(mse=losses["mse"].mean().item(), mae=losses["mae"].mean().item())
        entries[name] = Entry(name, False, mem_len + cmem_len + 1, metrics=[metrics],
                              window_losses=[losses], models=[None])
        sizes[name] = (mem_len + cmem_len, mem_len + rate * cmem_len)
    windows = {"train": parts[0].stop - parts[0].start, "val": first_test - first_val, "test": len(target)}
    return Comparison(entries, False, windows, None, overlap=1, steps=None), sizes


def memory_table(result: Comparison, sizes: dict, references, *, caption: str | None = None) -> None:
    """Slots, reach, next-day test MSE and one verdict column per reference."""
    rows = [(name, slots, reach, f"{result.mean(name):.3f}",
             *("reference" if name == ref else result.judgement(name, ref) for ref in references))
            for name, (slots, reach) in sizes.items()]
    table(["memory", "slots", "reach (h)", "next-day test MSE", *(f"vs {ref}" for ref in references)],
          rows, caption=caption,
          notes=[legend(result, what="next-day test MSE of the ridge probe on the memory's slots, on the "
                                     "standardised series", seeds=False)])


def memory_figure(result: Comparison, sizes: dict, compressed: list, exact: list):
    """Next-day test MSE against the reach: the memories of one size at growing rates (a line)
    and the exact caches (squares)."""
    fig, ax = plt.subplots(figsize=(5.8, 3.3))
    ax.plot([sizes[n][1] for n in compressed], [result.mean(n) for n in compressed], "o-",
            label=f"{sizes[compressed[0]][0]} slots, growing compression rate")
    ax.plot([sizes[n][1] for n in exact], [result.mean(n) for n in exact], "s", label="exact caches")
    ax.set_xscale("log")
    reaches = sorted({sizes[n][1] for n in compressed + exact})
    ax.set_xticks(reaches, [str(h) for h in reaches])
    ax.minorticks_off()
    ax.set(xlabel="reach (hours, log scale)", ylabel="next-day test MSE (scaled)")
    ax.legend(fontsize=8)
    return fig


# --- the axes of the cost figures ----------------------------------------------------------------

def length_axis(ax, lengths, label: str = "sequence length L") -> None:
    """A log axis with one plain tick per measured length (1k = 1,024)."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [f"{n // 1024}k" if n % 1024 == 0 else str(n) for n in lengths])
    ax.minorticks_off()
    ax.set_xlabel(label)


def log_y(ax) -> None:
    """Log y ticks at 1, 2, 5 x 10^k (only 10^k over many decades)."""
    low, high = ax.get_ylim()
    subs = (1.0,) if high / low > 1e3 else (1.0, 2.0, 5.0)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
