"""Explorers that work without a kernel, each built on a plain figure function that the
book also shows statically.

An explorer is one self-contained HTML output (`Explorer`): the figure function's output
for the default setting as an ``<img>`` (a base64 PNG: it shows wherever HTML does, with
no script: GitHub, nbviewer, an untrusted notebook), and a small inline script, with no
library and nothing fetched, that builds the controls and swaps the image among frames
precomputed in the run, one per value each control offers. The text form is a one-line
description. ``live=True`` returns the ipywidgets version instead (a live kernel: any
value, not only the precomputed ones).

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

import base64
import html
import io
import itertools
import json
import uuid
from dataclasses import dataclass, field

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


# --- the static explorer: precomputed frames, plain HTML controls, a small script -----

FRAME_DPI = 72            # the frames' resolution: legible in the page, a few dozen per explorer
FRAME_COLORS = 128        # each frame is stored with a palette of this many colours (3-4x smaller)
MAX_FRAMES = 40           # a larger grid is refused: offer fewer values instead
SAVEFIG = dict(format="png", dpi=FRAME_DPI, metadata={"Software": None})


def figure_png(fig) -> bytes:
    """A figure as the explorers store their frames: saved with `SAVEFIG` (the book's
    figures lay themselves out: no tight box, one draw), reduced to `FRAME_COLORS` colours
    and written as an optimised PNG. Closes the figure, so that an inline backend does not
    draw it again under the cell."""
    from PIL import Image

    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, **SAVEFIG)
    finally:
        plt.close(fig)
    image = Image.open(buffer).convert("RGB").quantize(
        colors=FRAME_COLORS, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    out = io.BytesIO()
    image.save(out, format="png", optimize=True)
    return out.getvalue()


@dataclass
class Explorer:
    """One explorer as a self-contained output: ``html`` (the default frame as an <img>,
    the controls and the script that swaps the frames), ``text`` (its plain-text form),
    ``frames`` (PNG bytes, each once), ``table`` (control indices joined by "," -> frame),
    ``controls`` (name, label and the values each offers) and ``seconds`` (the time it took
    to draw). Displayed in a notebook it is its HTML; ``nbytes`` is what it adds to a page."""
    html: str
    text: str
    frames: list
    table: dict
    controls: list
    default: str
    seconds: float = 0.0
    element_id: str = field(default="")

    @property
    def nbytes(self) -> int:
        return len(self.html.encode())

    @property
    def default_png(self) -> bytes:
        return self.frames[self.table[self.default]]

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/html": self.html, "text/plain": self.text}

    def __repr__(self) -> str:
        return self.text


# The script: no library, nothing fetched. It finds its explorer by id (the element just
# before it, as Altair's HTML output does, else by id: JupyterLab, Colab, VS Code and the
# book all run it where the output is trusted), builds one control per entry, and on each
# change looks up the frame of the chosen values.
_SCRIPT = """(function () {
  var D = %(data)s, s = document.currentScript;
  function start(tries) {
    var root = s && s.previousElementSibling;
    if (!root || root.id !== D.id) root = document.getElementById(D.id);
    if (!root) { if (tries < 50) setTimeout(function () { start(tries + 1); }, 100); return; }
    if (root.getAttribute("data-ready")) return;
    var img = root.querySelector("img"), box = root.querySelector(".lab-explorer-controls");
    var inputs = [];
    function update() {
      var key = inputs.map(function (c) { return c.value; }).join(",");
      var k = D.table[key];
      img.src = "data:image/png;base64," + D.frames[k];
      img.alt = D.alts[key];
      img.setAttribute("data-frame", k);
      inputs.forEach(function (c, i) { if (c.out) c.out.textContent = D.controls[i].labels[c.value]; });
    }
    D.controls.forEach(function (c) {
      var label = document.createElement("label"), input;
      label.style.marginRight = "1.5em";
      label.appendChild(document.createTextNode(c.label + " "));
      if (c.kind === "range") {
        input = document.createElement("input");
        input.type = "range"; input.min = 0; input.max = c.labels.length - 1; input.step = 1;
        input.out = document.createElement("output");
        input.out.style.marginLeft = "0.4em";
      } else {
        input = document.createElement("select");
        c.labels.forEach(function (text, i) {
          var o = document.createElement("option"); o.value = i; o.textContent = text;
          input.appendChild(o);
        });
      }
      input.name = c.name;
      input.value = c.start;
      input.addEventListener("input", update);
      input.addEventListener("change", update);
      label.appendChild(input);
      if (input.out) label.appendChild(input.out);
      box.appendChild(label);
      inputs.push(input);
    });
    box.style.margin = "0.3em 0";
    root.querySelector(".lab-explorer-note").textContent = D.note;
    update();
    root.setAttribute("data-ready", "1");
  }
  start(0);
})();"""


def _explorer(title: str, controls: list, draw, *, canonical=None, alt=None, describe: str) -> Explorer:
    """Draw every combination of the controls' values (each distinct figure once) and wrap
    the frames in one HTML output.

    ``controls``: dicts with ``name``, ``label``, ``values``, optional ``labels`` (the text
    shown for each value), ``default`` (a value) and ``kind`` ("select" or "range").
    ``draw(**values) -> Figure``; ``canonical(**values)`` maps a combination to the one
    that draws the same figure (values a figure ignores); ``alt(**values)`` its alt text.
    """
    import time

    started = time.perf_counter()
    for c in controls:
        c.setdefault("labels", [str(v) for v in c["values"]])
        c.setdefault("kind", "select")
        c.setdefault("default", c["values"][0])
    combos = list(itertools.product(*(range(len(c["values"])) for c in controls)))
    frames, index_of_bytes, drawn, table, alts = [], {}, {}, {}, {}
    for combo in combos:
        values = {c["name"]: c["values"][i] for c, i in zip(controls, combo)}
        key = tuple(sorted((canonical(**values) if canonical else values).items()))
        if key not in drawn:
            if len(drawn) >= MAX_FRAMES:
                raise ValueError(f"{title}: more than {MAX_FRAMES} distinct frames; offer fewer values")
            png = figure_png(draw(**dict(key)))
            drawn[key] = index_of_bytes.setdefault(png, len(frames))
            if drawn[key] == len(frames):
                frames.append(png)
        name = ",".join(map(str, combo))
        table[name] = drawn[key]
        alts[name] = alt(**values) if alt else f"{title}: " + ", ".join(
            f"{c['label']} {c['labels'][i]}" for c, i in zip(controls, combo))
    default = ",".join(str(c["values"].index(c["default"])) for c in controls)
    element_id = f"lab-explorer-{uuid.uuid4().hex[:12]}"
    text = f"{title}: {describe} ({len(frames)} precomputed frames)"
    note = (f"{len(frames)} frames precomputed when the notebook ran; "
            "with a live kernel, live=True gives the ipywidgets version (any value).")
    data = {"id": element_id, "frames": [base64.b64encode(f).decode() for f in frames],
            "table": table, "alts": alts, "note": note,
            "controls": [{"name": c["name"], "label": c["label"], "kind": c["kind"], "labels": c["labels"],
                          "start": c["values"].index(c["default"])} for c in controls]}
    script = _SCRIPT % {"data": json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")}
    first = table[default]
    body = (f'<div id="{element_id}" class="lab-explorer">'
            f'<div class="lab-explorer-controls"></div>'
            f'<img src="data:image/png;base64,{data["frames"][first]}" alt="{html.escape(alts[default])}" '
            f'data-frame="{first}" style="max-width:100%;height:auto">'
            f'<div class="lab-explorer-note" style="font-size:0.85em;color:#555">'
            f'{html.escape(title)}: the figure at its default setting. The controls appear where '
            f'the page may run scripts (the book, a trusted or running notebook).</div></div>'
            f'<script>{script}</script>')
    return Explorer(html=body, text=text, frames=frames, table=table,
                    controls=[{k: c[k] for k in ("name", "label", "values", "labels", "kind", "default")}
                              for c in controls],
                    default=default, seconds=time.perf_counter() - started, element_id=element_id)


def _show(explorer: Explorer, show: bool):
    """Display the explorer now (so that ``explorer(...);`` shows it) or return it."""
    if not show:
        return explorer
    from IPython.display import display

    display(explorer)
    return None


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


ENCODING_CHOICES = dict(d_model=(16, 64), length=(64, 128, 256), base=(10.0, 10000.0))


def encoding_explorer(*, live: bool = False, show: bool = True):
    """Choose an encoding and its settings; the figure follows (`encoding_figure`).

    Static (the default): every combination of the encodings and `ENCODING_CHOICES`
    precomputed, each distinct figure once (ALiBi and the T5 buckets ignore the width and
    the base). ``live=True``: the ipywidgets version, any width, length and base (needs a
    live kernel). ``show=False`` returns the `Explorer` instead of displaying it.
    """
    if live:
        return _live_encoding_explorer()
    defaults = dict(d_model=64, length=128, base=10000.0)

    def canonical(kind, d_model, length, base):
        if kind in ("alibi", "relative"):                      # width and base play no part
            d_model, base = defaults["d_model"], defaults["base"]
        return dict(kind=kind, d_model=d_model, length=length, base=base)

    def alt(kind, d_model, length, base):
        what = {"sinusoidal": f"sinusoidal table, width {d_model}, base {base:g}",
                "rope": f"one vector rotated by RoPE, width {d_model}, base {base:g}",
                "alibi": "ALiBi bias of 8 heads", "relative": "T5 relative-position buckets"}[kind]
        return f"Positional encoding over {length} positions: {what}, and how positions relate by offset"

    controls = [dict(name="kind", label="encoding", values=list(ENCODINGS)),
                dict(name="d_model", label="width d", values=list(ENCODING_CHOICES["d_model"]),
                     default=defaults["d_model"], kind="range"),
                dict(name="length", label="positions", values=list(ENCODING_CHOICES["length"]),
                     default=defaults["length"], kind="range"),
                dict(name="base", label="base", values=list(ENCODING_CHOICES["base"]),
                     labels=[f"{b:g}" for b in ENCODING_CHOICES["base"]], default=defaults["base"])]
    explorer = _explorer("Encoding explorer", controls, encoding_figure, canonical=canonical, alt=alt,
                         describe="choose an encoding, its width, the number of positions and the base")
    return _show(explorer, show)


def _live_encoding_explorer():
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


def attention_explorer(series, weights, *, queries=None, live: bool = False, show: bool = True,
                       **figure_options):
    """Pick a query and a head; the figure follows (`attention_figure`, with
    ``figure_options``).

    Static (the default): every head for the queries in ``queries`` (default: up to 6
    evenly spaced, the first and the last among them, fewer with more than 6 heads),
    precomputed. ``live=True``: the
    ipywidgets version, every query (needs a live kernel). ``show=False`` returns the
    `Explorer` instead of displaying it.
    """
    n_heads, n_queries = torch.as_tensor(weights).shape[:2]
    if live:
        return _live_attention_explorer(series, weights, n_heads, n_queries, **figure_options)
    if queries is None:
        count = max(2, min(n_queries, 6, MAX_FRAMES // n_heads))
        queries = sorted({int(q) for q in np.linspace(0, n_queries - 1, count).round()})
    queries = [int(q) for q in queries]
    offset = figure_options.get("query_offset")
    at = len(np.asarray(series).reshape(-1)) if offset is None else offset

    def draw(query, head):
        return attention_figure(series, weights, query=query, head=head, **figure_options)

    controls = [dict(name="query", label="query", values=queries, kind="range",
                     labels=[f"{q} (hour {at + q})" for q in queries]),
                dict(name="head", label="head", values=list(range(n_heads)))]
    explorer = _explorer(
        "Attention explorer", controls, draw,
        alt=lambda query, head: (f"Query {query} (hour {at + query}), head {head}: the series above, "
                                 "this head's attention weights over its hours below"),
        describe=f"{len(queries)} of {n_queries} queries, {n_heads} heads")
    return _show(explorer, show)


def _live_attention_explorer(series, weights, n_heads, n_queries, **figure_options):
    widgets = _require_ipywidgets()

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


def cost_explorer(sources, *, live: bool = False, show: bool = True):
    """Choose the metric and the kernels of saved sweeps; the plot follows (`cost_figure`).

    Static (the default): each metric with all kernels, or with one kernel alone (the
    first 12 kernels), precomputed. ``live=True``: the ipywidgets version, any set of kernels (needs a live
    kernel). ``show=False`` returns the `Explorer` instead of displaying it.
    """
    records = _sweeps(sources)
    names = list(dict.fromkeys(r["kernel"] for rec in records for r in rec["rows"]))
    if live:
        return _live_cost_explorer(records, names)

    def draw(metric, kernels):
        return cost_figure(records, metric=metric, kernels=names if kernels == _ALL else [kernels])

    alone = names[:MAX_FRAMES // len(METRICS) - 1]              # each kernel alone, as many as fit
    controls = [dict(name="metric", label="metric", values=list(METRICS), labels=list(METRICS.values())),
                dict(name="kernels", label="kernels", values=[_ALL, *alone],
                     labels=["all", *(f"{n} alone" for n in alone)])]
    machines = ", ".join(dict.fromkeys(rec.get("device", "?") for rec in records))
    explorer = _explorer(
        "Cost explorer", controls, draw,
        alt=lambda metric, kernels: (f"{METRICS[metric]} against sequence length, log-log, "
                                     f"{'every kernel' if kernels == _ALL else kernels}, "
                                     f"measured on {machines}"),
        describe=f"{len(records)} saved sweep(s), {len(names)} kernels, {len(METRICS)} metrics")
    return _show(explorer, show)


_ALL = "(all)"


def _live_cost_explorer(records, names):
    widgets = _require_ipywidgets()

    def show(metric, kernels):
        cost_figure(records, metric=metric, kernels=kernels or names)
        plt.show()

    return widgets.interact(
        show,
        metric=widgets.Dropdown(options=[(label, key) for key, label in METRICS.items()],
                                value="time_s", description="metric"),
        kernels=widgets.SelectMultiple(options=names, value=tuple(names), description="kernels"),
    )
