"""Interactive explorers for a live kernel (ipywidgets, imported only when called), each
built on a plain figure function that the book also shows statically.

>>> fig = encoding_figure("rope", d_model=16, length=32)
>>> len(fig.axes) >= 2
True
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from . import plots
from .positional import (RotaryEmbedding, alibi_bias, relative_position_bucket, sinusoidal_encoding)

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
