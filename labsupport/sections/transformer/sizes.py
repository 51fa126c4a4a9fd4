"""12.2's sizes (``P.transformer``): the lag readers, the deep stack, the book's forecaster."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...profile import register

__all__ = ["Sizes", "CPU", "SMOKE", "GPU"]


@dataclass(frozen=True, kw_only=True)
class Sizes:
    heads_epochs: int                     # the lag readers (one head, four heads), on the CPU
    heads_train_stride: int
    heads_seeds: int
    deep_steps: int                       # Adam steps per version of the 12-block stack
    deep_seeds: int                       # initialisations per version
    forecaster_width: int
    forecaster_train_stride: int
    forecaster_max_epochs: int
    forecaster_seeds: int


# tools/experiments/README.md (heads_12_2.py, layernorm_12_2.py): early stopping ends every run.
CPU = Sizes(heads_epochs=40, heads_train_stride=3, heads_seeds=3, deep_steps=60, deep_seeds=3,
            forecaster_width=32, forecaster_train_stride=2, forecaster_max_epochs=30, forecaster_seeds=3)
SMOKE = replace(CPU, heads_epochs=1, heads_seeds=1, heads_train_stride=16, deep_steps=10, deep_seeds=1,
                forecaster_max_epochs=2, forecaster_train_stride=16, forecaster_seeds=1)
# the readers and the deep stack as on the CPU (the claims are about them); the book's default
# forecaster on every window
GPU = replace(CPU, forecaster_width=64, forecaster_train_stride=1, forecaster_max_epochs=40)

SIZES = register("transformer", cpu=CPU, smoke=SMOKE, gpu=GPU)
