"""Training speed of the ETT benchmark's PatchTransformer: milliseconds per Adam step and
seconds per epoch of PatchTST's published model (`PatchTransformer.patchtst` at the official
ETTh sizes) and of the same model with the book's backbone, on generated windows shaped like
ETTh1's training set at T = 96 (8,209 windows there).

    python -m tools.experiments.epoch_speed                          # both backbones, default sizes
    python -m tools.experiments.epoch_speed --device cuda --reps 3   # on a GPU, three rounds

Timed with `labsupport.timing.time_call` (CUDA events, synchronised, on a GPU;
``perf_counter`` on the CPU): a step is forward, backward and Adam on one batch already on
the device; an epoch is one `labsupport.train.fit` epoch as the benchmark trains (batches
copied from the host, validation on one batch). The models are timed in turn, round after
round, so that a busy machine slows them alike; the ratio to PatchTST's step is what to
compare across machines.
"""
from __future__ import annotations

import argparse
import sys
from statistics import median

import torch
import torch.nn.functional as F

from labsupport.display import table
from labsupport.timing import time_call
from labsupport.train import fit, set_seed
from tools.benchmark.benchmark_ett import BACKBONES, LOOKBACK, device_option, int_option, patch_transformer

WINDOWS, CHANNELS, HORIZON, BATCH = 8192, 7, 96, 128


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.experiments.epoch_speed",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int_option("training windows per epoch"), default=WINDOWS,
                        help=f"training windows per epoch (default {WINDOWS:,})")
    parser.add_argument("--batch-size", type=int_option("windows per batch"), default=BATCH,
                        help=f"windows per batch (default {BATCH}, PatchTST's)")
    parser.add_argument("--horizon", type=int_option("steps to forecast"), default=HORIZON,
                        help=f"steps to forecast (default {HORIZON})")
    parser.add_argument("--steps", type=int_option("timed steps per model and round"), default=10,
                        help="timed Adam steps per model and round (default 10, after one untimed)")
    parser.add_argument("--reps", type=int_option("rounds, one timed epoch per model each"), default=1,
                        help="rounds: each times the steps and one epoch of every model (default 1)")
    parser.add_argument("--backbones", nargs="+", choices=tuple(BACKBONES), default=list(BACKBONES),
                        help="which PatchTransformer backbones (default: both)")
    parser.add_argument("--device", type=device_option, default=None,
                        help="cpu, cuda, ... (default: cuda if available)")
    parser.add_argument("--seed", type=int_option("the seed of the windows and weights", least=0), default=0)
    return parser


def train_step(model, optimiser, x, y) -> None:
    """One Adam step on the MSE of ``model(x)`` against ``y``."""
    loss = F.mse_loss(model(x), y)
    optimiser.zero_grad(set_to_none=True)
    loss.backward()
    optimiser.step()


def train_epoch(model, train, val, batch_size: int, seed: int, device) -> None:
    """One epoch of `fit` with the benchmark's PatchTST options (Adam, lr 1e-4, no clipping)."""
    fit(model, train, val, epochs=1, lr=1e-4, batch_size=batch_size, patience=1, clip=None,
        device=device, seed=seed, progress=False)


def measure(args, device) -> dict:
    """{backbone: (parameters, step seconds, epoch seconds)}, timed in turn over ``args.reps`` rounds."""
    g = torch.Generator().manual_seed(args.seed)
    x = torch.randn(args.windows, LOOKBACK, CHANNELS, generator=g)
    y = torch.randn(args.windows, args.horizon, CHANNELS, generator=g)
    train, val = (x, y), (x[:args.batch_size], y[:args.batch_size])
    xb, yb = x[:args.batch_size].to(device), y[:args.batch_size].to(device)
    models, optimisers = {}, {}
    for backbone in args.backbones:
        set_seed(args.seed)
        models[backbone] = patch_transformer("ETTh1", args.horizon, CHANNELS, backbone).to(device).train()
        optimisers[backbone] = torch.optim.Adam(models[backbone].parameters(), lr=1e-4)
    steps = {b: [] for b in models}
    epochs = {b: [] for b in models}
    for _ in range(args.reps):
        for backbone, model in models.items():
            model.train()
            steps[backbone] += time_call(train_step, model, optimisers[backbone], xb, yb, reps=args.steps,
                                         warmup=1, device=device).times
            epochs[backbone] += time_call(train_epoch, model, train, val, args.batch_size, args.seed, device,
                                          reps=1, warmup=0, device=device).times
    return {b: (sum(p.numel() for p in models[b].parameters()), steps[b], epochs[b]) for b in models}


def main(argv=None) -> int:
    args = make_parser().parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    per_epoch = -(-args.windows // args.batch_size)
    where = (torch.cuda.get_device_name(device) if device.type == "cuda"
             else f"{torch.get_num_threads()} thread(s)")
    print(f"training speed: {args.windows:,} windows x {LOOKBACK} steps x {CHANNELS} channels, "
          f"T = {args.horizon}, batch {args.batch_size} ({per_epoch} steps per epoch), ETTh sizes, "
          f"on {device} ({where})")
    found = measure(args, device)
    first = median(found[args.backbones[0]][1])
    rows = [(backbone, f"{params:,}", 1e3 * median(steps), 1e3 * min(steps), 1e3 * max(steps), median(epochs),
             median(steps) / first) for backbone, (params, steps, epochs) in found.items()]
    table(["backbone", "params", "ms/step", "min", "max", "s/epoch", f"step / {args.backbones[0]}"], rows,
          formats={2: "{:.1f}", 3: "{:.1f}", 4: "{:.1f}", 5: "{:.2f}", 6: "{:.2f}"},
          notes=[f"ms/step: median of {args.reps * args.steps} timed steps (forward, backward, Adam) on one "
                 f"batch on the device; s/epoch: median of {args.reps} fit epoch(s) (batches copied from "
                 "the host, validation on one batch); labsupport.timing.time_call, synchronised on CUDA."])
    return 0


if __name__ == "__main__":
    sys.exit(main())
