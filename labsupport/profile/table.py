"""The sizes that depend on the card, as a Markdown table with one column per profile: every
registered section's ``by_card`` fields (what ``python -m labsupport.sections --card T4 --card
L4`` prints; docs/gpu.md shows it).
"""
from __future__ import annotations

from collections.abc import Iterable

import torch

from ..markdown import table
from ..units import format_bytes
from .choose import Profile
from .registry import registered

__all__ = ["sizes_table"]


def sizes_table(profiles: Iterable[Profile]) -> str:
    """A Markdown table of the card-dependent sizes of ``profiles``, one column each, headed by
    its card (or its name): the sweeps' dtype and backend, the memory a point may hold, then
    ``<section>.<field>`` for every registered section's ``by_card`` fields."""
    profiles = list(profiles)
    head = ["setting", *(str(P.card) if P.card else P.name for P in profiles)]
    rows = [["sweep dtype", *(str(P.sweep_dtype).removeprefix("torch.") for P in profiles)],
            ["fused backend", *(P.fused_backend for P in profiles)],
            ["usable memory", *(format_bytes(P.card.usable_bytes) if P.card else "-" for P in profiles)]]
    for name, sizes in registered().items():
        for key in sizes.by_card:
            rows.append([f"{name}.{key}", *(_cell(getattr(getattr(P, name), key), key) for P in profiles)])
    return table(head, rows)


def _short(n: int) -> str:
    return f"{n // 1024}k" if n % 1024 == 0 else str(n)


def _cell(value, key: str) -> str:
    """One size as the table shows it."""
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if key.endswith("_budget"):
        return "none: the OOM is caught" if value is None else format_bytes(value)
    if isinstance(value, tuple):
        return " ".join(map(_short, value))
    return str(value)
