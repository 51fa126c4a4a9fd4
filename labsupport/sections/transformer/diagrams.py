"""12.2's two diagrams, drawn with matplotlib: the block in both placements of its
normalisation (`block_diagram`) and the encoder-decoder (`encoder_decoder_diagram`).

>>> import matplotlib
>>> matplotlib.use("Agg")
>>> len(block_diagram().axes), len(encoder_decoder_diagram().axes)
(2, 1)
"""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Circle, FancyBboxPatch, Rectangle

from ...plots import OKABE_ITO

__all__ = ["block_diagram", "encoder_decoder_diagram"]

FILL = {"attention": "#cfe3f3", "feed-forward": "#fbe0bf", "norm": "#e6e6e6", "embed": "#e2f0d9",
        "head": "#e2f0d9"}
STREAM = OKABE_ITO["vermillion"]        # the residual stream
WIDTH, HEIGHT = 4.2, 0.8


def _box(ax, x, y, text, kind, width=WIDTH, height=HEIGHT):
    """A rounded box centred at (x, y)."""
    ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                                boxstyle="round,pad=0.02,rounding_size=0.15", facecolor=FILL[kind],
                                edgecolor="0.3", linewidth=1))
    ax.text(x, y, text, ha="center", va="center", fontsize=8.5)


def _arrow(ax, start, end, color="0.25", lw=1.1):
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle="-|>", color=color, lw=lw, shrinkA=0, shrinkB=0,
                                mutation_scale=9))


def _plus(ax, x, y, r=0.22):
    ax.add_patch(Circle((x, y), r, facecolor="white", edgecolor=STREAM, linewidth=1.4, zorder=3))
    ax.text(x, y - 0.02, "+", ha="center", va="center", fontsize=10, color=STREAM, zorder=4)


STREAM_X, BRANCH_X = 1.9, 5.5


def _branch(ax, y_from, boxes, y_to):
    """A residual branch: off the stream at y_from, through ``boxes`` [(y, text, kind)] beside
    it, back into the + on the stream at y_to."""
    ax.plot([STREAM_X, BRANCH_X], [y_from, y_from], color="0.25", lw=1.1)
    previous = y_from
    for y, text, kind in boxes:
        _arrow(ax, (BRANCH_X, previous), (BRANCH_X, y - HEIGHT / 2))
        _box(ax, BRANCH_X, y, text, kind, width=3.4)
        previous = y + HEIGHT / 2
    ax.plot([BRANCH_X, BRANCH_X], [previous, y_to], color="0.25", lw=1.1)
    _arrow(ax, (BRANCH_X, y_to), (STREAM_X + 0.22, y_to))
    _plus(ax, STREAM_X, y_to)


def _stream(ax, steps, title):
    """The residual stream bottom to top through ``steps``: ("branch", y_from, boxes, y_to) or
    ("norm", y) (a LayerNorm on the stream itself)."""
    ax.set(xlim=(0.3, 7.6), ylim=(-0.3, 9.7), aspect="equal")
    ax.axis("off")
    ax.set_title(title, fontsize=10)
    ax.text(STREAM_X, 0.05, "input x", ha="center", va="center", fontsize=8.5)
    previous = 0.3
    for step in steps:
        if step[0] == "branch":
            _, y_from, boxes, y_to = step
            ax.plot([STREAM_X, STREAM_X], [previous, y_to - 0.22], color=STREAM, lw=2)
            _branch(ax, y_from, boxes, y_to)
            previous = y_to + 0.22
        else:
            y = step[1]
            ax.plot([STREAM_X, STREAM_X], [previous, y - HEIGHT / 2], color=STREAM, lw=2)
            _box(ax, STREAM_X, y, "LayerNorm", "norm", width=2.2)
            previous = y + HEIGHT / 2
    _arrow(ax, (STREAM_X, previous), (STREAM_X, previous + 0.6), color=STREAM, lw=2)
    ax.text(STREAM_X, previous + 0.85, "output", ha="center", va="center", fontsize=8.5)


def block_diagram():
    """Figure: the encoder block, post-norm (left) and pre-norm (right); the residual stream
    in colour, each sub-layer a branch beside it."""
    fig, (post, pre) = plt.subplots(1, 2, figsize=(7.4, 4.9))
    _stream(post, [("branch", 0.8, [(1.9, "multi-head self-attention", "attention")], 3.0), ("norm", 3.9),
                   ("branch", 4.8, [(5.9, "feed-forward network", "feed-forward")], 7.0), ("norm", 7.9)],
            "post-norm (the original Transformer)")
    attention = [(1.7, "LayerNorm", "norm"), (2.9, "multi-head self-attention", "attention")]
    feed_forward = [(5.6, "LayerNorm", "norm"), (6.8, "feed-forward network", "feed-forward")]
    _stream(pre, [("branch", 0.8, attention, 3.9), ("branch", 4.7, feed_forward, 7.8)],
            "pre-norm (this book)")
    return fig


def _column(ax, x, title, boxes, bottom_text, top_text, repeat):
    """A stack of boxes [(y, text, kind)], a dashed frame around the repeated block, labels."""
    ax.text(x, 0.2, bottom_text, ha="center", va="center", fontsize=8.5)
    previous = 0.5
    for y, text, kind in boxes:
        _arrow(ax, (x, previous), (x, y - HEIGHT / 2))
        _box(ax, x, y, text, kind)
        previous = y + HEIGHT / 2
    if top_text:
        _arrow(ax, (x, previous), (x, previous + 0.6))
        ax.text(x, previous + 0.85, top_text, ha="center", va="center", fontsize=8.5)
    low, high = repeat
    ax.add_patch(Rectangle((x - WIDTH / 2 - 0.3, low), WIDTH + 0.6, high - low, fill=False,
                           edgecolor="0.45", linestyle="--", linewidth=1))
    ax.text(x + WIDTH / 2 + 0.4, high - 0.1, "× N", ha="left", va="top", fontsize=8.5, color="0.3")
    ax.text(x, 8.9, title, ha="center", va="center", fontsize=10, weight="bold")


def encoder_decoder_diagram():
    """Figure: the encoder-decoder; each sub-layer is a residual branch with its LayerNorm."""
    fig, ax = plt.subplots(figsize=(7.6, 4.9))
    ax.set(xlim=(0, 12.6), ylim=(-0.1, 9.2), aspect="equal")
    ax.axis("off")
    enc, dec = 3.0, 9.3
    _column(ax, enc, "encoder", [(1.3, "embed + position", "embed"),
                                 (2.9, "self-attention", "attention"),
                                 (4.3, "feed-forward network", "feed-forward")],
            "the input window (days as tokens)", None, (2.2, 5.0))
    _column(ax, dec, "decoder", [(1.3, "embed + position", "embed"),
                                 (2.9, "causal self-attention", "attention"),
                                 (4.3, "cross-attention", "attention"),
                                 (5.7, "feed-forward network", "feed-forward"),
                                 (7.1, "linear head", "head")],
            "the outputs so far, shifted right by one", "the next output, at every position", (2.2, 6.4))
    top, turn = 5.7, 6.15
    ax.plot([enc, enc, turn, turn], [4.7, top, top, 4.3], color=STREAM, lw=1.6)
    _arrow(ax, (turn, 4.3), (dec - WIDTH / 2, 4.3), color=STREAM, lw=1.6)
    ax.text(enc, top + 0.35, "memory: one state per input token", ha="center", va="center", fontsize=8.5,
            color=STREAM)
    ax.text(turn + 0.15, 5.0, "keys and\nvalues", ha="left", va="center", fontsize=8, color=STREAM)
    ax.text(enc, 7.4, "every sub-layer is a residual\nbranch with its LayerNorm", ha="center",
            va="center", fontsize=8, color="0.35", style="italic")
    return fig
