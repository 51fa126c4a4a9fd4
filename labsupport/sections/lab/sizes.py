"""The lab's sizes (``P.lab``): Step 4's token sweep, the races, the stretch goals; and the byte
models of a training step its gpu sizes are made from."""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import torch

from ...profile import budgeted, register

__all__ = ["Sizes", "CPU", "SMOKE", "gpu", "step_bytes", "activation_bytes", "fused_step_bytes"]


@dataclass(frozen=True, kw_only=True)
class Sizes:
    tokens: tuple[int, ...]               # Step 4's token sweep (2-block encoder, batch 8, 4 heads)
    budget: float                         # bytes: naive steps whose predicted peak exceeds it are skipped
    train_stride: int
    max_epochs: int
    seeds: int                            # every network of the race
    ablation_seeds: int                   # the shuffle test's Transformers without encoding or mask
    linear_seeds: int                     # Step 5: linear attention
    step_reps: int                        # timed training steps per model (batch 128)
    stretch_stride: int                   # the stretch goals
    stretch_seeds: int
    xl_memories: tuple[int, ...]          # cached day tokens per layer


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


# The training is the same in every profile: the lab's answer is a set of checked verdicts on
# these races (tools/experiments/README.md, the lab).
CPU = Sizes(tokens=(64, 128, 256, 512, 1024, 2048), budget=1.5e9, train_stride=2, max_epochs=30, seeds=3,
            ablation_seeds=2, linear_seeds=2, step_reps=5, stretch_stride=4, stretch_seeds=2,
            xl_memories=(0, 7))
SMOKE = replace(CPU, tokens=(64, 128, 256), max_epochs=1, train_stride=16, seeds=1, linear_seeds=1,
                ablation_seeds=1, step_reps=2, stretch_stride=16, stretch_seeds=1)


def gpu(card) -> Sizes:
    """The token sweep sized for ``card``: naive steps over the budget skipped, SDPA and linear
    attention at every length."""
    s = torch.finfo(card.sweep_dtype).bits // 8
    tokens, budget = budgeted(card, "lab tokens", 256, 32768, 64, partial(step_bytes, size=s),
                              activation_bytes, fused_step_bytes)
    return replace(CPU, tokens=tokens, budget=budget)


SIZES = register("lab", cpu=CPU, smoke=SMOKE, gpu=gpu, by_card=("tokens", "budget"))
