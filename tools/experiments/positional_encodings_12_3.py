"""12.3's experiments as the notebook runs them, with options to try other sizes:

    main       every position signal over --seeds, then scored on 2x and 4x longer windows
    calendar   the calendar ablation: the whole calendar, and all of it but one group at a time

    python -m tools.experiments.positional_encodings_12_3 main --seeds 3 --lr 4e-3
    python -m tools.experiments.positional_encodings_12_3 calendar --without hour weekday season holiday

Defaults are the cpu profile's sizes.

Each prints its seconds, the verdict table and the numbers the notebook's sentences rest on.
"""
from __future__ import annotations

import argparse
import time
from functools import partial

import torch

from labsupport.compare import NAIVE, RIDGE, Trainable, compare, verdict_table
from labsupport.data import book_task
from labsupport.sections.positional_encodings import study

CALENDAR = {"hour": [0, 1], "week": [2, 3], "season": [4, 5], "holiday": [6]}


class CountedBack(torch.nn.Module):
    """The notebook's: a trained forecaster with its tokens numbered back from the forecast origin."""

    def __init__(self, model):
        super().__init__()
        self.model, self.revin = model, model.revin

    def forward(self, x):
        n_train, n = self.model.n_patches, x.shape[1] // study.TOKEN_HOURS
        return self.model(x, positions=torch.arange(n, device=x.device) + n_train - n)


def protocol(args):
    return dict(revin=True, seeds=args.seeds, epochs=args.epochs, patience=args.patience, lr=args.lr,
                batch_size=args.batch, schedule="plateau", progress=False)


def timed(what, fn):
    started = time.perf_counter()
    out = fn()
    print(f"{what}: {time.perf_counter() - started:.1f} s")
    return out


def main(args):
    task = book_task(train_stride=args.stride)
    rows = args.rows
    result = timed("train", lambda: compare(task, study.trainables(rows, width=args.width), **protocol(args)))
    verdict_table(result, [study.CONTROL, RIDGE])
    for name in rows:
        records = result[name].records
        print(name, [round(v, 4) for v in result[name].values()], [r.best_epoch for r in records],
              [r.stop_reason for r in records])
    longer = study.longer_tasks((1, 2, 4), train_stride=args.stride)
    at = timed("rescore", lambda: study.extrapolate(result, longer))
    back = study.extrapolate(study.counted_back(result, ["sinusoidal"], CountedBack), longer)
    study.extrapolation_table(at, back, rows)
    for f in (1, 2, 4):
        print(f, "ridge", round(at[f].mean(RIDGE), 4), "naive", round(at[f].mean(NAIVE), 4))
        for name in rows:
            if not at[f].failed(name):
                print("   ", name, [round(v, 4) for v in at[f][name].values()])
        print("    sin back", [round(v, 4) for v in back[f]["sinusoidal, counted back"].values()])


def calendar(args):
    """The notebook's ablation: the whole calendar, then all of it but one group at a time,
    beside the forecaster without a calendar (trained on the same windows and seeds)."""
    task = book_task(train_stride=args.stride, calendar=True)
    (_, time_), _ = task.test
    print("largest hour feature of a token (the mean over its 24 hours):",
          time_[:, :336, :2].reshape(len(time_), 14, 24, 2).mean(2).abs().max().item())
    same = bool((time_[:, 336:, :2] == time_[:1, 336:, :2]).all())
    print("horizon hours the same in every test window:", same)
    models = study.calendar_trainables(args.encoding, width=args.width, without=args.without)
    result = timed("calendar", lambda: compare(task, models, **protocol(args)))
    build = partial(study.forecaster, args.encoding, width=args.width)
    plain = timed("no calendar", lambda: compare(book_task(train_stride=args.stride),
                                                 {"no calendar": Trainable(build)}, **protocol(args)))
    result.entries = {"no calendar": plain["no calendar"], **result.entries}
    verdict_table(result, ["no calendar", "calendar", RIDGE])
    _, holiday = study.holiday_days(task)
    for name, entry in result.entries.items():
        if entry.trained:
            losses = [w["mse"] for w in entry.window_losses]
            print(f"{name:36s} {[round(v, 4) for v in entry.values()]} holidays "
                  f"{[round(float(w[holiday].mean()), 3) for w in losses]} other days "
                  f"{[round(float(w[~holiday].mean()), 4) for w in losses]}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["main", "calendar"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--stride", type=int, default=4)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--patience", type=int, default=3)
    parser.add_argument("--lr", type=float, default=4e-3)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--rows", nargs="+", default=[study.CONTROL, "causal mask only", "sinusoidal",
                                                      "RoPE", "ALiBi"])
    parser.add_argument("--without", nargs="*", default=["hour", "weekday", "holiday"],
                        choices=list(study.CALENDAR_COLUMNS))
    parser.add_argument("--encoding", default="sinusoidal")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    {"main": main, "calendar": calendar}[args.what](args)
