"""Section 12.4's experiments and figures on memory: what a cached or compressed past reaches,
and what it keeps of a series.

- `segment_figure`: Transformer-XL's cache drawn for two segments and three layers;
- `reach`: how many steps back a perturbation of the input still moves the output at one
  position of the last segment, measured in float64 on a `SegmentRecurrentEncoder`;
- `memory_snapshots`, `memory_study` and `memory_table`: a series streamed day by day through
  a `CompressiveMemory` (or an exact cache), the memory's slots at every midnight read out by
  a ridge regression into the next day's 24 hours, and every memory judged against one of
  them by the comparison protocol's paired test (deterministic read-outs: two baselines).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from ... import plots
from ...compare import Comparison, Entry
from ...compare.tables import legend
from ...data import Standardizer, temporal_split
from ...display import table
from ...memory import CompressiveMemory, SegmentRecurrentEncoder, run_segments
from ...randomstate import kept_random_state, set_seed
from ...train import Metrics

__all__ = ["segment_figure", "reach", "memory_snapshots", "memory_study", "memory_table"]


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


def reach(n_layers: int, *, position: int, segment: int = 8, mem_len: int = 8, n_segments: int = 6,
          d: int = 16) -> int:
    """How many steps back a perturbation of the input still moves the output at ``position``
    (0 .. segment - 1) of the last segment, through a `SegmentRecurrentEncoder` of
    ``n_layers`` layers with a cache of ``mem_len`` per layer, in float64 (any dependence
    shows as a nonzero difference). Seeded; the caller's random state is kept."""
    with kept_random_state():
        set_seed(0)
        enc = SegmentRecurrentEncoder(d, 2, n_layers, mem_len=mem_len).double().eval()
        T = segment * n_segments
        x = torch.randn(1, T, d, dtype=torch.float64).repeat(T + 1, 1, 1)    # copy 0 untouched
        bump = torch.randn(d, dtype=torch.float64)
    x[torch.arange(1, T + 1), torch.arange(T)] += bump                       # copy b moves step b - 1
    at = T - segment + position                                              # the output's step
    with torch.no_grad():
        out = run_segments(enc, x, segment)[:, at]                           # (T + 1, d)
    moved = (out[1:] - out[0]).abs().amax(-1) > 1e-9                         # (T,)
    return at - int(moved.nonzero()[0])


# --- a memory of fixed size, read out by a ridge regression ----------------------------------

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


def memory_table(result: Comparison, sizes: dict, reference: str, *, caption: str | None = None) -> None:
    """Slots, reach, next-day test MSE and the verdict against ``reference`` of each memory."""
    rows = [(name, slots, reach, f"{result.mean(name):.3f}",
             "reference" if name == reference else result.judgement(name, reference))
            for name, (slots, reach) in sizes.items()]
    table(["memory", "slots", "reach (h)", "next-day test MSE", f"vs {reference}"], rows, caption=caption,
          notes=[legend(result, what="next-day test MSE of a ridge read-out from the memory, on the "
                               "standardised series", seeds=False)])
