"""The sections' accuracy experiments with the comparison protocol, one subcommand each:

    efficient    12.5: attention kernels inside the small PatchTransformer
    context      12.4: context lengths of 1, 7, 14, 28 days (demand; --series ar1 for AR(1))
    encodings    12.3: positional encodings, scored at 1x, 2x and 4x the trained window
    calendar     12.3: with and without calendar features; holiday days = most target hours flagged

    OMP_NUM_THREADS=1 python -m tools.experiments.sections efficient --stride 4 --epochs 8 --seeds 2
    OMP_NUM_THREADS=1 python -m tools.experiments.sections encodings --kinds none sinusoidal rope

Common options: --stride (training windows), --epochs, --patience, --seeds, --width,
--lr, --batch, --schedule (constant, cosine, cosine0, type1, type3), --revin, --threads.
"""
from __future__ import annotations

import argparse
import dataclasses
import time
from functools import partial

import numpy as np
import torch
from torch import nn

from labsupport.attention import (
    LinformerAttention,
    kernel_spec,
    linear_attention,
    local_attention,
    longformer_attention,
    performer_attention,
)
from labsupport.compare import NAIVE, RIDGE, Trainable, compare
from labsupport.data import HORIZON, LOOKBACK, book_task, load_vic_elec
from labsupport.display import table
from labsupport.models import PatchTransformer, seasonal_naive
from labsupport.positional import KINDS
from labsupport.train import evaluate
from tools.experiments._common import ar1_like, make_schedule, parse_value


def patch_model(args, revin, **options):
    width = args.width
    sizes = dict(lookback=options.pop("lookback", LOOKBACK), horizon=HORIZON, d_model=width,
                 n_heads=4, n_layers=2, d_ff=2 * width)
    if args.attn_dropout is not None:
        options.setdefault("attn_dropout", args.attn_dropout)
    elif not kernel_spec(options.get("kernel", "sdpa")).dropout:
        options.setdefault("attn_dropout", 0.0)          # linear, Performer: no weights to drop
    return PatchTransformer(**sizes, revin=revin, **options)


def run(args, task, models, **extra):
    started = time.perf_counter()
    schedule = make_schedule(args.schedule, args.epochs)
    result = compare(task, models, revin=args.revin, seeds=args.seeds, epochs=args.epochs,
                     patience=args.patience, lr=args.lr, batch_size=args.batch, schedule=schedule,
                     progress=False, **extra)
    print(f"{len(models)} models x {args.seeds} seeds in {time.perf_counter() - started:.0f} s "
          f"(stride {args.stride}, epochs {args.epochs}, patience {args.patience}, lr {args.lr}, "
          f"batch {args.batch}, schedule {args.schedule}, width {args.width})")
    result.table()
    for name in models:
        print(f"  {name}: best epochs {[r.best_epoch for r in result[name].records]}, "
              f"stopped {[r.stop_reason for r in result[name].records]}")
    return result


# --- 12.5 ---------------------------------------------------------------------------------------

def efficient(args):
    task = book_task(train_stride=args.stride)
    N = PatchTransformer(lookback=LOOKBACK, horizon=HORIZON).n_patches
    kernels = {                                    # name -> the model's options, built per run
        "full (sdpa)": lambda: dict(kernel="sdpa"),
        "local, w = 4": lambda: dict(kernel=partial(local_attention, window=4)),
        "Longformer, w = 4": lambda: dict(kernel=partial(longformer_attention, window=4,
                                                         global_tokens=[N - 1])),
        "linear": lambda: dict(kernel=linear_attention),
        "Performer, m = 32": lambda: dict(kernel=partial(performer_attention, num_features=32,
                                                         generator=0)),
        "full, not causal": lambda: dict(kernel="sdpa", causal=False),
        "Linformer, k = 8": lambda: dict(kernel=LinformerAttention(N, 8), causal=False),
    }
    chosen = {k: v for k, v in kernels.items() if not args.only or any(s in k for s in args.only)}

    def build(options, revin):
        return patch_model(args, revin, **options())

    models = {name: Trainable(partial(build, options)) for name, options in chosen.items()}
    result = run(args, task, models)
    for name in models:
        if name != "full (sdpa)" and "full (sdpa)" in models:
            result.verdict(name, "full (sdpa)")
    result.verdicts()


# --- 12.4 ---------------------------------------------------------------------------------------

def context(args):
    demand = load_vic_elec()
    series, columns = ((demand, ("demand_mw",)) if args.series == "demand"
                       else (ar1_like(demand), ("value",)))
    days = args.days
    longest = max(days) * 24
    rows = []
    for d in days:
        L = d * 24
        task = book_task(lookback=L, columns=columns, series=series, train_stride=args.stride)
        skip = (longest - L) // args.stride                   # the same target hours for all
        task = dataclasses.replace(task, train=(task.train[0][skip:], task.train[1][skip:]))
        models = {"PatchTransformer": Trainable(lambda revin, L=L: patch_model(
            args, revin, lookback=L, patch_len=24, stride=24))}
        print(f"\n== {d} day(s) of context")
        result = run(args, task, models, naive_period=168 if L >= 168 else None,
                     unit="MW" if args.series == "demand" else None)
        e = result["PatchTransformer"]
        rows.append((d, e.mean(), min(e.values()), max(e.values()), result.mean(RIDGE),
                     result.mean(NAIVE) if NAIVE in result.entries else None,
                     sorted({r.stop_reason for r in e.records})))
    table(["days", "patch mean", "min", "max", "ridge", "weekly naive", "stopped"],
          [(d, f"{m:.3f}", f"{lo:.3f}", f"{hi:.3f}", f"{r:.3f}", "-" if n is None else f"{n:.3f}", s)
           for d, m, lo, hi, r, n, s in rows])


# --- 12.3 ---------------------------------------------------------------------------------------

class FromOrigin(nn.Module):
    """A PatchTransformer whose token positions count back from the forecast origin: the
    newest token is at 0, the one before at -1, ..., whatever the window's length."""

    def __init__(self, inner: PatchTransformer):
        super().__init__()
        self.inner, self.revin = inner, inner.revin

    def forward(self, x):
        n = (x.shape[1] - self.inner.patch_len) // self.inner.stride + 1
        positions = torch.arange(n, device=x.device, dtype=torch.float32) - (n - 1)   # (N,)
        return self.inner(x, positions=positions)


def encodings(args):
    task = book_task(train_stride=args.stride)
    longer = {f: book_task(lookback=LOOKBACK * f, train_stride=10 ** 6).test for f in (2, 4)}
    tests = {1: task.test, **longer}
    models = {}
    for kind in args.kinds:
        if kind.endswith("@origin"):
            base = kind.split("@")[0]
            models[kind] = Trainable(
                lambda revin, b=base: FromOrigin(patch_model(args, revin, pos_encoding=b)))
        else:
            models[kind] = Trainable(lambda revin, k=kind: patch_model(args, revin, pos_encoding=k))
    result = run(args, task, models)
    scores = {}
    for name in models:
        scores[name] = {}
        for f, data in tests.items():
            try:
                scores[name][f] = [evaluate(m, data).mse for m in result[name].models]
            except ValueError:
                scores[name][f] = None
    naive = {f: evaluate(lambda x: seasonal_naive(x, 168, HORIZON), data).mse for f, data in tests.items()}
    none = scores.get("none")

    def cell(values):
        if values is None:
            return "cannot run"
        return f"{np.mean(values):.3f} ({min(values):.3f}-{max(values):.3f})"

    def ratio(values, base):
        if values is None or base is None or values[1] is None or values[4] is None:
            return "-"
        return f"x{np.mean(values[4]) / np.mean(values[1]):.2f}"

    table(["encoding", "1x", "2x", "4x", "4x / 1x", "vs none 4x/1x"],
          [(n, *(cell(s[f]) for f in (1, 2, 4)), ratio(s, s),
            "-" if none is None or s[4] is None else
            f"{(np.mean(s[4]) / np.mean(s[1])) / (np.mean(none[4]) / np.mean(none[1])):.2f}")
           for n, s in scores.items()])
    print("weekly naive: " + ", ".join(f"{f}x {v:.3f}" for f, v in naive.items())
          + f"; ridge (1x only) {result.mean(RIDGE):.3f}")


def calendar(args):
    cal = book_task(train_stride=args.stride, calendar=True)
    plain = book_task(train_stride=args.stride)
    (x_test, time_test), y_test = cal.test
    flagged = time_test[:, LOOKBACK:, 6] > 0                      # (N, 24) target hours flagged
    any_day = flagged.any(dim=1)
    most_day = flagged.float().mean(dim=1) > 0.5
    print(f"test days {len(y_test)}: with any flagged target hour {int(any_day.sum())}, "
          f"with most target hours flagged {int(most_day.sum())}; flagged hours per such day "
          f"{flagged.sum(dim=1)[any_day].tolist()}")
    results = {}
    for use in (False, True):
        task = cal if use else plain
        models = {"calendar" if use else "no calendar": Trainable(
            lambda revin, use=use: patch_model(args, revin, pos_encoding="learned",
                                               time_features=7 if use else 0))}
        results[use] = run(args, task, models)
    for use, result in results.items():
        name = "calendar" if use else "no calendar"
        per_seed = []
        for m in result[name].models:
            inputs = (x_test, time_test) if use else (x_test,)
            with torch.no_grad():
                err = (m.eval()(*inputs) - y_test).pow(2).mean(dim=(1, 2))
            per_seed.append((err.mean().item(), err[most_day].mean().item(), err[~most_day].mean().item()))
        arr = np.array(per_seed)
        print(f"{name}: all {arr[:, 0].mean():.3f} ({arr[:, 0].min():.3f}-{arr[:, 0].max():.3f}), "
              f"holiday {arr[:, 1].mean():.3f} ({arr[:, 1].min():.3f}-{arr[:, 1].max():.3f}), "
              f"other {arr[:, 2].mean():.3f} ({arr[:, 2].min():.3f}-{arr[:, 2].max():.3f})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["efficient", "context", "encodings", "calendar"])
    parser.add_argument("--stride", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--patience", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--attn-dropout", type=float, default=None,
                        help="dropout on attention weights (default: the model's dropout where the "
                             "kernel applies it to its weights, else 0); 0 keeps the fused SDPA path "
                             "on a CPU, about a third faster")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--schedule", default="constant")
    parser.add_argument("--revin", type=parse_value, default=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", nargs="*", default=None, help="12.5: substrings of kernel names")
    parser.add_argument("--days", nargs="+", type=int, default=[1, 7, 14, 28], help="12.4")
    parser.add_argument("--series", default="demand", choices=["demand", "ar1"], help="12.4")
    parser.add_argument("--kinds", nargs="+", default=list(KINDS) + ["sinusoidal@origin"], help="12.3")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    experiments = {"efficient": efficient, "context": context, "encodings": encodings, "calendar": calendar}
    experiments[args.what](args)


if __name__ == "__main__":
    main()
