"""Interactive explorers for a live kernel (ipywidgets, imported only when called), each
built on a plain figure function that the book also shows statically.

- `attention_figure` / `attention_explorer`: one head's weights for one query, drawn
  under the stretch of the series that the keys read;
- `encoding_figure` / `encoding_explorer`: what a positional encoding assigns and how
  two positions relate by offset;
- `cost_figure` / `cost_explorer`: time, memory or TFLOP/s of saved cost sweeps
  (`provenance.save_sweep`), several machines on one log-log plot.

>>> fig = encoding_figure("rope", d_model=16, length=32)
>>> len(fig.axes) >= 2
True
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from . import plots
from .positional import RotaryEmbedding, alibi_bias, relative_position_bucket, sinusoidal_encoding
from .provenance import load_sweep

ENCODINGS = ("sinusoidal", "rope", "alibi", "relative")


def _require_ipywidgets():
    try:
        import ipywidgets
    except ImportError as err:                                  # pragma: no cover
        raise ImportError("the explorers need ipywidgets: pip install ipywidgets "
                          "(the static figures need nothing more)") from err
    return ipywidgets


def encoding_figure(kind: str = "sinusoidal", *, d_model: int = 64, length: int = 128,
                    base: float = 10000.0, n_heads: int = 8):
    """Two panels for one encoding: what it assigns to each position, and how two
    positions relate as a function of their offset."""
    if kind not in ENCODINGS:
        raise ValueError(f"kind must be one of {ENCODINGS}, got {kind!r}")
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.2))
    offsets = np.arange(length)
    if kind == "sinusoidal":
        table = sinusoidal_encoding(length, d_model, base, dtype=torch.float64)
        plots.heatmap(left, table.T, xlabel="position", ylabel="dimension", colorbar="value",
                      cmap="cividis", title=f"Sinusoidal table (d={d_model}, base={base:g})")
        for p in (0, length // 4, length // 2):
            sims = (table[p] * table[p:]).sum(-1)
            right.plot(np.arange(len(sims)), sims, label=f"from position {p}")
        right.set_ylabel("PE(p) . PE(p + k)")
    elif kind == "rope":
        rope = RotaryEmbedding(d_model, base)
        x = torch.ones(1, d_model, dtype=torch.float64) / d_model ** 0.5
        rotated = rope(x.expand(length, d_model), torch.arange(length))           # (L, d)
        plots.heatmap(left, rotated.T, xlabel="position", ylabel="dimension", colorbar="value",
                      cmap="cividis", title=f"One vector rotated by RoPE (d={d_model})")
        for p in (0, length // 4, length // 2):
            sims = (rotated[p] * rotated[p:]).sum(-1)
            right.plot(np.arange(len(sims)), sims, label=f"query at {p}")
        right.set_ylabel("score q_p . k_(p+k), q = k")
    elif kind == "alibi":
        bias = alibi_bias(n_heads, length)                                          # (H, L, L)
        plots.heatmap(left, bias[0], xlabel="key position", ylabel="query position",
                      colorbar="bias", cmap="cividis", title=f"ALiBi bias, head 0 of {n_heads}")
        for h in range(0, n_heads, max(1, n_heads // 4)):
            right.plot(offsets, bias[h, -1].flip(0), label=f"head {h}")
        right.set_ylabel("bias added to the score")
    else:
        buckets = relative_position_bucket(torch.arange(length)[:, None] - torch.arange(length))
        plots.heatmap(left, buckets, xlabel="key position", ylabel="query position",
                      colorbar="bucket", cmap="cividis", title="T5 buckets (causal, 32 buckets)")
        right.plot(offsets, relative_position_bucket(torch.tensor(offsets)), label="bucket")
        right.set_ylabel("bucket of the offset")
    right.set_xlabel("offset k (tokens)")
    right.legend()
    right.set_title("How positions relate, by offset")
    return fig


def encoding_explorer():
    """Choose an encoding and its settings; the figure redraws (needs a live kernel)."""
    widgets = _require_ipywidgets()

    def show(kind, d_model, length, base):
        encoding_figure(kind, d_model=d_model, length=length, base=base)
        plt.show()

    return widgets.interact(
        show,
        kind=widgets.Dropdown(options=ENCODINGS, value="sinusoidal", description="encoding"),
        d_model=widgets.IntSlider(value=64, min=8, max=256, step=8, description="width d"),
        length=widgets.IntSlider(value=128, min=16, max=512, step=16, description="positions"),
        base=widgets.FloatLogSlider(value=10000, base=10, min=1, max=6, description="base"),
    )


# --- attention over the real series -------------------------------------------------

def attention_figure(series, weights, *, query: int = 0, head: int = 0, query_offset=None,
                     xlabel: str = "hour of the window", ylabel: str = "value"):
    """One query's attention weights (per head) under the series its keys read.

    ``series (S,)``: the values at the key positions; ``weights (H, L, S)``: each head's
    weights of each query. ``query_offset``: where query 0 sits on the same axis (for a
    forecast hour after the window, ``S``); the query's position is marked.
    """
    series = np.asarray(torch.as_tensor(series, dtype=torch.float64).cpu()).reshape(-1)
    weights = torch.as_tensor(weights, dtype=torch.float64).cpu()
    if weights.dim() != 3 or weights.shape[-1] != len(series):
        raise ValueError(f"weights must be (heads, queries, {len(series)}) for a series of "
                         f"{len(series)} keys, got {tuple(weights.shape)}")
    n_heads, n_queries, _ = weights.shape
    if not (0 <= query < n_queries and 0 <= head < n_heads):
        raise ValueError(f"query must be in [0, {n_queries}) and head in [0, {n_heads}), "
                         f"got query={query}, head={head}")
    keys = np.arange(len(series))
    at = (len(series) if query_offset is None else query_offset) + query
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 4.2), sharex=True,
                                      gridspec_kw=dict(height_ratios=(3, 2)))
    top.plot(keys, series, color=plots.OKABE_ITO["black"], lw=1)
    top.axvline(at, color=plots.OKABE_ITO["vermillion"], ls="--", lw=1.2, label="the query's hour")
    top.set_ylabel(ylabel)
    top.set_title(f"Query {query} (hour {at}), head {head}: where it reads")
    top.legend(loc="upper left")
    for h in range(n_heads):
        if h != head:
            bottom.plot(keys, weights[h, query], color="0.75", lw=0.8)
    bottom.plot(keys, weights[head, query], color=plots.OKABE_ITO["blue"], lw=1.4,
                label=f"head {head}" + (" (grey: the other heads)" if n_heads > 1 else ""))
    bottom.axvline(at, color=plots.OKABE_ITO["vermillion"], ls="--", lw=1.2)
    bottom.set_xlabel(xlabel)
    bottom.set_ylabel("attention weight")
    bottom.legend(loc="upper left")
    return fig


def attention_explorer(series, weights, **figure_options):
    """Pick a query and a head; the figure redraws (needs a live kernel)."""
    widgets = _require_ipywidgets()
    n_heads, n_queries = torch.as_tensor(weights).shape[:2]

    def show(query, head):
        attention_figure(series, weights, query=query, head=head, **figure_options)
        plt.show()

    return widgets.interact(
        show,
        query=widgets.IntSlider(value=0, min=0, max=n_queries - 1, description="query"),
        head=widgets.Dropdown(options=list(range(n_heads)), value=0, description="head"),
    )


# --- cost of attention, from saved sweeps --------------------------------------------

METRICS = {"time_s": "time per call (s)", "peak_bytes": "peak memory (bytes, measured)",
           "tflops": "achieved TFLOP/s (from a FLOP model)"}


def _sweeps(sources):
    """Saved sweeps from paths or already-loaded records, each with a label."""
    records = [load_sweep(s) if not isinstance(s, dict) else s for s in sources]
    if not records:
        raise ValueError("give at least one saved sweep (a path or a provenance.load_sweep record)")
    return records


def cost_figure(sources, *, metric: str = "time_s", kernels=None):
    """Log-log plot of one metric against length, one line per (machine, kernel).

    Points that did not run are marked on the length axis: x = out of memory,
    | = skipped (over the memory budget).
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {sorted(METRICS)}, got {metric!r}")
    records = _sweeps(sources)
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    styles = iter(zip(plots.PALETTE * 4, plots.MARKERS * 4))
    lengths = []
    for record in records:
        for name in dict.fromkeys(r["kernel"] for r in record["rows"]):
            if kernels is not None and name not in kernels:
                continue
            rows = [r for r in record["rows"] if r["kernel"] == name]
            done = [(r["length"], r[metric]) for r in rows if r["status"] == "ok" and r.get(metric)]
            color, marker = next(styles)
            label = name if len(records) == 1 else f"{name}, {record['device']}"
            if done:
                ax.loglog(*zip(*done), marker=marker, color=color, label=label)
            for r in rows:
                lengths.append(r["length"])
                if r["status"] != "ok":                    # mark it on the length axis
                    ax.annotate("x" if r["status"] == "oom" else "|", (r["length"], 0.0),
                                xycoords=("data", "axes fraction"), color=color,
                                ha="center", va="bottom", fontsize=12)
    if lengths:
        ax.set_xlim(min(lengths) / 1.3, max(lengths) * 1.3)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length L (tokens)")
    ax.set_ylabel(METRICS[metric])
    title = records[0].get("title") or "cost sweep"
    ax.set_title(f"{title}  (x at the bottom: out of memory, |: skipped)", fontsize=9)
    if ax.lines:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, f"no measured {metric} in these sweeps", transform=ax.transAxes,
                ha="center")
    return fig


def cost_explorer(sources):
    """Choose the metric and the kernels of saved sweeps; the plot redraws (live kernel)."""
    widgets = _require_ipywidgets()
    records = _sweeps(sources)
    names = list(dict.fromkeys(r["kernel"] for rec in records for r in rec["rows"]))

    def show(metric, kernels):
        cost_figure(records, metric=metric, kernels=kernels or names)
        plt.show()

    return widgets.interact(
        show,
        metric=widgets.Dropdown(options=[(label, key) for key, label in METRICS.items()],
                                value="time_s", description="metric"),
        kernels=widgets.SelectMultiple(options=names, value=tuple(names), description="kernels"),
    )
