"""12.3's sizes (``P.positional_encodings``): the small forecasters, one token a day."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...profile import register

__all__ = ["Sizes", "CPU", "SMOKE", "GPU"]


@dataclass(frozen=True, kw_only=True)
class Sizes:
    train_stride: int
    width: int
    lr: float
    max_epochs: int
    seeds: int


# each forecaster over `seeds`, early stopping with the plateau schedule (tools/experiments/README.md)
CPU = Sizes(train_stride=4, width=32, lr=2e-3, max_epochs=30, seeds=2)
SMOKE = replace(CPU, train_stride=16, max_epochs=1, seeds=1)
GPU = replace(CPU, train_stride=1, width=64, max_epochs=40, seeds=3)

SIZES = register("positional_encodings", cpu=CPU, smoke=SMOKE, gpu=GPU)
