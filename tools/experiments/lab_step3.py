"""Lab Step 3 with the comparison protocol: which training configuration converges, how
fast, and where each model lands against the ridge and the weekly naive.

    OMP_NUM_THREADS=1 python -m tools.experiments.lab_step3 --models patch dlinear \\
        --stride 2 --seeds 3 --epochs 12 --schedule cosine --fit lr=0.002 batch_size=256

``--models`` picks from MODELS below; ``--set name:key=value`` changes one model's
constructor argument (``--set patch:d_model=32``) and ``--fit-model name:key=value``
one of its training options (``--fit-model dlinear:lr=0.01``).
"""
from __future__ import annotations

import argparse
import time

import torch

from labsupport.compare import Trainable, compare
from labsupport.data import HORIZON, LOOKBACK, book_task
from labsupport.models import (
    GRUForecaster,
    LinearForecaster,
    PatchGRUForecaster,
    PatchTransformer,
    TCNForecaster,
)
from tools.experiments._common import make_schedule, parse_options, parse_value

SIZES = dict(lookback=LOOKBACK, horizon=HORIZON)
MODELS = {
    "patch": (PatchTransformer, dict(d_model=64, n_heads=4, n_layers=2, d_ff=128, dropout=0.1)),
    "patch-linear": (PatchTransformer, dict(d_model=64, n_heads=4, n_layers=2, d_ff=128, dropout=0.1,
                                            attn_dropout=0.0, kernel="linear")),   # cannot drop weights
    "patch-naive": (PatchTransformer, dict(d_model=64, n_heads=4, n_layers=2, d_ff=128, dropout=0.1,
                                           kernel="naive")),
    "gru": (GRUForecaster, dict(hidden=64)),
    "pgru": (PatchGRUForecaster, dict(hidden=64)),           # the Transformer's 27 tokens, a GRU over them
    "tcn": (TCNForecaster, dict(hidden=32)),
    "dlinear": (LinearForecaster, dict()),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--stride", type=int, default=2)
    parser.add_argument("--horizon", type=int, default=HORIZON, help="hours ahead (24; 168: a week)")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--patience", type=int, default=3)
    parser.add_argument("--schedule", default="constant")
    parser.add_argument("--revin", type=parse_value, default=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--fit", nargs="*", default=[], help="fit options for every model: lr=0.002 ...")
    parser.add_argument("--set", nargs="*", default=[], help="model:key=value constructor changes")
    parser.add_argument("--fit-model", nargs="*", default=[], help="model:key=value fit changes")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    def per_model(items):
        out = {}
        for item in items:
            name, _, option = item.partition(":")
            out.setdefault(name, {}).update(parse_options([option]))
        return out

    changes, fit_changes = per_model(args.set), per_model(args.fit_model)
    specs = {}
    for name in args.models:
        cls, kwargs = MODELS[name]
        kwargs = {**kwargs, **changes.get(name, {})}
        own = dict(fit_changes.get(name, {}))
        epochs = own.get("epochs", args.epochs)
        schedule = make_schedule(own.pop("schedule", args.schedule), epochs)
        sizes = {**SIZES, "horizon": args.horizon}
        specs[name] = Trainable(lambda revin, cls=cls, kw=kwargs, sizes=sizes: cls(**sizes, **kw,
                                                                                revin=revin),
                                schedule=schedule, **own)
        print(f"{name}: {cls.__name__}({kwargs}) fit {own or ''}")
    task = book_task(train_stride=args.stride, horizon=args.horizon)
    started = time.perf_counter()
    result = compare(task, specs, revin=args.revin, seeds=args.seeds, epochs=args.epochs,
                     patience=args.patience, progress=False, **parse_options(args.fit))
    print(f"schedule {args.schedule}, fit {args.fit}, {args.threads} thread(s), "
          f"{time.perf_counter() - started:.0f} s in all")
    result.table()
    for name in args.models:
        print(f"  {name}: {result[name].params:,} parameters")
        for seed, rec, h in zip(result[name].seeds, result[name].records, result[name].histories):
            print(f"  {name} seed {seed}: {rec.stop_reason}, best epoch {rec.best_epoch} of "
                  f"{rec.epochs_run}, {rec.seconds_per_epoch:.2f} s/epoch; val MSE by epoch "
                  + " ".join(f"{v:.3f}" for v in h.val_loss))
    result.verdicts()


if __name__ == "__main__":
    main()
