"""The lab's sizes (``P.lab``) and its training recipe (`TRAINING`): Step 4's token sweep and its
memory budget, the races, Step 5's long-token run; and the byte models of a training step that
the gpu sizes are made from."""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from types import MappingProxyType

import torch

from ...profile import budgeted, register

__all__ = ["Sizes", "CPU", "SMOKE", "gpu", "TRAINING", "step_bytes", "activation_bytes", "fused_step_bytes"]

# One recipe for every trained model of the lab (fit's options; the seeds and the device are the
# comparison's): Adam on batches of 128 windows, the rate halved after every epoch that does not
# improve the validation error, stopped after three such epochs with the best weights restored.
TRAINING = MappingProxyType(dict(epochs=40, patience=3, lr=2e-3, batch_size=128, schedule="plateau"))


@dataclass(frozen=True, kw_only=True)
class Sizes:
    train_every: int                      # training windows whose forecast starts every n hours from midnight
    max_epochs: int                       # fit's budget (TRAINING's epochs)
    seeds: int                            # every trained model of the races and of Step 5
    tokens: tuple[int, ...]               # Step 4's token sweep (2-block encoder, batch 8, 4 heads)
    budget: float                         # bytes: naive steps whose predicted peak exceeds it are skipped
    step_reps: int                        # timed training steps per model, after 2 warm-ups


def step_bytes(N: int, *, size: int) -> int:
    """A training step of the naive encoder (2 blocks, batch 8, 4 heads): (layers + 2) score
    matrices, (2 + 2) x 8 x 4 x N^2 x s."""
    return (2 + 2) * 8 * 4 * N * N * size


def activation_bytes(N: int) -> int:
    """What the naive step holds beside its score matrices: at most 32 float32 (8, N, 64) activations."""
    return 32 * 8 * N * 64 * 4


def fused_step_bytes(N: int) -> int:
    """A step with SDPA or linear attention: at most 64 float32 (8, N, 64) activations."""
    return 64 * 8 * N * 64 * 4


# The training is the same in every profile: the lab's text rests on checked verdicts of these runs.
CPU = Sizes(train_every=8, max_epochs=40, seeds=3, tokens=(64, 128, 256, 512, 1024, 2048), budget=1.5e9,
            step_reps=5)
SMOKE = replace(CPU, train_every=24, max_epochs=1, seeds=2, tokens=(64, 128, 256), step_reps=2)


def gpu(card) -> Sizes:
    """The token sweep sized for ``card``: naive steps over the budget skipped, SDPA and linear
    attention at every length."""
    s = torch.finfo(card.sweep_dtype).bits // 8
    tokens, budget = budgeted(card, "lab tokens", 256, 32768, 64, partial(step_bytes, size=s),
                              activation_bytes, fused_step_bytes)
    return replace(CPU, tokens=tokens, budget=budget)


SIZES = register("lab", cpu=CPU, smoke=SMOKE, gpu=gpu, by_card=("tokens", "budget"))
