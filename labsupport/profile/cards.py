"""The card the gpu profile is sized for: `Card` (what torch reports for one CUDA device,
`Card.detect`), the cards it can be sized for by name (`CARDS`, `REFERENCE_CARD`) and the
share of free memory a sweep point may hold (`MEMORY_FRACTION`).

A card's memory sets the sweeps' lengths and budgets (`labsupport.profile.sizing`); its
compute capability sets their dtype (`Card.sweep_dtype`) and the SDPA backend their fused
kernel should run (`Card.fused_backend`).

>>> CARDS["T4"].sweep_dtype, CARDS["T4"].fused_backend, CARDS["H100"].fused_backend
(torch.float16, 'efficient', 'flash')
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from ..units import format_bytes

__all__ = ["Card", "CARDS", "REFERENCE_CARD", "MEMORY_FRACTION"]

# What a sweep point meant to run may hold of the card's free memory: the rest is headroom for
# what the byte models leave out (activations of other cells, the allocator's rounding).
MEMORY_FRACTION = 0.6


@dataclass(frozen=True)
class Card:
    """One CUDA device as the gpu profile sizes for it.

    ``total_bytes`` and ``free_bytes`` of memory (``get_device_properties(i).total_memory``,
    ``mem_get_info()``), ``capability`` ``(major, minor)``, ``bf16``: native bfloat16
    arithmetic (not emulated), ``cudnn``: the cuDNN runtime version (``91701`` is 9.17.1;
    None without cuDNN), ``cuda``: the CUDA version torch was built with (``"12.8"``).
    """

    name: str
    total_bytes: int
    free_bytes: int
    capability: tuple
    bf16: bool
    cudnn: int | None = None
    cuda: str | None = None

    @classmethod
    def detect(cls, device=None) -> Card | None:
        """The CUDA device torch computes on (``device``: an index, None for the current one), or
        None where torch has none or cannot read it."""
        if not torch.cuda.is_available():
            return None
        try:
            index = torch.cuda.current_device() if device is None else device
            total = torch.cuda.get_device_properties(index).total_memory
            free, _ = torch.cuda.mem_get_info(index)
            capability = tuple(torch.cuda.get_device_capability(index))
            name = torch.cuda.get_device_name(index)
            bf16 = capability >= (8, 0) and _bf16_supported()
        except (AssertionError, RuntimeError):     # a build without CUDA (is_available patched)
            return None
        return cls(name, int(total), int(free), capability, bf16, _cudnn_version(), torch.version.cuda)

    @property
    def usable_bytes(self) -> int:
        """The most a sweep point meant to run may hold: ``MEMORY_FRACTION`` of the free memory."""
        return int(MEMORY_FRACTION * min(self.total_bytes, self.free_bytes))

    @property
    def sweep_dtype(self) -> torch.dtype:
        """bfloat16 where the card computes it natively (8.0+), float16 on 7.x (a T4's tensor
        cores; SDPA's memory-efficient kernel, no flash), float32 on older cards."""
        if self.bf16 and self.capability >= (8, 0):
            return torch.bfloat16
        return torch.float16 if self.capability >= (7, 0) else torch.float32

    @property
    def fused_backend(self) -> str:
        """The SDPA backend the fused sweeps should run in ``sweep_dtype``: ``"flash"`` (8.0+),
        ``"cudnn"`` where torch puts cuDNN attention first (`_prefers_cudnn`), else
        ``"efficient"`` (the memory-efficient kernel: float16 and float32 from 5.0)."""
        if self.sweep_dtype in (torch.float16, torch.bfloat16) and self.capability >= (8, 0):
            return "cudnn" if _prefers_cudnn(self) else "flash"
        return "efficient" if self.capability >= (5, 0) else "math"

    def __str__(self) -> str:
        major, minor = self.capability
        return f"{self.name} ({format_bytes(self.total_bytes)}, compute capability {major}.{minor})"


def _bf16_supported() -> bool:
    """torch's bfloat16 check without emulation (torch >= 2.3 counts a T4's emulated bfloat16)."""
    try:
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    except TypeError:                                         # older torch: no emulation to leave out
        return bool(torch.cuda.is_bf16_supported())


def _cudnn_version() -> int | None:
    if torch.version.hip or not torch.backends.cudnn.is_available():
        return None
    return torch.backends.cudnn.version()


def _prefers_cudnn(card: Card) -> bool:
    """torch's rule for trying cuDNN attention first (2.13's sdp_utils.cpp,
    ``check_prefer_cudnn_attention``): a 9.x or 10.x card, cuDNN newer than 9.15.0, on CUDA 12
    builds only 9.0, 9.3, 10.0 and 10.3; ``TORCH_CUDNN_SDPA_DEPRIORITIZED=1`` turns it off."""
    if os.environ.get("TORCH_CUDNN_SDPA_DEPRIORITIZED", "").lower() in ("1", "true", "yes", "on"):
        return False
    major, minor = card.capability
    if card.cudnn is None or card.cudnn <= 91500 or major not in (9, 10):
        return False
    cuda_major = int(card.cuda.split(".")[0]) if card.cuda else 0
    return cuda_major >= 13 or minor in (0, 3)


def _named(name: str, total: int, capability: tuple) -> Card:
    """A card by what torch reports for it, with about 400 MiB held by the CUDA context."""
    return Card(name, total, total - 400 * 2 ** 20, capability, bf16=capability >= (8, 0),
                cudnn=91002, cuda="12.8")


# Cards to size the gpu profile for by name (README's table, `current(card=...)`): memory as
# torch reports it, which is a little below the nominal size.
CARDS = {
    "RTX3060": _named("NVIDIA GeForce RTX 3060", 12_622_168_064, (8, 6)),
    "T4": _named("Tesla T4", 15_828_320_256, (7, 5)),
    "L4": _named("NVIDIA L4", 23_802_478_592, (8, 9)),
    "A100-40GB": _named("NVIDIA A100-SXM4-40GB", 42_298_834_944, (8, 0)),
    "H100": _named("NVIDIA H100 80GB HBM3", 84_986_691_584, (9, 0)),
    "A100-80GB": _named("NVIDIA A100-SXM4-80GB", 85_051_572_224, (8, 0)),
    "H200": _named("NVIDIA H200", 150_110_011_392, (9, 0)),
}
# PRESETS["gpu"], and the gpu profile where no card can be read
REFERENCE_CARD = "A100-80GB"
