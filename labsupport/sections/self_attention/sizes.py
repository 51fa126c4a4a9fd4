"""12.1's sizes (``P.self_attention``): the encoder-decoder comparison and naive attention's bill."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...byte_models import inputs_bytes, naive_bytes
from ...profile import fitting, register

__all__ = ["Sizes", "CPU", "SMOKE", "gpu", "bill_bytes"]


@dataclass(frozen=True, kw_only=True)
class Sizes:
    # the encoder-decoder with one context vector or with attention, one comparison per input
    # length, every run ended by early stopping
    bottleneck_hours: tuple[int, ...]     # the input lengths compared
    bottleneck_train_stride: int
    bottleneck_seeds: int
    bottleneck_max_epochs: int
    bill_lengths: tuple[int, ...]         # naive attention's bill (one head of 64, float32)


def bill_bytes(L: int) -> int:
    """Naive attention, one head of 64, float32: (2 L^2 + L D) x 4, and q, k, v."""
    return naive_bytes(L) + inputs_bytes(L)


# Trained on the CPU in every profile, so that the checked claims read the same runs.
CPU = Sizes(bottleneck_hours=(24, 72, 168, 336), bottleneck_train_stride=12, bottleneck_seeds=3,
            bottleneck_max_epochs=60, bill_lengths=(1024, 2048, 4096, 8192))
SMOKE = replace(CPU, bottleneck_hours=(24, 168, 336), bottleneck_train_stride=48, bottleneck_seeds=2,
                bottleneck_max_epochs=2, bill_lengths=(2048, 4096, 8192))


def gpu(card) -> Sizes:
    """The cpu training; the bill at every length that fits the card."""
    return replace(CPU, bill_lengths=fitting(card, "bill lengths", 4096, 65536, 1024, bill_bytes))


SIZES = register("self_attention", cpu=CPU, smoke=SMOKE, gpu=gpu, by_card=("bill_lengths",))
