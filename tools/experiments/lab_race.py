"""The lab's race as the notebook runs it (`labsupport.sections.lab.racers` at their chosen `SIZES`), with
every pairwise verdict, and the shuffle test's controls.

    OMP_NUM_THREADS=1 python -m tools.experiments.lab_race --horizon 168 --seeds 0 1 2
    OMP_NUM_THREADS=1 python -m tools.experiments.lab_race --horizon 24 --shuffle

``--seeds`` other than the notebook's 0-2 show whether a verdict survives new initialisations
(as a stand-in for another machine's arithmetic). ``--shuffle`` also trains the
PatchTransformer without its positional encoding and/or its causal mask and scores every
model on test windows whose 13 older days are shuffled (the newest day kept in place).
``--heads`` prints, for each seed's PatchTransformer, every head's share of the newest token's
weight on the days 7 and 14 days before the forecast day (the lab's third stretch goal).
"""
from __future__ import annotations

import argparse
import itertools
import time

import torch

from labsupport.compare import Trainable, compare, diebold_mariano
from labsupport.data import LOOKBACK, book_task
from labsupport.sections.lab.racers import NAMES, SIZES, build
from labsupport.train import window_errors

TRAINING = dict(epochs=30, patience=3, lr=2e-3, batch_size=128, schedule="plateau")


def shuffled_days(x, seed=0, keep_last=True):
    g = torch.Generator().manual_seed(seed)
    days = x.view(len(x), 14, 24, x.shape[-1])
    n = 13 if keep_last else 14
    order = torch.stack([torch.cat([torch.randperm(n, generator=g), torch.arange(n, 14)])
                         for _ in range(len(x))])
    return days[torch.arange(len(x))[:, None], order].reshape_as(x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizon", type=int, default=24)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--stride", type=int, default=2)
    parser.add_argument("--shuffle", action="store_true")
    parser.add_argument("--heads", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    task = book_task(train_stride=args.stride, horizon=args.horizon)
    sizes = SIZES[args.horizon]
    models = {name: Trainable(lambda revin, n=name: build(n, lookback=LOOKBACK, horizon=args.horizon,
                                                          width=sizes.get(n), revin=revin))
              for name in NAMES}
    if args.shuffle:
        width = sizes["PatchTransformer"]
        for label, options in (("PT no encoding, no mask", dict(pos_encoding="none", causal=False)),
                               ("PT no encoding, causal", dict(pos_encoding="none")),
                               ("PT encoding, no mask", dict(causal=False))):
            models[label] = Trainable(lambda revin, o=options: build(
                "PatchTransformer", lookback=LOOKBACK, horizon=args.horizon, width=width, revin=revin, **o))
    started = time.perf_counter()
    race = compare(task, models, revin=True, seeds=args.seeds, progress=False, **TRAINING)
    print(f"horizon {args.horizon}, seeds {args.seeds}: {time.perf_counter() - started:.0f} s")
    race.table()
    for a, b in itertools.combinations([n for n in race.entries], 2):
        print(race.verdict_text(a, b))
    if args.shuffle:
        x, y = task.test
        xs = shuffled_days(x)
        for name in race.entries:
            before = torch.stack([window_errors(m, (x, y))["mse"] for m in race[name].models]).mean(0)
            after = torch.stack([window_errors(m, (xs, y))["mse"] for m in race[name].models]).mean(0)
            d = diebold_mariano(after - before, overlap=race.overlap)
            print(f"shuffle {name}: {before.mean():.4f} -> {after.mean():.4f}: {d.mean:+.4f} "
                  f"({d.low:+.4f} to {d.high:+.4f})")

    if args.heads:
        same_weekday = torch.arange(14, 0, -1) % 7 == 0           # 14 and 7 days before the forecast day
        for seed, model in zip(race["PatchTransformer"].seeds, race["PatchTransformer"].models):
            with torch.no_grad():
                _, weights = model.eval()(task.test[0], return_weights=True)
            for layer, w in enumerate(weights):
                shares = w[:, :, -1].mean(0)[:, same_weekday].sum(-1)   # (H,)
                print(f"heads seed {seed} layer {layer}: " + " ".join(f"{v:.2f}" for v in shares))


if __name__ == "__main__":
    main()
