"""One figure style for the whole book: colour-blind-safe colours, labelled axes, small files.

Colours are the Okabe-Ito palette (distinguishable with every common colour-vision
deficiency); sequential maps are ``viridis``/``cividis``, which stay ordered in grey.
"""
from __future__ import annotations

import matplotlib as mpl
import numpy as np
from cycler import cycler

from .scaling import fit_power_law

OKABE_ITO = {
    "blue": "#0072B2", "orange": "#E69F00", "green": "#009E73", "vermillion": "#D55E00",
    "sky": "#56B4E9", "purple": "#CC79A7", "yellow": "#F0E442", "black": "#000000",
}
# Eight colours, eight markers: a figure of up to eight series gives each its own pair.
# Yellow comes last: the lightest on a white page, for the eighth series only.
PALETTE = [OKABE_ITO[c] for c in ("blue", "orange", "green", "vermillion", "sky", "purple", "black",
                                  "yellow")]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


def use_book_style() -> None:
    """Apply the book's matplotlib style (call once, in a notebook's first cells)."""
    mpl.rcParams.update({
        "figure.figsize": (6.4, 3.4),
        "figure.dpi": 120,
        "savefig.dpi": 120,
        "figure.constrained_layout.use": True,
        "axes.prop_cycle": cycler(color=PALETTE),
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "font.size": 10,
        "axes.titlesize": 10,
        "legend.fontsize": 9,
        "legend.frameon": False,
        "image.cmap": "viridis",
    })


def heatmap(ax, matrix, *, xlabel: str, ylabel: str, title: str | None = None,
            colorbar: str | None = None, cmap: str = "viridis", **kwargs):
    """Show a 2-D array (e.g. attention weights, rows = queries) with labelled axes."""
    m = np.asarray(matrix.detach().cpu() if hasattr(matrix, "detach") else matrix)
    image = ax.imshow(m, cmap=cmap, aspect="auto", interpolation="nearest", **kwargs)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(False)
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label=colorbar)
    return image


def loglog_fit(ax, x, y, *, label: str, fit_last: int | None = None, color=None, marker="o"):
    """Plot measurements on log-log axes with their fitted power law; return the exponent."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    exponent, prefactor = fit_power_law(x, y, last=fit_last)
    line = ax.loglog(x, y, marker=marker, linestyle="-", color=color,
                     label=f"{label} (slope {exponent:.2f})")[0]
    ax.loglog(x, prefactor * x ** exponent, linestyle=":", color=line.get_color())
    return exponent
