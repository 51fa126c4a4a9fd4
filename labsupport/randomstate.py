"""Keeping the caller's random streams: one way for the whole package.

Code that seeds (a comparison's runs, a self-check, a training loop) does so inside
`kept_random_state`, so that Python's `random`, NumPy's global generator and torch's
generators (the CPU's and every initialised CUDA device's) are as they were afterwards,
whether the block returns or raises.

>>> import random
>>> before = random.random(); _ = random.seed(1)
>>> state = random.getstate()
>>> with kept_random_state():
...     random.seed(123); _ = random.random()
>>> random.getstate() == state
True
"""
from __future__ import annotations

import contextlib
import random

import numpy as np
import torch

SEED_LIMIT = 2 ** 32          # NumPy's seeds: 0 <= seed < 2**32 (np.random.seed refuses others)


@contextlib.contextmanager
def kept_random_state():
    """Restore Python's, NumPy's and torch's global random states on exit (also on an
    exception or a KeyboardInterrupt)."""
    py_state, np_state = random.getstate(), np.random.get_state()
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and PyTorch (CPU and every GPU) with ``seed``."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@contextlib.contextmanager
def seeded_torch(seed, device: torch.device):
    """Yield a CPU generator seeded with ``seed`` (e.g. for a batch order); inside, torch's
    global generators (the CPU's and ``device``'s, where it is a CUDA device) are seeded with
    ``seed`` too (dropout draws from them), and restored on exit. ``seed=None`` yields None
    and changes nothing: the caller draws from the global generators."""
    if seed is None:
        yield None
        return
    cuda = [device.index if device.index is not None else torch.cuda.current_device()] \
        if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda, device_type="cuda"):
        torch.random.default_generator.manual_seed(seed)
        for index in cuda:
            with torch.cuda.device(index):
                torch.cuda.manual_seed(seed)
        yield torch.Generator().manual_seed(seed)
