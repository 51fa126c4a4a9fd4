"""The plumbing of 12.5's studies: counting what operators read and write (`OpTraffic`), the
figure of a tiled loop's tiles (`draw_tiles`), and where a kernel of a cost sweep overtakes
another (`faster_from`)."""
from __future__ import annotations

import torch
from matplotlib.patches import Rectangle
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["OpTraffic", "draw_tiles", "faster_from"]


class OpTraffic(TorchDispatchMode):
    """Inside ``with OpTraffic() as count:``, ``count.numbers`` is the number of tensor elements
    every operator read (its tensor arguments) and wrote (the tensors it allocated): the
    main-memory traffic of a program whose every step is a round trip to memory. Views
    (a transpose, a reshape) move nothing and are not counted.

    >>> q = k = v = torch.ones(8, 4)
    >>> with OpTraffic() as count:
    ...     out = (q @ k.T / 2).softmax(-1) @ v
    >>> count.numbers == 6 * 8 * 8 + 4 * 8 * 4
    True
    """

    def __init__(self):
        super().__init__()
        self.numbers = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if all(ret.alias_info is None for ret in func._schema.returns):
            outs = out if isinstance(out, (tuple, list)) else (out,)
            self.numbers += sum(a.numel() for a in args if isinstance(a, torch.Tensor))
            self.numbers += sum(t.numel() for t in outs if isinstance(t, torch.Tensor))
        return out


def draw_tiles(ax, blocks: int, current: tuple[int, int], colours) -> None:
    """The score matrix as ``blocks`` x ``blocks`` tiles in the order of 12.4's tiled loop
    (blocks of queries outside, blocks of keys inside): the tiles done, the ``current`` one
    (query block i, key block j) and those to come, with Q's blocks down the left and K's
    across the top; ``colours`` = (done, current, the blocks in fast memory)."""
    done, now, held = colours
    i, j = current
    for r in range(blocks):
        for c in range(blocks):
            order = r * blocks + c
            face = now if (r, c) == (i, j) else done if order < i * blocks + j else "white"
            ax.add_patch(Rectangle((c + 1.3, blocks - r - 1), 1, 1, facecolor=face, edgecolor="0.4", lw=0.8))
    for r in range(blocks):                                             # Q's blocks, down the left
        ax.add_patch(Rectangle((0, blocks - r - 1), 0.8, 1, facecolor=held if r == i else "white",
                               edgecolor="0.4", lw=0.8))
    for c in range(blocks):                                             # K's blocks, across the top
        ax.add_patch(Rectangle((c + 1.3, blocks + 0.3), 1, 0.8, facecolor=held if c == j else "white",
                               edgecolor="0.4", lw=0.8))
    ax.text(0.4, blocks + 0.7, "Q", ha="center", va="center")
    ax.text(0.4, blocks - i - 0.5, f"$Q_{i + 1}$", ha="center", va="center", fontsize=8)
    ax.text(j + 1.8, blocks + 0.7, f"$K_{j + 1}, V_{j + 1}$", ha="center", va="center", fontsize=8)
    ax.text(blocks / 2 + 1.3, blocks + 1.45, "keys, in blocks (inner loop)", ha="center", va="bottom",
            fontsize=8)
    ax.text(-0.35, blocks / 2, "queries, in blocks (outer loop)", rotation=90, ha="center", va="center",
            fontsize=8)
    ax.annotate("", xy=(blocks + 1.2, blocks - i - 0.5), xytext=(j + 2.4, blocks - i - 0.5),
                arrowprops=dict(arrowstyle="->", color="0.2", lw=1))
    ax.set_xlim(-0.7, blocks + 1.5)
    ax.set_ylim(-0.2, blocks + 2.0)
    ax.set_aspect("equal")
    ax.axis("off")


def faster_from(rows, name: str, reference: str = "sdpa") -> int | None:
    """The shortest length of a `labsupport.timing.cost_sweep` from which ``name``'s fastest
    repetition beat ``reference``'s at every longer length where both ran; None if at none."""
    def times(kernel):
        return {r["length"]: r["time_min"] for r in rows if r["kernel"] == kernel and r["status"] == "ok"}
    mine, theirs = times(name), times(reference)
    lengths = sorted(set(mine) & set(theirs))
    wins = [mine[n] < theirs[n] for n in lengths]
    return next((lengths[i] for i in range(len(wins)) if all(wins[i:])), None)
