"""Where a computation runs: one rule for the whole package."""
from __future__ import annotations

import torch


def pick_device(device=None) -> torch.device:
    """``device`` if given, else CUDA when available, else the CPU.

    >>> pick_device("cpu")
    device(type='cpu')
    """
    if device is not None:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
