"""The lab's Step 5 where the cost of attention matters: the race's Transformer reading 2-hour
tokens (168 per window) with full attention (SDPA) and with linear attention, 3 seeds each, a day
ahead, under the lab's recipe and windows. Too long for the notebook's CPU minutes, so it runs
here once and `labsupport/sections/lab/record.py` keeps what it measured (``STEP5``).

    python -m tools.experiments.lab_step5 --kernel sdpa --out /tmp/s5_sdpa.json
    python -m tools.experiments.lab_step5 --kernel linear --out /tmp/s5_linear.json
    python -m tools.experiments.lab_step5 --merge /tmp/s5_sdpa.json /tmp/s5_linear.json

Printed per kernel: parameters, test MSE per seed, epochs, why each run stopped, seconds per
epoch; written: those and the test windows' losses (mean over seeds), for the paired test.
``--merge`` prints the Python literal that record.py holds.
"""
from __future__ import annotations

import argparse
import json
import pprint
import time

import torch

from labsupport.compare import Trainable, compare
from labsupport.data import LOOKBACK
from labsupport.sections.lab import racers, sizes

PATCH, WIDTH = 2, 32              # 168 tokens of 2 hours; the width of the race's Transformer


def run(kernel: str, seeds: int, every: int) -> dict:
    task = racers.lab_task(every=every)
    spec = Trainable(lambda revin: racers.build("Transformer", lookback=LOOKBACK, horizon=24, width=WIDTH,
                                                patch_len=PATCH, kernel=kernel, revin=revin))
    started = time.perf_counter()
    result = compare(task, {kernel: spec}, revin=True, seeds=seeds, progress=False, **sizes.TRAINING)
    entry = result[kernel]
    out = dict(kernel=kernel, tokens=LOOKBACK // PATCH, width=WIDTH, params=entry.params, seeds=entry.seeds,
               test_mse=[round(v, 5) for v in entry.values()],
               epochs=[r.epochs_run for r in entry.records], stopped=[r.stop_reason for r in entry.records],
               seconds_per_epoch=[round(r.seconds_per_epoch, 2) for r in entry.records],
               window_mse=[round(v, 6) for v in entry.window_loss().tolist()],
               ridge=round(result.mean("ridge (closed form)"), 5),
               wall_s=round(time.perf_counter() - started))
    print({k: v for k, v in out.items() if k != "window_mse"}, flush=True)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="sdpa", choices=["sdpa", "linear"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--every", type=int, default=sizes.CPU.train_every)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out")
    parser.add_argument("--merge", nargs="+")
    args = parser.parse_args()
    if args.merge:
        pprint.pprint({r["kernel"]: r for r in (json.load(open(p)) for p in args.merge)}, width=110,
                      sort_dicts=False, compact=True)
        return
    torch.set_num_threads(args.threads)
    out = run(args.kernel, args.seeds, args.every)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f)


if __name__ == "__main__":
    main()
