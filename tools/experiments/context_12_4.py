"""12.4's context curve as the notebook runs it: the patch forecaster (one token per day)
at each context length beside the ridge on the same lookback, every run to early stopping
under the plateau schedule, all contexts pooled into one `Comparison` (the same test
windows) so that the protocol's verdicts compare contexts with each other.

    OMP_NUM_THREADS=1 python -m tools.experiments.context_12_4 --series demand --seeds 3
    OMP_NUM_THREADS=1 python -m tools.experiments.context_12_4 --series ar1 --seeds 2

Options: --days, --stride (training windows), --lr, --batch, --patience, --epochs (the
budget early stopping should never reach), --width, --schedule (plateau or a name of
_common.make_schedule).
"""
from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np
import torch

from labsupport.compare import NAIVE, RIDGE, Comparison, Trainable, compare
from labsupport.data import HORIZON, book_task, load_vic_elec
from labsupport.display import table
from labsupport.models import PatchTransformer
from tools.experiments._common import ar1_like, make_schedule


def context_run(args, series, columns, unit, days, longest):
    """One context: the forecaster over its seeds, the ridge and (from 7 days) the naive."""
    L = days * 24
    task = book_task(lookback=L, columns=columns, series=series, train_stride=args.stride)
    skip = (longest - L) // args.stride                   # the same target hours for all
    task = dataclasses.replace(task, train=(task.train[0][skip:], task.train[1][skip:]))
    forecaster = Trainable(lambda revin: PatchTransformer(
        lookback=L, horizon=HORIZON, patch_len=24, stride=24, d_model=args.width, n_heads=4,
        n_layers=2, d_ff=2 * args.width, attn_dropout=0.0, revin=revin))
    schedule = "plateau" if args.schedule == "plateau" else make_schedule(args.schedule, args.epochs)
    return compare(task, {"forecaster": forecaster}, revin=False, seeds=args.seeds,
                   epochs=args.epochs, patience=args.patience, lr=args.lr, batch_size=args.batch,
                   schedule=schedule, naive_period=168 if L >= 168 else None, unit=unit,
                   progress=False)


def pooled(results):
    """Every context's entries in one Comparison: 'forecaster, 7 d', 'ridge, 7 d', the naive."""
    entries = {}
    for days, result in results.items():
        for name, label in (("forecaster", "forecaster"), (RIDGE, "ridge")):
            entries[f"{label}, {days} d"] = dataclasses.replace(result[name], name=f"{label}, {days} d")
        if NAIVE in result.entries:
            entries[NAIVE] = result[NAIVE]
    first = next(iter(results.values()))
    return Comparison(entries, first.revin, first.windows, first.unit, overlap=first.overlap)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", choices=["demand", "ar1"], default="demand")
    ap.add_argument("--days", type=int, nargs="+", default=[1, 7, 14, 28])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--stride", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--patience", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--schedule", default="plateau")
    args = ap.parse_args()
    torch.set_num_threads(1)
    demand = load_vic_elec()
    series, columns, unit = ((demand, ("demand_mw",), "MW") if args.series == "demand"
                             else (ar1_like(demand), ("value",), None))
    longest = max(args.days) * 24
    results, seconds = {}, {}
    for days in args.days:
        t0, c0 = time.perf_counter(), time.process_time()
        results[days] = context_run(args, series, columns, unit, days, longest)
        seconds[days] = (time.perf_counter() - t0, time.process_time() - c0)
    C = pooled(results)
    print(vars(args))
    rows = []
    for days in args.days:
        e = C[f"forecaster, {days} d"]
        rows.append((days, f"{e.mean():.3f} ({min(e.values()):.3f}-{max(e.values()):.3f})",
                     " ".join(f"{r.best_epoch}/{r.epochs_run}" for r in e.records),
                     f"{sum(r.converged for r in e.records)}/{len(e.records)}",
                     f"{C.mean(f'ridge, {days} d'):.3f}",
                     f"{np.median([r.seconds_per_epoch for r in e.records]):.2f}",
                     f"{seconds[days][0]:.0f} / {seconds[days][1]:.0f}"))
    table(["days", "forecaster (min-max)", "best/run epochs", "converged", "ridge", "s/epoch",
           "wall / CPU s"], rows)
    if NAIVE in C.entries:
        print(f"weekly naive {C.mean(NAIVE):.3f}")
    first = args.days[0]
    for model in ("forecaster", "ridge"):
        for days in args.days[1:]:
            C.verdict(f"{model}, {days} d", f"{model}, {first} d")
        for a, b in zip(args.days[1:], args.days[2:]):
            C.verdict(f"{model}, {b} d", f"{model}, {a} d")
    for days in args.days:
        C.verdict(f"forecaster, {days} d", f"ridge, {days} d")
        if days >= 7:
            C.verdict(f"forecaster, {days} d", NAIVE)
    print(f"total {sum(s[0] for s in seconds.values()):.0f} s wall, "
          f"{sum(s[1] for s in seconds.values()):.0f} s CPU")


if __name__ == "__main__":
    main()
