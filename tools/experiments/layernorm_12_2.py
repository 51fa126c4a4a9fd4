"""Section 12.2: does layer normalisation keep the scale in check? Two measurements on
the notebook's 12-block forecaster (daily patches, width 32, 4 heads), four versions
(no residual and no LayerNorm, residual without LayerNorm, post-norm, pre-norm):

1. the scale of the residual stream after each block at initialisation (RMS over a
   batch of 256 training windows), and of the block's sub-layer input;
2. 120 Adam steps (batch 64, no warm-up) at several learning rates and seeds: the final
   training MSE (mean of the last 20 steps), and how many runs diverge (NaN or > 1).

    OMP_NUM_THREADS=1 python -m tools.experiments.layernorm_12_2 --lrs 1e-3 1e-2 --seeds 0 1 2
"""
from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from labsupport.data import HORIZON, book_task, patchify
from labsupport.layers import TransformerEncoder
from labsupport.train import set_seed

VERSIONS = {
    "no residual, no LayerNorm": dict(residual=False, layer_norm=False),
    "residual, no LayerNorm": dict(layer_norm=False),
    "post-norm": dict(norm_first=False),
    "pre-norm": dict(norm_first=True),
}


class DeepForecaster(nn.Module):
    """12.2's model: daily patches -> a deep encoder -> a forecast from the last token."""

    def __init__(self, depth=12, d_model=32, **block_options):
        super().__init__()
        self.embed = nn.Linear(24, d_model)
        self.position = nn.Parameter(0.02 * torch.randn(27, d_model))
        self.encoder = TransformerEncoder(d_model, 4, depth, 64, **block_options)
        self.head = nn.Linear(d_model, HORIZON)

    def forward(self, x):                                  # x (B, 336, 1)
        tokens = self.embed(patchify(x[..., 0], 24, 12)) + self.position
        h = self.encoder(tokens, is_causal=True)           # (B, 27, d)
        return self.head(h[:, -1])[..., None]              # (B, 24, 1)


def stream_scale(model, x):
    """RMS of the residual stream leaving each block, (depth,)."""
    scales = []
    hooks = [block.register_forward_hook(lambda m, i, out: scales.append(out.pow(2).mean().sqrt().item()))
             for block in model.encoder.layers]
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return scales


def train_steps(model, task, lr, steps, seed):
    g = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        batch = torch.randint(0, len(task.train[0]), (64,), generator=g)
        loss = F.mse_loss(model(task.train[0][batch]), task.train[1][batch])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    return float(np.mean(losses[-20:]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lrs", nargs="+", type=float, default=[1e-3, 1e-2])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    task = book_task(train_stride=2)
    order = torch.randperm(len(task.train[0]), generator=torch.Generator().manual_seed(0))
    probe = task.train[0][order[:256]]
    print("residual-stream RMS after blocks 1, 3, 6, 9, 12 at initialisation (seed 0)")
    for name, options in VERSIONS.items():
        set_seed(0)
        s = stream_scale(DeepForecaster(**options), probe)
        print(f"  {name:26s} " + "  ".join(f"{s[i]:8.2f}" for i in (0, 2, 5, 8, 11)))
    print(f"\nfinal training MSE (mean of the last 20 of {args.steps} steps), seeds {args.seeds}")
    for lr in args.lrs:
        for name, options in VERSIONS.items():
            finals, t0 = [], time.perf_counter()
            for seed in args.seeds:
                set_seed(seed)
                finals.append(train_steps(DeepForecaster(**options), task, lr, args.steps, seed))
            bad = sum(1 for f in finals if not math.isfinite(f) or f > 1.0)
            ok = [f for f in finals if math.isfinite(f)]
            print(f"  lr {lr:g} {name:26s} mean {statistics.fmean(ok) if ok else float('nan'):.3f} "
                  f"(min {min(ok, default=float('nan')):.3f}, max {max(ok, default=float('nan')):.3f}); "
                  f"diverged {bad}/{len(finals)}; {(time.perf_counter() - t0) / len(finals):.1f} s/run")


if __name__ == "__main__":
    main()
