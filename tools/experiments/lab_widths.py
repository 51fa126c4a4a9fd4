"""The lab's width sweep: each network of the race at a few widths, 3 seeds each, on the cpu
profile's windows, trained under the lab's protocol; the width with the lowest mean
validation MSE is the one the lab races (`labsupport.sections.lab.racers.SIZES`).

    OMP_NUM_THREADS=1 python -m tools.experiments.lab_widths --horizon 24 --out /tmp/w24.json
    OMP_NUM_THREADS=1 python -m tools.experiments.lab_widths --horizon 168 --out /tmp/w168.json
    python -m tools.experiments.lab_widths --merge /tmp/w24.json /tmp/w168.json \\
        --out labsupport/datasets/lab_widths.json

Each (network, width) is one `compare` over seeds 0-2 on every 2nd training window (the cpu
profile's ``lab_train_stride``), the plateau schedule from ``lr 2e-3``, batch 128, patience
3, at most 30 epochs: the lab's settings. Printed: parameters, mean validation MSE (best
epoch), test MSE (min-max), epochs, stop reasons and seconds per epoch; written: the rows
as JSON, which the lab shows as its table of the sweep.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from labsupport import profile
from labsupport.compare import Trainable, compare
from labsupport.data import LOOKBACK, book_task
from labsupport.sections.lab.racers import WIDTHS, build

TRAINING = dict(epochs=30, patience=3, lr=2e-3, batch_size=128, schedule="plateau")


def sweep(horizon: int, networks, seeds: int, stride: int, widths=None) -> list[dict]:
    task = book_task(train_stride=stride, horizon=horizon)
    rows = []
    for name in networks:
        for width in widths or WIDTHS[name]:
            started = time.perf_counter()
            spec = Trainable(lambda revin, n=name, w=width: build(n, lookback=LOOKBACK, horizon=horizon,
                                                                  width=w, revin=revin))
            result = compare(task, {name: spec}, revin=True, seeds=seeds, progress=False, **TRAINING)
            entry = result[name]
            rows.append(dict(
                horizon=horizon, model=name, width=width, params=entry.params, seeds=len(entry.metrics),
                val_mse=statistics.fmean(r.best_val_loss for r in entry.records),
                test_mse=entry.mean(), test_min=min(entry.values()), test_max=max(entry.values()),
                epochs=[r.epochs_run for r in entry.records],
                stopped=[r.stop_reason for r in entry.records],
                seconds_per_epoch=statistics.median(r.seconds_per_epoch for r in entry.records),
                wall_s=time.perf_counter() - started))
            r = rows[-1]
            print(f"H{horizon} {name} w{width}: {r['params']:,} params, val {r['val_mse']:.4f}, test "
                  f"{r['test_mse']:.4f} ({r['test_min']:.4f}-{r['test_max']:.4f}), epochs {r['epochs']}, "
                  f"{r['stopped']}, {r['seconds_per_epoch']:.2f} s/epoch, {r['wall_s']:.0f} s", flush=True)
    return rows


def chosen(rows) -> dict:
    """{horizon: {network: the width with the lowest mean validation MSE}}."""
    best = {}
    for r in rows:
        key = (r["horizon"], r["model"])
        if key not in best or r["val_mse"] < best[key]["val_mse"]:
            best[key] = r
    out = {}
    for (horizon, model), r in sorted(best.items()):
        out.setdefault(str(horizon), {})[model] = r["width"]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizon", type=int, default=24)
    parser.add_argument("--networks", nargs="+", default=list(WIDTHS), choices=list(WIDTHS))
    parser.add_argument("--widths", nargs="+", type=int, help="widths to try (default: racers.WIDTHS)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--stride", type=int, default=profile.current("cpu").lab_train_stride)
    parser.add_argument("--merge", nargs="+", help="JSON files of earlier runs to merge into --out")
    parser.add_argument("--out", help="write the rows (and the chosen widths) here as JSON")
    args = parser.parse_args()
    if args.merge:
        rows = [r for path in args.merge for r in json.load(open(path))["rows"]]
    else:
        torch.set_num_threads(1)
        rows = sweep(args.horizon, args.networks, args.seeds, args.stride, args.widths)
    result = dict(rows=rows, chosen=chosen(rows), training=dict(TRAINING, train_stride=args.stride))
    print(json.dumps(result["chosen"], indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
