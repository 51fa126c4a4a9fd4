"""Section 12.3's experiments and figures: what a positional encoding buys the book's
forecaster, what it does on windows longer than those it was trained on, and what the
calendar adds.

The section's forecaster (`forecaster`) reads one token per day (patches of 24 hours, not
overlapping): a 14-day window is 14 tokens. `ENCODINGS` names its variants, from the
`CONTROL`, which has no position signal at all (no causal mask, the mean of the tokens read
out, no encoding: shuffling whole days leaves its forecast unchanged), through the causal
mask alone, to each encoding of `labsupport.positional`.

- `longer_tasks` and `extrapolate`: trained runs scored on the test windows of longer
  lookbacks (the ridge and the weekly naive refitted on each); `counted_back`: the same runs
  wrapped by the notebook's ``CountedBack``, which numbers their tokens back from the forecast
  origin, so that the newest token keeps the position it had in training;
- `calendar_trainables`: the forecaster handed the whole calendar or all of it but one
  group of columns (`CALENDAR_COLUMNS`, `CalendarColumns`); `holiday_days`: the test days
  whose target hours are mostly flagged as a public holiday; `days_table`;
- figures: `rope_figure`, `alibi_figure`, `t5_figure` (what each encoding does, by
  offset, with the offsets of the training windows marked) and `extrapolation_figure`.
"""
from __future__ import annotations

import dataclasses
from functools import partial

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from ... import plots
from ...compare import NAIVE, RIDGE, Comparison, Trainable, rescore
from ...compare.tables import legend, mean_range
from ...data import HORIZON, LOOKBACK, VAL_END, book_task
from ...display import table
from ...models import PatchTransformer
from ...positional import alibi_bias, alibi_slopes, relative_position_bucket

__all__ = ["CONTROL", "ENCODINGS", "TOKEN_HOURS", "forecaster", "trainables", "counted_back",
           "longer_tasks", "extrapolate", "extrapolation_table", "CALENDAR_COLUMNS",
           "CalendarColumns", "calendar_trainables", "holiday_days", "first_test_day", "days_table",
           "rope_figure", "alibi_figure", "t5_figure", "extrapolation_figure"]

TOKEN_HOURS = 24                     # one token per day: patches of 24 hours, stride 24
CONTROL = "no position (control)"
# the name in the tables -> PatchTransformer's pos_encoding (the control: see `forecaster`)
ENCODINGS = {CONTROL: "none", "causal mask only": "none", "sinusoidal": "sinusoidal",
             "learned": "learned", "Time2Vec": "time2vec", "RoPE": "rope", "ALiBi": "alibi",
             "T5 buckets": "relative"}


def forecaster(name: str, *, revin: bool, width: int, lookback: int = LOOKBACK, heads: int = 4,
               **options) -> PatchTransformer:
    """The section's forecaster with encoding ``name`` (a key of `ENCODINGS`): one token per
    day, 2 causal layers of ``heads`` heads, width ``width``, the forecast read off the last
    token. The control has no causal mask and reads the mean of the tokens. No dropout on the
    attention weights, so that the fused kernels run on a CPU too.

    >>> forecaster("RoPE", revin=True, width=16).n_patches
    14
    """
    if name not in ENCODINGS:
        raise ValueError(f"name must be one of {list(ENCODINGS)}, got {name!r}")
    layout = dict(causal=False, head="mean") if name == CONTROL else {}
    return PatchTransformer(lookback=lookback, horizon=HORIZON, patch_len=TOKEN_HOURS,
                            stride=TOKEN_HOURS, pos_encoding=ENCODINGS[name], d_model=width,
                            n_heads=heads, n_layers=2, d_ff=2 * width, attn_dropout=0.0, revin=revin,
                            **layout, **options)


def trainables(names, *, width: int, **options) -> dict:
    """{name: Trainable} of `forecaster` for each name, for `labsupport.compare.compare`."""
    return {name: Trainable(partial(forecaster, name, width=width, **options)) for name in names}


# --- longer windows ---------------------------------------------------------------------------

def counted_back(result: Comparison, names, wrap) -> Comparison:
    """The trained runs of ``names`` in ``result``, each wrapped as ``wrap(model)`` (the
    notebook's ``CountedBack``: its tokens numbered back from the forecast origin), as a
    comparison whose entries are named ``"<name>, counted back"`` (no baselines: score it
    with `labsupport.compare.rescore`)."""
    entries = {}
    for name in names:
        entry = result[name]
        entries[f"{name}, counted back"] = dataclasses.replace(
            entry, name=f"{name}, counted back", models=[wrap(m) for m in entry.models])
    return dataclasses.replace(result, entries=entries)


def longer_tasks(factors, *, train_stride: int) -> dict:
    """{factor: the book's task with windows ``factor`` times as long as LOOKBACK}: the same
    test targets at every length (the 24 hours after each test day's midnight)."""
    return {f: book_task(lookback=f * LOOKBACK, train_stride=train_stride) for f in factors}


def extrapolate(runs: Comparison, tasks: dict, *, device=None) -> dict:
    """{factor: the trained runs of ``runs`` scored on the test windows of ``tasks[factor]``},
    with the ridge refitted and the weekly naive recomputed on each task
    (`labsupport.compare.rescore`). A run that cannot read the longer windows (a learned
    table too short for them) is recorded as failed, never ranked."""
    return {f: rescore(runs, task, device=device) for f, task in tasks.items()}


def extrapolation_table(scored, scored_back, names, *, caption: str | None = None) -> None:
    """Test MSE, mean (min-max) over seeds, of each of ``names`` at every length of ``scored``
    (`extrapolate`), then the runs of ``scored_back`` (numbered back), then the ridge refitted
    at each length and the weekly naive; at the longest length, each row's verdict against
    the weekly naive and against the ridge refitted there (`Comparison.judgement`)."""
    factors = sorted(scored)
    last = factors[-1]
    back = [name for name, e in scored_back[last].entries.items() if e.trained]
    rows = []
    for name in [*names, *back]:
        source = scored_back if name in back else scored
        cells = ["cannot run" if source[f].failed(name) else mean_range(source[f][name].values())
                 for f in factors]
        verdicts = ["-" if source[last].failed(name) else source[last].judgement(name, ref)
                    for ref in (NAIVE, RIDGE)]
        rows.append((name, *cells, *verdicts))
    rows.append(("ridge, fitted at each length", *(f"{scored[f].mean(RIDGE):.3f}" for f in factors),
                 scored[last].judgement(RIDGE, NAIVE), "reference"))
    rows.append(("weekly naive", *(f"{scored[f].mean(NAIVE):.3f}" for f in factors), "reference", "-"))
    hours = [f"{f * LOOKBACK:,} h" for f in factors]
    table(["model", *hours, f"vs weekly naive at {hours[-1]}", f"vs ridge at {hours[-1]}"], rows,
          caption=caption,
          notes=["Counted back: the same trained runs with their tokens numbered back from the "
                 "forecast origin. Cannot run: a learned table has no row for the extra tokens.",
                 legend(scored[last])])


# --- the calendar -----------------------------------------------------------------------------

# The columns of `labsupport.data.time_features` (with the holiday flag), by what they encode.
CALENDAR_COLUMNS = {"hour": (0, 1), "weekday": (2, 3), "season": (4, 5), "holiday": (6,)}
CALENDAR_WORDS = {"hour": "the hour", "weekday": "the weekday", "season": "the season",
                  "holiday": "the holiday flag"}


class CalendarColumns(nn.Module):
    """A forecaster handed only the calendar ``columns`` of the time features it is given:
    ``forward(x, time)`` with ``time (B, L + T, 7)`` calls ``model(x, time[..., columns])``."""

    def __init__(self, model: PatchTransformer, columns):
        super().__init__()
        self.model, self.revin, self.columns = model, model.revin, list(columns)

    def forward(self, x, time):
        return self.model(x, time[..., self.columns])


def calendar_trainables(name: str, *, width: int, without=("hour", "weekday", "holiday")) -> dict:
    """{variant: Trainable} for a calendar task (``book_task(calendar=True)``): encoding ``name``
    of `forecaster` with every calendar column ("calendar"), then with all but each group of
    ``without`` ("calendar without the hour", ...)."""
    every = [c for cols in CALENDAR_COLUMNS.values() for c in cols]
    variants = {"calendar": every}
    for group in without:
        if group not in CALENDAR_COLUMNS:
            raise ValueError(f"without names {group!r}; the groups are {list(CALENDAR_COLUMNS)}")
        dropped = CALENDAR_COLUMNS[group]
        variants[f"calendar without {CALENDAR_WORDS[group]}"] = [c for c in every if c not in dropped]

    def build(columns, revin):
        model = forecaster(name, revin=revin, width=width, time_features=len(columns))
        return CalendarColumns(model, columns)
    return {variant: Trainable(partial(build, columns)) for variant, columns in variants.items()}


def holiday_days(calendar_task, *, lookback: int = LOOKBACK):
    """For the test windows of a ``book_task(calendar=True)``: ``(flagged, holiday)``, the number
    of target hours flagged as a public holiday on each test day (N,) and whether most of them
    are (N,) bool. The flag is the last calendar feature."""
    (_, time), _ = calendar_task.test
    flagged = (time[:, lookback:, -1] > 0).sum(dim=1)                   # (N,)
    return flagged, flagged > time.shape[1] - lookback - flagged        # most of the 24 hours


def first_test_day() -> np.datetime64:
    """The day of the first test forecast (the test part's first hour)."""
    return np.datetime64(VAL_END, "D")


def days_table(errors: dict, subsets: dict, *, caption: str | None = None) -> None:
    """Mean (min-max) over runs of each model's test MSE on each subset of days: ``errors`` maps a
    model to its runs' per-day errors (each (N,), one test window per day), ``subsets`` a column
    name to a bool (N,)."""
    table(["model", *subsets],
          [(name, *(mean_range([e[days].mean().item() for e in runs]) for days in subsets.values()))
           for name, runs in errors.items()], caption=caption)


# --- figures ----------------------------------------------------------------------------------

def _shade_training(ax, trained_tokens: int, label: str = "offsets of a training window"):
    ax.axvspan(-0.5, trained_tokens - 0.5, color="0.9", zorder=0, label=label)


def rope_figure(*, head_dim: int = 8, trained_tokens: int = 14, tested_tokens: int = 56,
                base: float = 10000.0):
    """RoPE's rotation, for one head of ``head_dim``: left, where each pair of coordinates of a
    unit vector lands as the offset grows (filled: the offsets of a training window; open: the
    further ones of a longer window); right, each pair's angle against the offset, with the
    largest angle a training window reaches."""
    theta = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)    # (D/2,)
    offsets = torch.arange(tested_tokens, dtype=torch.float64)
    angles = (offsets[:, None] * theta).numpy()                                        # (n, D/2)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 3.9))
    circle = np.linspace(0, 2 * np.pi, 200)
    for i, rate in enumerate(theta.tolist()):
        radius, colour = 1.0 - 0.2 * i, plots.PALETTE[i % len(plots.PALETTE)]
        a = angles[:, i]
        left.plot(radius * np.cos(circle), radius * np.sin(circle), color="0.85", lw=0.8)
        left.plot(radius * np.cos(a[:trained_tokens]), radius * np.sin(a[:trained_tokens]), "o", ms=4,
                  color=colour)
        left.plot(radius * np.cos(a[trained_tokens:]), radius * np.sin(a[trained_tokens:]), "o", ms=4,
                  mfc="none", color=colour, alpha=0.6)
        right.plot(offsets[1:].numpy(), a[1:], color=colour, label=f"pair {i}: {rate:g} rad per step")
        right.axhline(a[trained_tokens - 1], ls=":", lw=1, color=colour)
    left.set_aspect("equal")
    left.set(xlabel="coordinate 2i of a rotated unit vector", ylabel="coordinate 2i + 1",
             title=f"filled: offsets 0-{trained_tokens - 1}; open: {trained_tokens}-{tested_tokens - 1}")
    _shade_training(right, trained_tokens)
    right.axhline(2 * np.pi, ls="--", color="0.3", lw=1)
    right.text(tested_tokens - 1, 2 * np.pi * 1.15, "one full turn", ha="right", va="bottom", fontsize=8)
    right.set_yscale("log")
    right.set(xlabel="offset m - n (tokens)", ylabel="angle turned (rad, log scale)",
              title="Dotted: the largest angle of a training window")
    right.legend(fontsize=7, loc="lower right")
    return fig


def alibi_figure(*, heads: int = 4, trained_tokens: int = 14, tested_tokens: int = 56):
    """ALiBi for a forecaster of ``heads`` heads, numbered 1 .. H as in m_h = 2^(-8h/H): left, the
    bias the second head adds to a causal window's scores (query by key); right, every head's
    bias against the offset, with the offsets of a training window shaded."""
    bias = alibi_bias(heads, trained_tokens, dtype=torch.float64)                     # (H, L, L)
    causal = torch.ones(trained_tokens, trained_tokens).tril().bool()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 3.4))
    shown = bias[1].masked_fill(~causal, float("nan"))                             # the second head
    plots.heatmap(left, shown, xlabel="key position j", ylabel="query position i",
                  colorbar="bias added to the score", cmap="cividis",
                  title=f"Head 2 of {heads}: $-m_2\\,|i - j|$ (causal: j ≤ i)")
    offsets = torch.arange(tested_tokens, dtype=torch.float64)
    for h, slope in enumerate(alibi_slopes(heads, dtype=torch.float64).tolist(), start=1):
        right.plot(offsets.numpy(), -slope * offsets.numpy(), color=plots.PALETTE[h - 1],
                   label=f"head {h}: $m_{h}$ = 1/{round(1 / slope)}")
    _shade_training(right, trained_tokens)
    right.set(xlabel="offset i - j (tokens)", ylabel="bias added to the score",
              title="Every head's bias by offset")
    right.legend(fontsize=8)
    return fig


def t5_figure(*, trained_tokens: int = 14, tested_tokens: int = 56, shown: int = 160):
    """T5's one-sided buckets (32 buckets, maximum distance 128): left, the bucket of every
    offset up to ``shown``; right, the buckets a causal window of ``tested_tokens`` reads,
    query by key, with the buckets a ``trained_tokens`` window never reaches outlined."""
    offsets = torch.arange(shown)
    buckets = relative_position_bucket(offsets)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 3.4))
    left.step(offsets.numpy(), buckets.numpy(), where="post", color=plots.PALETTE[0])
    _shade_training(left, trained_tokens)
    left.axvline(tested_tokens - 0.5, ls="--", color="0.4", lw=1,
                 label=f"largest offset of a {tested_tokens}-token window")
    left.set(xlabel="offset i - j (tokens)", ylabel="bucket (a learned scalar per head)",
             title="One bucket per offset up to 15, then logarithmic")
    left.legend(fontsize=8, loc="lower right")
    left.set_ylim(-1, 33)
    grid = relative_position_bucket(torch.arange(tested_tokens)[:, None] - torch.arange(tested_tokens))
    causal = torch.ones(tested_tokens, tested_tokens).tril().bool()
    plots.heatmap(right, grid.double().masked_fill(~causal, float("nan")), xlabel="key position j",
                  ylabel="query position i", colorbar="bucket", cmap="cividis",
                  title=f"A {tested_tokens}-token causal window")
    right.contour((grid >= trained_tokens).double(), levels=[0.5], colors="white", linewidths=1.2)
    right.text(2, tested_tokens - 3, f"below the white line: buckets that no\n{trained_tokens}-token "
               "window reads", color="white", fontsize=8, va="bottom")
    return fig


def extrapolation_figure(scored, scored_back, names, *, naive_level: float):
    """Test MSE (mean over seeds) against the test window's length: tokens numbered from the
    window's start (left) and back from the forecast origin (right, for the encodings in
    ``scored_back``; the others are the same in both panels). ``scored``: {factor: Comparison}
    of `extrapolate`; ``scored_back``: the same of the counted-back runs."""
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.7), sharey=True)
    factors = sorted(scored)
    hours = [f * LOOKBACK for f in factors]
    for ax, back in zip(axes, (False, True)):
        for name, colour, marker in zip(names, plots.PALETTE, plots.MARKERS):
            key = f"{name}, counted back"
            source = scored_back if back and key in scored_back[factors[-1]].entries else scored
            key = key if source is scored_back else name
            points = [(h, source[f].mean(key)) for h, f in zip(hours, factors) if not source[f].failed(key)]
            if points:
                ax.plot(*zip(*points), marker=marker, color=colour, label=name)
        ax.plot(hours, [scored[f].mean(RIDGE) for f in factors], ls="--", marker="x", color="dimgrey",
                label="ridge, fitted at each length")
        ax.axhline(naive_level, ls=":", color="darkgrey", label="weekly naive")
        ax.set_xscale("log", base=2)
        ax.set_xticks(hours, [f"{h:,} h" for h in hours])
        ax.minorticks_off()
        ax.set_xlabel("window length at test time (trained on 336 h)")
        ax.set_title("numbered back from the forecast origin" if back else "numbered from the window's start")
    axes[0].set_ylabel("test MSE (scaled), mean over seeds")
    axes[0].legend(ncols=2, fontsize=7)
    return fig
