"""Seconds per training epoch of the book's forecasters, measured round-robin in one
process so that a busy machine slows every configuration alike: compare the ratios.

    OMP_NUM_THREADS=1 python -m tools.experiments.speed --threads 1 --rounds 5

Each configuration times a few Adam steps on random windows (336 h in, 24 out) at its
batch size; an epoch is (training windows / batch size) steps, for the window counts
of `labsupport.data.book_task` at train_stride 1 (17,186) and 2 (8,593).
"""
from __future__ import annotations

import argparse
import statistics
import time
from functools import partial

import torch
import torch.nn.functional as F

from labsupport.attention import (
    LinformerAttention,
    linear_attention,
    local_attention,
    longformer_attention,
    performer_attention,
)
from labsupport.models import GRUForecaster, LinearForecaster, PatchTransformer, TCNForecaster

L, T = 336, 24
WINDOWS = {1: 17186, 2: 8593, 4: 4297}


def patch(d=64, **kw):
    """A PatchTransformer builder; linear and Performer kernels need ``attn_dropout=0.0`` (they
    cannot drop attention weights)."""
    return lambda: PatchTransformer(lookback=L, horizon=T, d_model=d, n_heads=4, n_layers=2,
                                    d_ff=2 * d, dropout=0.1, **kw)


CONFIGS = {
    "lab patch d64 p24/12 b128": (patch(64), 128),
    "lab patch d64 p24/12 b256": (patch(64), 256),
    "lab patch d64 p24/24 b256": (patch(64, stride=24), 256),
    "patch d32 p24/12 b256": (patch(32), 256),
    "patch d32 p24/24 b256": (patch(32, stride=24), 256),
    "patch d32 linear b256": (patch(32, kernel=linear_attention, attn_dropout=0.0), 256),
    "patch d32 local4 b256": (patch(32, kernel=partial(local_attention, window=4)), 256),
    "patch d32 longformer b256": (patch(32, kernel=partial(longformer_attention, window=4,
                                                           global_tokens=[26])), 256),
    "patch d32 performer32 b256": (patch(32, kernel=partial(performer_attention, num_features=32,
                                                            generator=0), attn_dropout=0.0), 256),
    "patch d32 linformer8 b256": (patch(32, kernel=LinformerAttention(27, 8), causal=False), 256),
    "gru h64 b256": (lambda: GRUForecaster(lookback=L, horizon=T, hidden=64), 256),
    "gru h32 b256": (lambda: GRUForecaster(lookback=L, horizon=T, hidden=32), 256),
    "tcn h32 b256": (lambda: TCNForecaster(lookback=L, horizon=T, hidden=32), 256),
    "tcn h16 b256": (lambda: TCNForecaster(lookback=L, horizon=T, hidden=16), 256),
    "dlinear b128": (lambda: LinearForecaster(lookback=L, horizon=T), 128),
}


def step_seconds(model, batch_size, steps):
    optimiser = torch.optim.Adam(model.parameters(), 1e-3)
    x, y = torch.randn(batch_size, L, 1), torch.randn(batch_size, T, 1)
    times = []
    for _ in range(steps + 1):
        t0 = time.perf_counter()
        loss = F.mse_loss(model(x), y)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        times.append(time.perf_counter() - t0)
    return times[1:]                      # the first step warms up


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None, help="substrings of config names")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    configs = {k: v for k, v in CONFIGS.items() if not args.only or any(s in k for s in args.only)}
    models = {name: (build(), bs) for name, (build, bs) in configs.items()}
    times = {name: [] for name in models}
    for _ in range(args.rounds):                      # round-robin: contention hits all alike
        for name, (model, bs) in models.items():
            times[name] += step_seconds(model, bs, args.steps)
    ref = statistics.median(times[next(iter(times))])
    print(f"{args.threads} thread(s); median of {args.rounds * args.steps} steps; ratio to the first")
    for name, t in times.items():
        step, bs = statistics.median(t), models[name][1]
        epochs = "  ".join(f"stride {s}: {step * n / bs:6.2f} s/epoch" for s, n in WINDOWS.items())
        print(f"{name:30s} {step * 1e3:7.1f} ms/step  x{step / ref:5.2f}  {epochs}")


if __name__ == "__main__":
    main()
