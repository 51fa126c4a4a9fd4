"""12.5's sizes (``P.efficient_attention``): the kernels' sweep, the Performer's features, the
forecaster's table, the stream's memory; and the byte models its gpu sizes are made from."""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import torch

from ...byte_models import inputs_bytes, naive_bytes
from ...profile import budgeted, fitting, register

__all__ = ["Sizes", "CPU", "SMOKE", "gpu", "naive_sweep_bytes", "others_bytes"]


@dataclass(frozen=True, kw_only=True)
class Sizes:
    lengths: tuple[int, ...]              # the kernels' sweep
    flash_lengths: tuple[int, ...]        # our tiled loop in Python: slow
    budget: float                         # bytes: naive points above it are skipped
    performer_features: tuple[int, ...]
    width: int                            # the forecaster's PatchTransformer
    train_stride: int
    max_epochs: int
    full_seeds: int                       # full attention (causal): the reference
    seeds: int                            # every other kernel and the two ablations
    stream_lengths: tuple[int, ...]       # a stream's exact CPU peaks, every step recorded


def naive_sweep_bytes(L: int, *, size: int) -> int:
    """Naive attention in the sweep (4 heads of 32): 2 H L^2 s + H L D s."""
    return naive_bytes(L, heads=4, head_dim=32, size=size)


def others_bytes(L: int, *, size: int) -> int:
    """Every other kernel at L (4 heads of 32): at most 24 float32 tensors of the output's shape
    (the Performer's 128 features are the most), and q, k, v."""
    return 24 * 4 * L * 32 * 4 + inputs_bytes(L, heads=4, head_dim=32, size=size)


# the accuracy table: one patch per day (14 tokens), the plateau schedule from lr 5e-3, batch
# 512, patience 2, every run ended by early stopping; the same in every profile
CPU = Sizes(lengths=(256, 512, 1024, 2048, 4096), flash_lengths=(256, 512, 1024, 2048), budget=200e6,
            performer_features=(16, 32, 64, 128, 256, 512, 1024), width=32, train_stride=2,
            max_epochs=30, full_seeds=3, seeds=2, stream_lengths=(1000, 2000, 4000))
SMOKE = replace(CPU, lengths=(256, 512, 1024), flash_lengths=(256, 512, 1024), train_stride=16,
                max_epochs=2, full_seeds=1, seeds=1, stream_lengths=(256, 512, 1024))


def gpu(card) -> Sizes:
    """The sweep sized for ``card`` (naive points over the budget skipped, the rest run at every
    length); the accuracy table as on the CPU."""
    s = torch.finfo(card.sweep_dtype).bits // 8
    lengths, budget = budgeted(card, "efficient lengths", 1024, 65536, 256,
                               partial(naive_sweep_bytes, size=s),
                               partial(inputs_bytes, heads=4, head_dim=32, size=s),
                               partial(others_bytes, size=s))
    return replace(CPU, lengths=lengths, budget=budget,
                   flash_lengths=fitting(card, "efficient flash lengths", 1024, 8192, 256,
                                         partial(others_bytes, size=s)),
                   performer_features=(16, 32, 64, 128, 256, 512, 1024, 2048),
                   stream_lengths=(2000, 4000, 8000))


SIZES = register("efficient_attention", cpu=CPU, smoke=SMOKE, gpu=gpu,
                 by_card=("lengths", "flash_lengths", "budget"))
