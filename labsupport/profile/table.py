"""The gpu profile's card-dependent sizes as a Markdown table, one column per profile (what
``python -m labsupport.profile --card T4 --card L4`` prints; docs/gpu.md shows it).

>>> from labsupport.profile import current
>>> print(sizes_table([current("gpu", card="T4")]).splitlines()[5])
| bill\\_lengths | 4k 8k 16k 32k |
"""
from __future__ import annotations

from collections.abc import Iterable

import torch

from ..markdown import table
from ..units import format_bytes
from .choose import Profile

__all__ = ["sizes_table", "TABLE"]

# The settings the table shows: those that depend on the card, in the order of the book.
TABLE = ("sweep_dtype", "fused_backend", "bill_lengths", "wall_lengths", "wall_budget",
         "fused_lengths", "final_lengths", "backward_lengths", "segment_totals",
         "efficient_lengths", "efficient_flash_lengths", "efficient_budget", "lab_tokens",
         "lab_budget")


def sizes_table(profiles: Iterable[Profile]) -> str:
    """A Markdown table of the card-dependent settings (`TABLE`) of ``profiles``, one column
    each, headed by its card (or its name), and the memory a sweep point may hold."""
    profiles = list(profiles)
    head = ["setting", *(str(P.card) if P.card else P.name for P in profiles)]
    rows = [["usable memory", *(format_bytes(P.card.usable_bytes) if P.card else "-"
                                for P in profiles)]]
    rows += [[key, *(_cell(P, key) for P in profiles)] for key in TABLE]
    return table(head, rows)


def _short(n: int) -> str:
    return f"{n // 1024}k" if n % 1024 == 0 else str(n)


def _cell(P: Profile, key: str) -> str:
    """One setting of ``P`` as the table shows it."""
    value = P.settings[key]
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if key.endswith("_budget"):
        return "none: the OOM is caught" if value is None else format_bytes(value)
    if key in ("wall_lengths", "final_lengths") and P.wall_budget is None:    # the last: the wall
        return f"{' '.join(map(_short, value[:-1]))}, then {_short(value[-1])}: OOM"
    if isinstance(value, tuple):
        return " ".join(map(_short, value))
    return str(value)
