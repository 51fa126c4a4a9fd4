"""Peak memory, measured, never computed, and never in the same call as a timing (the
measurement would slow what is timed).

On CUDA, the allocator's peak statistics around the call. On the CPU, the allocator's
own reports: ``torch.profiler`` with ``profile_memory=True`` records every allocation
and free, and their running sum in time order peaks at the exact bytes the call added
(the CPU twin of CUDA's ``max_memory_allocated``), buffers allocated inside C++ kernels
included. The process's resident set (`peak_resident_bytes`) is only a coarse
cross-check. Where neither source exists, ``None`` ("not measured"), never a model.
Every reset of a peak first keeps the peak so far, so that `session_peak_bytes` (a
notebook's run record) still covers the whole process. `LargestTensor` is a structural
probe beside them: the largest tensor an operator returned.
"""
from __future__ import annotations

import functools
import gc
import sys
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..devices import quiet_stderr
from ..validation import check_nonnegative_int
from .clocks import device_of


def profiler_active() -> bool:
    """True while a ``torch.profiler`` (or ``torch.autograd.profiler``) session records: then
    `peak_memory` on the CPU returns None rather than end that session with its own."""
    return torch._C._autograd._profiler_enabled()


def _cpu_allocator_peak(fn, args, kwargs) -> int | None:
    """Peak bytes above the level at entry during one call of ``fn``, from the CPU
    allocator's events as the profiler records them; None where it records none.

    Each ``[memory]`` event carries the bytes allocated (negative: freed); their running
    sum in time order is the allocator's level relative to the start, and its maximum
    (never below 0) is the peak. The result of ``fn`` is dropped only after the profiler
    stops, so the output counts and its release does not.
    """
    from torch.profiler import ProfilerActivity, profile

    if profiler_active():                                 # a second one would end the first's session
        return None
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    try:
        with quiet_stderr():
            prof.start()
    except RuntimeError:                                  # a build whose profiler cannot start
        return None
    torch._C._autograd._enable_record_function(False)     # record allocations, not every op
    try:
        result = fn(*args, **kwargs)
    finally:
        torch._C._autograd._enable_record_function(True)
        with quiet_stderr():
            prof.stop()
    del result
    return _running_peak(prof)


def _running_peak(prof) -> int | None:
    """The maximum of the running sum of a finished profile's CPU memory events."""
    results = getattr(prof.profiler, "kineto_results", None)
    if results is None:
        return None
    cpu = torch._C._autograd.DeviceType.CPU
    events = [e for e in results.events() if e.name() == "[memory]" and e.device_type() == cpu]
    when = (lambda e: e.start_ns()) if events and hasattr(events[0], "start_ns") else \
        (lambda e: e.start_us())                          # torch < 2.4 names it in microseconds
    level = peak = 0
    for event in sorted(events, key=when):               # stable: ties keep their recorded order
        level += event.nbytes()
        peak = max(peak, level)
    return peak


def cpu_peak_supported() -> bool:
    """True where the profiler reports CPU allocations exactly (a known 1 KiB allocation
    reads as 1024 bytes); False while another profiler records, as `peak_memory` cannot."""
    return not profiler_active() and _known_allocation_reads_exactly()


@functools.lru_cache(maxsize=None)
def _known_allocation_reads_exactly() -> bool:
    return _cpu_allocator_peak(torch.empty, (256,), {"dtype": torch.float32}) == 1024


def peak_memory(fn, *args, device=None, warmup: int = 1, **kwargs) -> int | None:
    """Measured peak bytes that ``fn(*args, **kwargs)`` adds above what was allocated before it.

    The output counts (it is allocated during the call); the inputs do not. ``warmup``
    unmeasured calls first absorb one-off costs (lazy initialisation, thread pools).
    CUDA: ``reset_peak_memory_stats`` then ``max_memory_allocated`` minus the bytes
    allocated at the start. CPU: the running sum of the allocator's events under
    ``torch.profiler`` (``profile_memory=True``): exact to the byte, so two measurements
    of the same call with the same thread count agree. It counts every tensor PyTorch
    allocates (buffers inside C++ kernels included), not memory that Python objects or
    other libraries take. Returns ``None`` where neither source is available ("not
    measured"), and on the CPU while another profiler records (`profiler_active`).
    Cost on the CPU: operators are not recorded, so the call runs at nearly full speed,
    but every allocation and free is, and the profiler turns each into a result when the
    call ends: a loop of many small allocations costs time and memory in proportion, so
    measure it on a shorter run. The first measurement in a process also starts the
    profiler.

    >>> peak_memory(lambda: torch.ones(1000))         # 1000 float32: 4000 bytes, exactly
    4000
    """
    warmup = check_nonnegative_int("warmup", warmup)
    device = torch.device(device) if device is not None else device_of(args, kwargs)
    if device.type not in ("cuda", "cpu") or (device.type == "cpu" and profiler_active()):
        return None
    for _ in range(warmup):
        fn(*args, **kwargs)
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        _reset_peak(device)
        fn(*args, **kwargs)
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - base
    return _cpu_allocator_peak(fn, args, kwargs)


def free_cuda() -> None:
    """Collect garbage and hand CUDA's cached blocks back (after an out-of-memory error, or
    between the points of a sweep), so that one point's blocks do not count in the next."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# --- the process's peak, across resets ----------------------------------------------------

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def _read_status_kib(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise OSError(f"{field} not in {_STATUS}")


# What the resets below discarded: the highest peak before each, per device ("cpu",
# "cuda:0"), so that `session_peak_bytes` covers the whole process.
_PEAK_BEFORE_RESETS: dict[str, int] = {}


def _peak_key(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{torch.cuda.current_device() if device.index is None else device.index}"
    return device.type


def _current_peak(device: torch.device) -> int | None:
    """The peak since the last reset: CUDA's allocator peak; the CPU's peak resident set
    (Linux ``VmHWM``, elsewhere ``ru_maxrss``, which nothing here resets). Or None."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    if device.type != "cpu":
        return None
    if sys.platform.startswith("linux"):
        try:
            return _read_status_kib("VmHWM") * 1024
        except OSError:
            return None
    try:
        import resource
    except ImportError:                                  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024     # bytes on macOS, else KiB


def _reset_peak(device: torch.device) -> None:
    """Reset ``device``'s peak statistics, first keeping the peak so far for
    `session_peak_bytes`. Raises OSError where the CPU peak cannot be reset."""
    key, peak = _peak_key(device), _current_peak(device)
    if peak is not None:
        _PEAK_BEFORE_RESETS[key] = max(_PEAK_BEFORE_RESETS.get(key, 0), peak)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    else:
        _CLEAR_REFS.write_text("5")                      # peak := current resident set


def session_peak_bytes(device=None) -> int | None:
    """The most memory this process has held on ``device`` (default: the CPU) since it
    started, across the resets that `peak_memory` makes.

    CUDA: the allocator's peak (``max_memory_allocated``: tensors, not the CUDA context).
    CPU: the process's peak resident set: page-granular, and everything the process
    touched (Python, libraries, data), not only tensors. ``None``: not measured.
    """
    device = torch.device(device or "cpu")
    peak = _current_peak(device)
    if peak is None:
        return None
    return max(peak, _PEAK_BEFORE_RESETS.get(_peak_key(device), 0))


def peak_resident_bytes(fn, *args, **kwargs) -> int | None:
    """A coarse cross-check of `peak_memory` on Linux: how far the process's peak resident
    set (``VmHWM``, reset through ``/proc/self/clear_refs``) rose during one call.

    Page-granular, it also counts whatever else the process touches, and misses blocks
    the C library serves from memory that was already resident: a lower bound on large
    fresh allocations at best. None where it cannot be read (not Linux).
    """
    try:
        _reset_peak(torch.device("cpu"))                  # peak := current resident set
        base = _read_status_kib("VmHWM")
    except OSError:
        return None
    fn(*args, **kwargs)
    return max(0, _read_status_kib("VmHWM") - base) * 1024


# --- the largest tensor: a structural probe, not a measurement --------------------------

class LargestTensor(TorchDispatchMode):
    """Inside ``with LargestTensor() as probe:``, records the largest tensor any operator
    returns (backward included): ``probe.numel`` elements, ``probe.nbytes`` of storage.

    A structural check, not a measurement of memory: it proves that no (L, L) tensor
    was ever built, at sizes far below what a peak-memory reading can resolve.
    """

    def __init__(self):
        super().__init__()
        self.numel = self.nbytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.numel = max(self.numel, t.numel())
                self.nbytes = max(self.nbytes, t.untyped_storage().nbytes())
        return out
