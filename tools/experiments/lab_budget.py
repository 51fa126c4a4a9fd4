"""The lab's Step 3 and Step 5 training, as the notebook runs them with a profile (default:
cpu) and torch's own thread count: wall time of each part, to check the lab against its
5-minute budget on a quiet 2-core machine. The PatchTransformers run without
attention-weight dropout (``attn_dropout=0.0``), as the notebook's: linear attention cannot
apply it, and on a CPU it keeps the fused SDPA kernel.

    python -m tools.experiments.lab_budget                 # every part
    python -m tools.experiments.lab_budget --parts patch   # one part

Parts: patch (PatchTransformer), dlinear, gru, tcn (Step 3, with ridge and weekly naive)
and linear (Step 5: linear attention, the same configuration as the PatchTransformer).
"""
from __future__ import annotations

import argparse
import time

import torch

from labsupport import profile
from labsupport.compare import Trainable, compare, warmup_cosine
from labsupport.data import HORIZON, LOOKBACK, book_task
from labsupport.models import GRUForecaster, LinearForecaster, PatchTransformer, TCNForecaster

SIZES = dict(lookback=LOOKBACK, horizon=HORIZON)


def lab_models(P):
    """The proposed Step 3 (and Step 5) models and their own training options."""
    rnn = dict(seeds=P.lab_rnn_seeds, lr=1e-2, batch_size=256)
    return {
        "patch": ("PatchTransformer", Trainable(
            lambda revin: PatchTransformer(**SIZES, dropout=0.1, attn_dropout=0.0, revin=revin),
            seeds=P.lab_seeds)),
        "dlinear": ("DLinear", Trainable(
            lambda revin: LinearForecaster(**SIZES, revin=revin), seeds=P.lab_seeds, epochs=20,
            **LinearForecaster.FIT_OPTIONS)),
        "gru": ("GRU", Trainable(
            lambda revin: GRUForecaster(**SIZES, hidden=P.lab_gru_hidden, revin=revin), **rnn)),
        "tcn": ("TCN", Trainable(
            lambda revin: TCNForecaster(**SIZES, hidden=P.lab_tcn_hidden, revin=revin), **rnn)),
        "linear": ("linear attention", Trainable(
            lambda revin: PatchTransformer(**SIZES, dropout=0.1, attn_dropout=0.0, kernel="linear",
                                           revin=revin),
            seeds=P.lab_linear_seeds)),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--parts", nargs="+", default=["patch", "dlinear", "gru", "tcn", "linear"])
    args = parser.parse_args()
    P = profile.current(args.profile)
    print(f"{P}, {torch.get_num_threads()} threads")
    started = time.perf_counter()
    task = book_task(train_stride=P.lab_train_stride)
    print(f"data: {time.perf_counter() - started:.1f} s; {task}")
    models = lab_models(P)
    for part in args.parts:
        name, spec = models[part]
        t0 = time.perf_counter()
        result = compare(task, {name: spec}, revin=True, epochs=P.lab_max_epochs, patience=3,
                         lr=2e-3, batch_size=128, schedule=warmup_cosine(P.lab_max_epochs),
                         device=P.device, progress=False)
        print(f"\n== {part}: {time.perf_counter() - t0:.0f} s wall")
        result.table()
    print(f"\nall parts: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
