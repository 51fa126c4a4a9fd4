"""Sizing a sweep for a card: the helpers the sections' gpu sizes use. Each takes a byte model
of what one point of the sweep holds at its peak (``model(L) -> bytes``) and keeps the points
within the card's usable memory (`Card.usable_bytes`); a sweep meant to hit the out-of-memory
wall ends at a length the whole card cannot hold (`with_wall`).

>>> from labsupport.profile import CARDS
>>> fitting(CARDS["T4"], "lengths", 4096, 65536, 1024, lambda L: 8 * L * L)
(4096, 8192, 16384, 32768)
"""
from __future__ import annotations

from ..units import format_bytes
from .cards import MEMORY_FRACTION, Card

__all__ = ["powers", "fitting", "with_wall", "budgeted"]


def powers(lo: int, hi: int) -> tuple:
    """The powers of two from lo to hi."""
    return tuple(1 << k for k in range(lo.bit_length() - 1, hi.bit_length()))


def fitting(card: Card, what: str, lo: int, hi: int, floor: int, model, room: int | None = None) -> tuple:
    """Powers of two from ``lo`` to the longest ``L <= hi`` whose ``model(L)`` fits ``room``
    bytes (default: the card's usable memory), at least three: where fewer fit, the three ending
    at the longest that fits, but none below ``floor``."""
    fits = _Fits(model, card.usable_bytes if room is None else room)
    top = hi
    while top >= floor and not fits(top):
        top //= 2
    start = min(lo, top // 4)
    if start < floor:
        within = "" if fits.room == card.usable_bytes else f"{format_bytes(fits.room)} of "
        raise ValueError(
            f"{card} has too little memory for the gpu profile: its {what} need "
            f"{format_bytes(fits.model(4 * floor))} at L = {4 * floor} (three lengths from "
            f"{floor}) within {within}{format_bytes(card.usable_bytes)} ({MEMORY_FRACTION:.0%} of "
            "the free memory); use LABSUPPORT_PROFILE=cpu")
    return powers(start, top)


class _Fits:
    """``fits(L)``: the byte model ``model(L)`` within ``room`` bytes."""

    def __init__(self, model, room: int):
        self.model, self.room = model, room

    def __call__(self, L: int) -> bool:
        return self.model(L) <= self.room


def with_wall(runs: tuple, model, card: Card) -> tuple:
    """``runs`` and then the first longer power of two whose model exceeds the whole card: it
    runs out of memory there (cost_sweep catches it). Lengths between, which might run or
    not, are left out."""
    L = 2 * runs[-1]
    while model(L) <= card.total_bytes:
        L *= 2
    return (*runs, L)


def budgeted(card: Card, what: str, lo: int, hi: int, floor: int, naive, extra, others):
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
    runs = fitting(card, what, lo, top, floor, naive, budget)
    return powers(runs[0], top), budget
