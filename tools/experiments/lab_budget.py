"""The lab's training as the notebook runs it with a profile (default: cpu), one part at a time:
wall time of each, to check the lab against its budget (one thread, as CI runs it).

    OMP_NUM_THREADS=1 python -m tools.experiments.lab_budget                # every part
    OMP_NUM_THREADS=1 python -m tools.experiments.lab_budget --parts linear

Parts: day and week (Step 3's races, `labsupport.sections.lab.racers` at their `SIZES`), ablations (the
shuffle test's Transformers without encoding and/or mask), linear (Step 5: linear attention,
a day ahead).
"""
from __future__ import annotations

import argparse
import time

import torch

from labsupport import profile
from labsupport.compare import Trainable, compare
from labsupport.data import HORIZON, LOOKBACK, book_task
from labsupport.sections.lab import racers


def parts(P) -> dict:
    """part -> (horizon, {name: Trainable}, seeds), as the lab trains them."""
    def racer(name, horizon, **options):
        return Trainable(lambda revin: racers.build(name, lookback=LOOKBACK, horizon=horizon,
                                                    width=racers.SIZES[horizon].get(name),
                                                    revin=revin, **options))
    ablations = {"no encoding, no mask": dict(pos_encoding="none", causal=False),
                 "mask only": dict(pos_encoding="none"), "encoding only": dict(causal=False)}
    return {
        "day": (HORIZON, {n: racer(n, HORIZON) for n in racers.NAMES}, P.lab.seeds),
        "week": (168, {n: racer(n, 168) for n in racers.NAMES}, P.lab.seeds),
        "ablations": (HORIZON, {k: racer("PatchTransformer", HORIZON, **o) for k, o in ablations.items()},
                      P.lab.ablation_seeds),
        "linear": (HORIZON, {"linear attention": racer("PatchTransformer", HORIZON, kernel="linear")},
                   P.lab.linear_seeds),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--parts", nargs="+", default=["day", "week", "ablations", "linear"])
    args = parser.parse_args()
    P = profile.current(args.profile)
    torch.set_num_threads(1)
    started = time.perf_counter()
    table = parts(P)
    for part in args.parts:
        horizon, models, seeds = table[part]
        t0 = time.perf_counter()
        task = book_task(train_stride=P.lab.train_stride, horizon=horizon)
        result = compare(task, models, revin=True, seeds=seeds, epochs=P.lab.max_epochs, patience=3,
                         lr=2e-3, batch_size=128, schedule="plateau", device=P.device, progress=False)
        print(f"\n== {part}: {time.perf_counter() - t0:.0f} s wall")
        result.table()
    print(f"\nall parts: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
