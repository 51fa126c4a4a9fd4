"""Section 12.2: one head against four in the notebook's lag reader (cross-attention from
24 learned queries to 192 hourly keys), with the comparison protocol: seeds, spread,
ridge and weekly naive on the same 192-hour windows.

    OMP_NUM_THREADS=1 python -m tools.experiments.heads_12_2 --seeds 3 --epochs 15 --patience 15

Also prints the cost model: the four projections cost 4 d^2 per token whatever H is;
the scores are H matrices of 24 x 192 (H times the softmax and the weights' memory).
"""
from __future__ import annotations

import argparse

import torch
from torch import nn

from labsupport.compare import Trainable, compare
from labsupport.data import HORIZON, book_task
from labsupport.layers import MultiHeadAttention
from tools.experiments._common import make_schedule

HISTORY = 192


class LagReader(nn.Module):
    """Each forecast hour queries the hourly history (cross-attention), as in 12.2."""

    def __init__(self, n_heads, d_model=32, kernel="naive"):
        super().__init__()
        self.embed = nn.Linear(1, d_model)
        self.position = nn.Parameter(0.1 * torch.randn(HISTORY + HORIZON, d_model))
        self.attn = MultiHeadAttention(d_model, n_heads, kernel=kernel)
        self.decode = nn.Linear(d_model, 1)

    def forward(self, x):                                  # x (B, 192, 1)
        keys = self.embed(x) + self.position[:HISTORY]     # (B, 192, d)
        queries = self.position[HISTORY:].expand(len(x), -1, -1)   # (B, 24, d)
        return self.decode(self.attn(queries, keys))       # (B, 24, 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--patience", type=int, default=15)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--stride", type=int, default=3)
    parser.add_argument("--kernel", default="naive")
    parser.add_argument("--schedule", default="constant", help="constant, cosine, cosine0, type1, type3")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    d, L, S = 32, HORIZON, HISTORY
    for H in (1, 4):
        print(f"{H} head(s): projections 4 d^2 = {4 * d * d:,} multiply-adds per token; "
              f"scores {H} x {L} x {S} = {H * L * S:,} entries per window")
    task = book_task(lookback=HISTORY, train_stride=args.stride)
    models = {f"{h} head(s)": Trainable(lambda revin, h=h: LagReader(h, kernel=args.kernel))
              for h in (1, 4)}
    result = compare(task, models, revin=False, seeds=args.seeds, epochs=args.epochs,
                     patience=args.patience, lr=args.lr, batch_size=256, progress=False,
                     schedule=make_schedule(args.schedule, args.epochs))
    result.table()
    for name in models:
        print(f"  {name}: best val MSE by seed "
              + ", ".join(f"{r.best_val_loss:.3f}" for r in result[name].records))
    result.verdict("4 head(s)", "1 head(s)")
    result.verdicts()


if __name__ == "__main__":
    main()
