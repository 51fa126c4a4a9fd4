"""12.3's sizes (``P.positional_encodings``): the small forecasters, one token a day."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...profile import register

__all__ = ["Sizes", "CPU", "SMOKE", "GPU"]


@dataclass(frozen=True, kw_only=True)
class Sizes:
    train_stride: int      # training windows start this many hours apart
    width: int             # d_model of the section's forecaster (4 heads, 2 layers)
    lr: float
    max_epochs: int        # a budget early stopping ends well before (best epochs 4-15)
    patience: int
    seeds: int


# each forecaster over `seeds`, early stopping with the plateau schedule
# (tools/experiments/positional_encodings_12_3.py); 27 trainings, about 2.5 minutes on 2 cores
CPU = Sizes(train_stride=4, width=32, lr=4e-3, max_epochs=30, patience=3, seeds=3)
SMOKE = replace(CPU, train_stride=16, max_epochs=1, seeds=1)
# the same training on a GPU: the checked claims read these runs
GPU = CPU

SIZES = register("positional_encodings", cpu=CPU, smoke=SMOKE, gpu=GPU)
