"""12.5: the forecaster with each kernel beside attention-free ablations (no mixing; uniform
causal mixing), by the comparison protocol. ``python -m tools.experiments.efficient_attention_ablation``"""
from __future__ import annotations

import argparse
import time
from functools import partial

import torch

from labsupport.attention import (
    LinformerAttention,
    attention_kernel,
    linear_attention,
    local_attention,
    performer_attention,
)
from labsupport.compare import NAIVE, RIDGE, Trainable, compare
from labsupport.data import HORIZON, LOOKBACK, book_task
from labsupport.models import PatchTransformer


@attention_kernel(causal=True)
def itself(q, k, v, *, mask=None, is_causal=False):
    """Each token reads its own value only: no mixing across tokens."""
    return v


@attention_kernel(causal=True)
def uniform(q, k, v, *, mask=None, is_causal=False):
    """Every token reads the plain mean of the values up to it: mixing without content."""
    n = torch.arange(1, v.shape[-2] + 1, dtype=v.dtype, device=v.device)[:, None]
    return v.cumsum(-2) / n if is_causal else v.mean(-2, keepdim=True).expand_as(v)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--kernels", nargs="+", default=["full", "local", "linear", "performer", "self", "uniform",
                                                     "noncausal", "linformer"])
    p.add_argument("--stride", type=int, default=2)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--full-seeds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--patience", type=int, default=2)
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--layers", type=int, default=2)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    task = book_task(train_stride=a.stride)
    N = PatchTransformer(lookback=LOOKBACK, horizon=HORIZON, patch_len=24, stride=24).n_patches
    opts = {"full": lambda: dict(),
            "local": lambda: dict(kernel=partial(local_attention, window=4, block_size=N)),
            "linear": lambda: dict(kernel=linear_attention),
            "performer": lambda: dict(kernel=partial(performer_attention, num_features=32, generator=0)),
            "self": lambda: dict(kernel=itself), "uniform": lambda: dict(kernel=uniform),
            "noncausal": lambda: dict(causal=False),
            "linformer": lambda: dict(kernel=LinformerAttention(N, 8), causal=False)}

    def build(kind, revin):
        return PatchTransformer(lookback=LOOKBACK, horizon=HORIZON, patch_len=24, stride=24, d_model=a.width,
                                n_heads=4, n_layers=a.layers, d_ff=2 * a.width, attn_dropout=0.0, revin=revin,
                                **opts[kind]())
    models = {k: Trainable(lambda revin, k=k: build(k, revin), seeds=a.full_seeds if k == "full" else a.seeds)
              for k in a.kernels}
    t = time.perf_counter()
    r = compare(task, models, revin=True, seeds=a.seeds, epochs=a.epochs, patience=a.patience, lr=a.lr,
                batch_size=a.batch, schedule="plateau", progress=False)
    print(vars(a), f"{time.perf_counter() - t:.0f} s")
    r.table()
    for k in a.kernels:
        ref = "noncausal" if k == "linformer" else "full"
        if k != ref and ref in models:
            print(k, "vs", ref, r.judgement(k, ref))
        print(k, "vs ridge", r.judgement(k, RIDGE), "| vs naive", r.judgement(k, NAIVE))
    for k in ("local", "linear", "performer", "full"):
        for abl in ("self", "uniform"):
            if k in models and abl in models:
                print(k, "vs", abl, r.judgement(k, abl))


if __name__ == "__main__":
    main()
