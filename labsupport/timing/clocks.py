"""Clocks: seconds per call, CUDA events on a GPU and ``time.perf_counter`` on the CPU,
each after warm-up; the median of several repetitions with min and max."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from ..validation import check_nonnegative_int, check_positive_int


@dataclass(frozen=True)
class Timing:
    """Seconds per call: the median, min and max over ``times``."""

    median: float
    min: float
    max: float
    times: tuple[float, ...]

    def __str__(self) -> str:
        return f"{self.median * 1e3:.2f} ms (min {self.min * 1e3:.2f}, max {self.max * 1e3:.2f})"


def device_of(args, kwargs) -> torch.device:
    """The device of the first tensor among ``args`` and ``kwargs``' values, else the CPU."""
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            return a.device
    return torch.device("cpu")


def time_call(fn, *args, reps: int = 5, warmup: int = 1, device=None, **kwargs) -> Timing:
    """Time ``fn(*args, **kwargs)``: ``warmup`` untimed calls, then ``reps`` timed ones.

    On CUDA each call is bracketed by CUDA events and synchronised; on the CPU by
    ``perf_counter``. ``device`` defaults to that of the first tensor argument. ``reps``
    is a positive int, ``warmup`` an int >= 0.

    >>> t = time_call(sum, [1, 2, 3], reps=3)
    >>> t.min <= t.median <= t.max
    True
    """
    reps, warmup = check_positive_int("reps", reps), check_nonnegative_int("warmup", warmup)
    device = torch.device(device) if device is not None else device_of(args, kwargs)
    for _ in range(warmup):
        fn(*args, **kwargs)
    if device.type == "cuda":
        times = _cuda_times(fn, args, kwargs, reps, device)
    else:
        times = _cpu_times(fn, args, kwargs, reps)
    return Timing(statistics.median(times), min(times), max(times), tuple(times))


def _cuda_times(fn, args, kwargs, reps, device) -> list[float]:
    """Seconds of each of ``reps`` calls between CUDA events, synchronised after each."""
    torch.cuda.synchronize(device)
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args, **kwargs)
        stop.record()
        torch.cuda.synchronize(device)
        times.append(start.elapsed_time(stop) / 1e3)
    return times


def _cpu_times(fn, args, kwargs, reps) -> list[float]:
    """Seconds of each of ``reps`` calls by ``perf_counter``."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(*args, **kwargs)
        times.append(time.perf_counter() - t0)
    return times
