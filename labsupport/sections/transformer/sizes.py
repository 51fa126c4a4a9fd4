"""12.2's sizes (``P.transformer``): the book's forecaster, trained beside the ridge and the
weekly naive forecast."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...profile import register

__all__ = ["Sizes", "CPU", "SMOKE", "GPU"]


@dataclass(frozen=True, kw_only=True)
class Sizes:
    train_stride: int                     # a training window every `train_stride` hours
    width: int                            # d_model of the forecaster (d_ff = 2 d_model)
    max_epochs: int                       # early stopping ends every run before this
    seeds: int


# tools/experiments/transformer_12_2.py: every run ends by early stopping (8-11 epochs), 49 s in all
CPU = Sizes(train_stride=2, width=32, max_epochs=30, seeds=3)
SMOKE = replace(CPU, train_stride=16, max_epochs=2, seeds=1)
# the claims read this race: the same training on a GPU
GPU = CPU

SIZES = register("transformer", cpu=CPU, smoke=SMOKE, gpu=GPU)
