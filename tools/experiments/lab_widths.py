"""The lab's width sweep: each network of the race at a few widths, 3 seeds each, trained under
the lab's recipe on the lab's windows; the width of lowest mean validation MSE is the one the lab
races (`labsupport.sections.lab.racers.WIDTHS`, the smallest width within 1% of the lowest
validation error; the rows in `labsupport.sections.lab.record.SWEEP`).

    python -m tools.experiments.lab_widths --horizon 24 --out /tmp/w24.json
    python -m tools.experiments.lab_widths --horizon 168 --out /tmp/w168.json
    python -m tools.experiments.lab_widths --merge /tmp/w24.json /tmp/w168.json --module

Each (network, width) is one `compare` over the seeds on the lab's training windows
(``P.lab.train_every``), with the lab's fit options (``labsupport.sections.lab.sizes.TRAINING``)
or others given as ``key=value`` (``--options lr=0.005``). Printed: parameters, mean validation
MSE (best epoch), test MSE (min-max), epochs, stop reasons and seconds per epoch; ``--out``
writes the rows as JSON; ``--module`` prints them as the Python literal record.py holds.
"""
from __future__ import annotations

import argparse
import json
import pprint
import statistics
import time

import torch

from labsupport.compare import Trainable, compare
from labsupport.data import LOOKBACK
from labsupport.sections.lab import sizes
from labsupport.sections.lab.racers import NAMES, build, lab_task
from tools.experiments._common import parse_options

GRID = (16, 32, 64, 128)


def sweep(horizon: int, networks, seeds: int, stride: int, widths=None, options=None) -> list[dict]:
    task = lab_task(every=stride, horizon=horizon)
    training = {**sizes.TRAINING, **(options or {})}
    rows = []
    for name in networks:
        for width in widths or GRID:
            started = time.perf_counter()
            spec = Trainable(lambda revin, n=name, w=width: build(n, lookback=LOOKBACK, horizon=horizon,
                                                                  width=w, revin=revin))
            result = compare(task, {name: spec}, revin=True, seeds=seeds, progress=False, **training)
            entry = result[name]
            rows.append(dict(
                horizon=horizon, model=name, width=width, params=entry.params, seeds=len(entry.metrics),
                val_mse=round(statistics.fmean(r.best_val_loss for r in entry.records), 5),
                test_mse=round(entry.mean(), 5), test_min=round(min(entry.values()), 5),
                test_max=round(max(entry.values()), 5),
                epochs=[r.epochs_run for r in entry.records], stopped=[r.stop_reason for r in entry.records],
                seconds_per_epoch=round(statistics.median(r.seconds_per_epoch for r in entry.records), 3),
                wall_s=round(time.perf_counter() - started, 1)))
            r = rows[-1]
            print(f"H{horizon} {name} w{width}: {r['params']:,} params, val {r['val_mse']:.4f}, test "
                  f"{r['test_mse']:.4f} ({r['test_min']:.4f}-{r['test_max']:.4f}), epochs {r['epochs']}, "
                  f"{r['stopped']}, {r['seconds_per_epoch']:.2f} s/epoch, {r['wall_s']:.0f} s", flush=True)
    print(f"ridge {result.mean('ridge (closed form)'):.4f}, "
          f"naive {result.mean('seasonal naive (weekly)'):.4f}")
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
        out.setdefault(horizon, {})[model] = r["width"]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizon", type=int, default=24)
    parser.add_argument("--networks", nargs="+", default=list(NAMES), choices=list(NAMES))
    parser.add_argument("--widths", nargs="+", type=int, help="widths to try (default: GRID)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--every", dest="stride", type=int, default=sizes.CPU.train_every,
                        help="training windows whose forecast starts every EVERY hours from midnight")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--options", nargs="*", help="fit options on top of the lab's, key=value")
    parser.add_argument("--merge", nargs="+", help="JSON files of earlier runs to merge")
    parser.add_argument("--out", help="write the rows as JSON here")
    parser.add_argument("--module", action="store_true", help="print the rows as record.py's literal")
    args = parser.parse_args()
    if args.merge:
        rows = [r for path in args.merge for r in json.load(open(path))]
    else:
        torch.set_num_threads(args.threads)
        rows = sweep(args.horizon, args.networks, args.seeds, args.stride, args.widths,
                     parse_options(args.options))
    print(chosen(rows))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
            f.write("\n")
    if args.module:
        keep = ("horizon", "model", "width", "params", "val_mse", "test_mse", "stopped")
        pprint.pprint([{k: r[k] for k in keep} for r in rows], width=110, sort_dicts=False)


if __name__ == "__main__":
    main()
