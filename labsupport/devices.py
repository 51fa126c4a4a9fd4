"""Where a computation runs: one rule for the whole package; and keeping the C++
runtime's own log lines (the profiler's start and stop) out of a notebook's output."""
from __future__ import annotations

import contextlib
import os
import sys
import warnings

import torch


def pick_device(device=None) -> torch.device:
    """``device`` if given, else CUDA when available, else the CPU.

    >>> pick_device("cpu")
    device(type='cpu')
    """
    if device is not None:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


PROFILER_NOTICE = r".*Profiler clears events at the end of each cycle"


@contextlib.contextmanager
def quiet_stderr():
    """Silence C++ writes to file descriptor 2 inside the block (torch's profiler logs
    its start and stop there), and the notice some torch builds (2.11 with CUDA) give as a
    UserWarning when a profile starts; Python's ``sys.stderr`` is flushed first and
    restored, and every other warning passes as before."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull, warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=PROFILER_NOTICE, category=UserWarning)
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
