"""12.5's accuracy table: attention kernels inside the small PatchTransformer, trained with the
comparison protocol until early stopping ends every run (``python -m tools.experiments.efficient_12_5
--help``).

    OMP_NUM_THREADS=1 python -m tools.experiments.efficient_12_5 speed --stride 2 --patch-stride 24
    OMP_NUM_THREADS=1 python -m tools.experiments.efficient_12_5 compare --stride 2 --patch-stride 24 \
        --seeds 2 --full-seeds 3 --lr 2e-3 --patience 3

``speed``: seconds per training epoch of every kernel, round-robin in one process (ratios survive a
busy machine). ``compare``: the notebook's comparison with these settings, its table, each run's
best and last epoch and why it stopped, and the verdicts against each kernel's exact reference.
"""
from __future__ import annotations

import argparse
import time
from functools import partial

import torch

from labsupport.attention import (
    LinformerAttention,
    linear_attention,
    local_attention,
    longformer_attention,
    performer_attention,
)
from labsupport.compare import NAIVE, RIDGE, Trainable, compare
from labsupport.data import HORIZON, LOOKBACK, book_task
from labsupport.models import PatchTransformer
from labsupport.schedules import Plateau
from labsupport.train import fit
from tools.experiments._common import make_schedule

KERNELS = ("full", "naive", "local", "longformer", "linear", "performer", "noncausal", "linformer")
NAMES = {"full": "full (sdpa)", "naive": "full (naive)", "local": "local, w = 4",
         "longformer": "Longformer, w = 4", "linear": "linear", "performer": "Performer, m = 32",
         "noncausal": "full, not causal", "linformer": "Linformer, k = 8"}
REFERENCE = {"naive": "full", "local": "full", "longformer": "full", "linear": "full", "performer": "full",
             "linformer": "noncausal"}


def tokens(args) -> int:
    """Patch tokens per window at these patch settings."""
    return PatchTransformer(lookback=LOOKBACK, horizon=HORIZON, patch_len=args.patch_len,
                            stride=args.patch_stride).n_patches


def options(kind: str, n: int, window: int) -> dict:
    """The model options of one kernel (built per run: Linformer holds parameters)."""
    return {"full": lambda: dict(kernel="sdpa"), "naive": lambda: dict(kernel="naive"),
            "local": lambda: dict(kernel=partial(local_attention, window=window)),
            "longformer": lambda: dict(kernel=partial(longformer_attention, window=window,
                                                      global_tokens=[n - 1])),
            "linear": lambda: dict(kernel=linear_attention),
            "performer": lambda: dict(kernel=partial(performer_attention, num_features=32,
                                                     generator=0)),
            "noncausal": lambda: dict(kernel="sdpa", causal=False),
            "linformer": lambda: dict(kernel=LinformerAttention(n, 8), causal=False)}[kind]()


def build(args, kind: str, revin: bool) -> PatchTransformer:
    n = tokens(args)
    return PatchTransformer(lookback=LOOKBACK, horizon=HORIZON, patch_len=args.patch_len,
                            stride=args.patch_stride, d_model=args.width, n_heads=4, n_layers=2,
                            d_ff=2 * args.width, attn_dropout=0.0, dropout=args.dropout, revin=revin,
                            **options(kind, n, args.window))


def speed(args) -> None:
    task = book_task(train_stride=args.stride)
    seconds = {kind: [] for kind in args.kernels}
    for _ in range(args.rounds):
        for kind in args.kernels:
            torch.manual_seed(0)
            model = build(args, kind, True)
            started = time.process_time()          # CPU time: what a quiet core would take
            fit(model, task.train, task.val, epochs=1, batch_size=args.batch, progress=False)
            seconds[kind].append(time.process_time() - started)
    print(f"{len(task.train[1])} windows, {tokens(args)} tokens, width {args.width}, batch {args.batch}")
    for kind, s in seconds.items():
        print(f"  {NAMES[kind]}: {min(s):.2f} CPU s per epoch (min of {args.rounds})")


def schedule(args):
    """plateau (fit's Plateau: the rate halved after each epoch without improvement), or a name
    `make_schedule` knows."""
    if args.schedule == "plateau":
        return Plateau()
    return make_schedule(args.schedule, args.epochs)


def comparison(args) -> None:
    task = book_task(train_stride=args.stride)
    models = {NAMES[kind]: Trainable(lambda revin, kind=kind: build(args, kind, revin),
                                     seeds=args.full_seeds if kind == "full" else args.seeds)
              for kind in args.kernels}
    started, cpu = time.perf_counter(), time.process_time()
    result = compare(task, models, revin=True, seeds=args.seeds, epochs=args.epochs,
                     patience=args.patience, lr=args.lr, batch_size=args.batch,
                     schedule=schedule(args), progress=False)
    print(f"{vars(args)}\n{sum(len(result[n].records) for n in models)} runs in "
          f"{time.perf_counter() - started:.0f} s ({time.process_time() - cpu:.0f} CPU s), "
          f"{tokens(args)} tokens")
    result.table()
    for name in models:
        stops = [(r.best_epoch, r.epochs_run, r.stop_reason) for r in result[name].records]
        print(f"  {name}: (best, run, stop) {stops}")
    for kind, reference in REFERENCE.items():
        if kind in args.kernels and reference in args.kernels:
            result.verdict(NAMES[kind], NAMES[reference])
            print("    paired:", result.interval(NAMES[kind], NAMES[reference]))
    for name in models:
        result.verdict(name, NAIVE)
        result.verdict(name, RIDGE)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job", choices=("speed", "compare"))
    parser.add_argument("--kernels", nargs="+", choices=KERNELS, default=list(KERNELS))
    parser.add_argument("--stride", type=int, default=2, help="training windows: every n-th")
    parser.add_argument("--patch-len", type=int, default=24)
    parser.add_argument("--patch-stride", type=int, default=12)
    parser.add_argument("--window", type=int, default=4, help="local and Longformer window (tokens)")
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--schedule", default="plateau")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--patience", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--full-seeds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2, help="speed: epochs per kernel")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    (speed if args.job == "speed" else comparison)(args)


if __name__ == "__main__":
    main()
