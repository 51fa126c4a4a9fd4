"""The gpu profile sized for a card (`gpu_sizes`): every sweep from the byte models
(`labsupport.byte_models`) of what it holds at its peak, within the card's usable memory
(`Card.usable_bytes`); the sweeps meant to hit the out-of-memory wall end at a length the
whole card cannot hold. Its training sizes (`GPU_FIXED`) do not depend on the card.

>>> from labsupport.profile import CARDS
>>> max(gpu_sizes(CARDS["T4"]).bill_lengths), max(gpu_sizes(CARDS["A100-80GB"]).bill_lengths)
(32768, 65536)
"""
from __future__ import annotations

from functools import partial

import torch

from ..byte_models import (
    backward_bytes,
    bill_bytes,
    efficient_naive_bytes,
    efficient_others_bytes,
    final_bytes,
    fused_bytes,
    fused_sweep_bytes,
    inputs_bytes,
    lab_activation_bytes,
    lab_fused_bytes,
    lab_step_bytes,
    naive_bytes,
    segment_bytes,
)
from ..units import format_bytes
from .cards import MEMORY_FRACTION, Card
from .presets import GPU_FIXED, Sizes

__all__ = ["gpu_sizes"]


def gpu_sizes(card: Card) -> Sizes:
    """Every setting of the gpu profile sized for ``card``."""
    return Sizes(**GPU_FIXED, **_sweeps(card))


def _powers(lo: int, hi: int) -> tuple:
    """The powers of two from lo to hi."""
    return tuple(1 << k for k in range(lo.bit_length() - 1, hi.bit_length()))


def _fitting(card: Card, what: str, lo: int, hi: int, floor: int, fits) -> tuple:
    """Powers of two from ``lo`` to the longest ``L <= hi`` with ``fits(L)``, at least three:
    where fewer fit, the three ending at the longest that fits, but none below ``floor``."""
    top = hi
    while top >= floor and not fits(top):
        top //= 2
    start = min(lo, top // 4)
    if start < floor:
        room = "" if fits.room == card.usable_bytes else f"{format_bytes(fits.room)} of "
        raise ValueError(
            f"{card} has too little memory for the gpu profile: its {what} need "
            f"{format_bytes(fits.model(4 * floor))} at L = {4 * floor} (three lengths from "
            f"{floor}) within {room}{format_bytes(card.usable_bytes)} ({MEMORY_FRACTION:.0%} of "
            "the free memory); use LABSUPPORT_PROFILE=cpu")
    return _powers(start, top)


class _Fits:
    """``fits(L)``: the byte model ``model(L)`` within ``room`` bytes."""

    def __init__(self, model, room: int):
        self.model, self.room = model, room

    def __call__(self, L: int) -> bool:
        return self.model(L) <= self.room


def _with_wall(runs: tuple, model, card: Card) -> tuple:
    """``runs`` and then the first longer power of two whose model exceeds the whole card: it
    runs out of memory there (cost_sweep catches it). Lengths between, which might run or
    not, are left out."""
    L = 2 * runs[-1]
    while model(L) <= card.total_bytes:
        L *= 2
    return (*runs, L)


def _budgeted(card: Card, what: str, lo: int, hi: int, floor: int, naive, extra, others):
    """(lengths, budget) of a sweep that skips naive points over its budget: the budget leaves
    ``extra(top)`` of the usable memory for what naive attention holds beside its model; at
    least 3 naive points run, the longest length is skipped; ``others(L)``, every other
    kernel, runs at every length (at most ``hi`` unless naive still runs there)."""
    room = card.usable_bytes
    top = hi
    while naive(top) <= room - extra(top):                   # naive skips at least the longest
        top *= 2
    while others(top) > room and top > lo:                   # the others run at every length
        top //= 2
    if others(top) > room or naive(top) <= room - extra(top):
        raise ValueError(f"{card} has too little memory for the gpu profile: its {what} need "
                         f"{format_bytes(others(top))} at L = {top} within {format_bytes(room)}; "
                         "use LABSUPPORT_PROFILE=cpu")
    budget = int((room - extra(top)) // 10 ** 8 * 10 ** 8)   # whole 100 MB, rounded down
    runs = _fitting(card, what, lo, top, floor, _Fits(naive, budget))
    return _powers(runs[0], top), budget


def _sweeps(card: Card) -> dict:
    """The gpu profile's sweep settings for ``card``: lengths from the byte models; ``lo`` and
    ``hi`` are each sweep's shortest and longest on an 80 GB card, ``floor`` the cpu
    profile's shortest."""
    dtype = card.sweep_dtype
    s, room = torch.finfo(dtype).bits // 8, card.usable_bytes
    block = GPU_FIXED["flash_block"]
    # 12.4's wall is the same call as 12.1's bill: naive attention, one head of 64, float32
    wall = _fitting(card, "wall lengths", 4096, 262144, 512, _Fits(bill_bytes, room))
    last = _fitting(card, "final lengths", 16384, 131072, 4096, _Fits(partial(final_bytes, size=s), room))
    last = _with_wall(last, partial(naive_bytes, causal=True, size=s), card)
    if fused_bytes(last[-1], heads=1, size=s, block=block) > room:
        raise ValueError(f"{card} has too little memory for SDPA at L = {last[-1]}; "
                         "use LABSUPPORT_PROFILE=cpu")
    efficient, efficient_budget = _budgeted(
        card, "efficient lengths", 1024, 65536, 256, partial(efficient_naive_bytes, size=s),
        partial(inputs_bytes, heads=4, head_dim=32, size=s), partial(efficient_others_bytes, size=s))
    tokens, lab_budget = _budgeted(card, "lab tokens", 256, 32768, 64, partial(lab_step_bytes, size=s),
                                   lab_activation_bytes, lab_fused_bytes)
    return {
        # dtype of the cost sweeps' inputs (12.4, 12.5, the lab) and the SDPA backend the fused
        # sweeps should run: flash and cuDNN take only float16/bfloat16, so float32 inputs would
        # time the memory-efficient kernel
        "sweep_dtype": dtype,
        "fused_backend": card.fused_backend,
        # 12.1: the bill of naive attention, every point within the usable memory
        "bill_lengths": _fitting(card, "bill lengths", 4096, 65536, 1024, _Fits(bill_bytes, room)),
        # 12.4: no budget, so the naive wall and the last step run into the out-of-memory wall
        # (cost_sweep catches it) at a length the whole card cannot hold; the fused sweep
        # (naive too) fits at every length
        "wall_lengths": _with_wall(wall, naive_bytes, card),
        "wall_budget": None,
        "fused_lengths": _fitting(card, "fused lengths", 4096, 32768, 1024,
                                  _Fits(partial(fused_sweep_bytes, size=s, block=block), room)),
        "final_lengths": last,
        "segment_totals": _fitting(card, "segment totals", 2048, 16384, 512, _Fits(segment_bytes, room)),
        "backward_lengths": _fitting(card, "backward lengths", 1024, 4096, 256,
                                     _Fits(backward_bytes, room)),
        # the lab's token sweep: naive points over the budget are skipped; SDPA and linear
        # attention run at every length
        "lab_tokens": tokens,
        "lab_budget": lab_budget,
        # 12.5: naive points over the budget are skipped (12.5 checks that), the rest run
        "efficient_lengths": efficient,
        "efficient_flash_lengths": _fitting(card, "efficient flash lengths", 1024, 8192, 256,
                                            _Fits(partial(efficient_others_bytes, size=s), room)),
        "efficient_budget": efficient_budget,
    }
