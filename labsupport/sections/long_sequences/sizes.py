"""12.4's sizes (``P.long_sequences``): the cost sweeps, the context curve, the segment cache;
and the byte models its gpu sizes are made from."""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import torch

from ...byte_models import fused_bytes, inputs_bytes, naive_bytes
from ...profile import fitting, register, with_wall

__all__ = ["Sizes", "CPU", "SMOKE", "gpu", "GPU_BLOCK", "fused_sweep_bytes", "final_bytes",
           "backward_bytes", "segment_bytes", "wall_bytes"]


@dataclass(frozen=True, kw_only=True)
class Sizes:
    wall_lengths: tuple[int, ...]         # naive attention until the out-of-memory wall
    wall_budget: float | None             # bytes: naive points whose model exceeds it are skipped
    fused_lengths: tuple[int, ...]        # naive against fused kernels, 4 heads, causal
    final_lengths: tuple[int, ...]        # the last step, one head, causal
    flash_block: int                      # the tiled loop's block size, in elements
    context_days: tuple[int, ...]         # the context curve (demand)
    context_ar1_days: tuple[int, ...]     # the context curve (AR(1))
    context_train_stride: int
    context_max_epochs: int
    context_seeds: int                    # demand
    context_ar1_seeds: int                # AR(1)
    segment_totals: tuple[int, ...]       # tokens through the segment recurrence
    backward_lengths: tuple[int, ...]     # forward + backward sweep


def wall_bytes(L: int) -> int:
    """Naive attention, one head of 64, float32, and q, k, v (the wall sweep's points)."""
    return naive_bytes(L) + inputs_bytes(L)


def fused_sweep_bytes(L: int, *, size: int, block: int) -> int:
    """The fused sweep (4 heads of 64, causal): naive attention's peak and q, k, v, or a fused
    kernel's with tiles of ``block``, whichever is larger."""
    naive = naive_bytes(L, heads=4, causal=True, size=size) + inputs_bytes(L, heads=4, size=size)
    return max(naive, fused_bytes(L, heads=4, size=size, block=block))


def final_bytes(L: int, *, size: int) -> int:
    """The last step, naive attention (one head of 64, causal) and q, k, v."""
    return naive_bytes(L, causal=True, size=size) + inputs_bytes(L, size=size)


def backward_bytes(L: int) -> int:
    """The training sweep, float32, one head, causal: naive attention's forward and backward hold
    at most 4 (L, L) float32 matrices and 2 bool masks, and q, k, v with their gradients (a bound
    rounded up from CPU peaks: 3.3 (L, L) matrices at L = 4096)."""
    return 18 * L * L + 2 * inputs_bytes(L)


def segment_bytes(T: int) -> int:
    """The segment recurrence in one pass of T tokens (4 heads, width 32, float32): 4 (4, T, T)
    float32 matrices and 256 floats per token. Math: (16 T^2 + 256 T) x 4."""
    return (16 * T * T + 256 * T) * 4


# float32 sweeps on the CPU; the context curve under the plateau schedule, every run ended by
# early stopping (tools/experiments/README.md, context_12_4.py)
CPU = Sizes(wall_lengths=(512, 1024, 2048, 4096, 8192, 16384), wall_budget=1.2e9,
            fused_lengths=(1024, 2048, 4096, 8192), final_lengths=(4096, 8192, 16384), flash_block=256,
            context_days=(1, 7, 14, 28), context_ar1_days=(1, 7, 14), context_train_stride=2,
            context_max_epochs=40, context_seeds=3, context_ar1_seeds=2,
            segment_totals=(512, 1024, 2048, 4096), backward_lengths=(1024, 2048, 4096))
SMOKE = replace(CPU, wall_lengths=(512, 1024, 2048), fused_lengths=(1024, 2048, 4096),
                final_lengths=(1024, 2048, 4096), context_train_stride=32, context_max_epochs=2,
                context_seeds=1, context_ar1_seeds=1, segment_totals=(512, 1024, 2048),
                backward_lengths=(256, 512, 1024))
GPU_BLOCK = 1024                          # a (4, 1024, 1024) float32 tile: 17 MB


def gpu(card) -> Sizes:
    """Sweeps sized for ``card``: the naive wall and the last step run into the out-of-memory
    wall at a length the whole card cannot hold; the context curve as on the CPU."""
    s = torch.finfo(card.sweep_dtype).bits // 8
    wall = fitting(card, "wall lengths", 4096, 262144, 512, wall_bytes)
    last = fitting(card, "final lengths", 16384, 131072, 4096, partial(final_bytes, size=s))
    last = with_wall(last, partial(naive_bytes, causal=True, size=s), card)
    if fused_bytes(last[-1], heads=1, size=s, block=GPU_BLOCK) > card.usable_bytes:
        raise ValueError(f"{card} has too little memory for SDPA at L = {last[-1]}; "
                         "use LABSUPPORT_PROFILE=cpu")
    return Sizes(
        wall_lengths=with_wall(wall, naive_bytes, card), wall_budget=None,
        fused_lengths=fitting(card, "fused lengths", 4096, 32768, 1024,
                              partial(fused_sweep_bytes, size=s, block=GPU_BLOCK)),
        final_lengths=last, flash_block=GPU_BLOCK,
        # the context curve as on the CPU: its claims read those runs
        context_days=CPU.context_days, context_ar1_days=CPU.context_ar1_days,
        context_train_stride=CPU.context_train_stride, context_max_epochs=CPU.context_max_epochs,
        context_seeds=CPU.context_seeds, context_ar1_seeds=CPU.context_ar1_seeds,
        segment_totals=fitting(card, "segment totals", 2048, 16384, 512, segment_bytes),
        backward_lengths=fitting(card, "backward lengths", 1024, 4096, 256, backward_bytes))


SIZES = register("long_sequences", cpu=CPU, smoke=SMOKE, gpu=gpu,
                 by_card=("wall_lengths", "wall_budget", "fused_lengths", "final_lengths",
                          "backward_lengths", "segment_totals"))
