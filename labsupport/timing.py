"""Honest timing and peak-memory measurement on CUDA and on the CPU.

Time: CUDA events after warm-up on a GPU, ``time.perf_counter`` after warm-up on the
CPU; the median of several repetitions with min and max.
Memory: measured, never computed, and never in the same call as a timing (the
measurement would slow what is timed). On CUDA, the allocator's peak statistics around
the call. On the CPU, the allocator's own reports: ``torch.profiler`` with
``profile_memory=True`` records every allocation and free, and their running sum in
time order peaks at the exact bytes the call added (the CPU twin of CUDA's
``max_memory_allocated``), buffers allocated inside C++ kernels included. The process's
resident set (`peak_resident_bytes`) is only a coarse cross-check. Where neither
source exists, ``None`` ("not measured"), never a model.
Every reset of a peak first keeps the peak so far, so that `session_peak_bytes` (a
notebook's run record) still covers the whole process.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .devices import pick_device


@dataclass(frozen=True)
class Timing:
    """Seconds per call: the median, min and max over ``times``."""

    median: float
    min: float
    max: float
    times: tuple[float, ...]

    def __str__(self) -> str:
        return f"{self.median * 1e3:.2f} ms (min {self.min * 1e3:.2f}, max {self.max * 1e3:.2f})"


def _device_of(args, kwargs) -> torch.device:
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            return a.device
    return torch.device("cpu")


def time_call(fn, *args, reps: int = 5, warmup: int = 1, device=None, **kwargs) -> Timing:
    """Time ``fn(*args, **kwargs)``: ``warmup`` untimed calls, then ``reps`` timed ones.

    On CUDA each call is bracketed by CUDA events and synchronised; on the CPU by
    ``perf_counter``. ``device`` defaults to that of the first tensor argument.

    >>> t = time_call(sum, [1, 2, 3], reps=3)
    >>> t.min <= t.median <= t.max
    True
    """
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    device = torch.device(device) if device is not None else _device_of(args, kwargs)
    for _ in range(warmup):
        fn(*args, **kwargs)
    times = []
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        for _ in range(reps):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(*args, **kwargs)
            stop.record()
            torch.cuda.synchronize(device)
            times.append(start.elapsed_time(stop) / 1e3)
    else:
        for _ in range(reps):
            t0 = time.perf_counter()
            fn(*args, **kwargs)
            times.append(time.perf_counter() - t0)
    return Timing(statistics.median(times), min(times), max(times), tuple(times))


@contextlib.contextmanager
def _quiet_stderr():
    """Silence C++ writes to file descriptor 2 (the profiler logs its start and stop)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


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
        with _quiet_stderr():
            prof.start()
    except RuntimeError:                                  # a build whose profiler cannot start
        return None
    torch._C._autograd._enable_record_function(False)     # record allocations, not every op
    try:
        result = fn(*args, **kwargs)
    finally:
        torch._C._autograd._enable_record_function(True)
        with _quiet_stderr():
            prof.stop()
    del result
    return _running_peak(prof)


def profiler_active() -> bool:
    """True while a ``torch.profiler`` (or ``torch.autograd.profiler``) session records: then
    `peak_memory` on the CPU returns None rather than end that session with its own."""
    return torch._C._autograd._profiler_enabled()


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
    call ends (about 7 us and 2 kB each, here): a loop of a million small allocations
    costs seconds and gigabytes, so measure it on a shorter run. The first measurement
    in a process also starts the profiler (a few seconds).

    >>> peak_memory(lambda: torch.ones(1000))         # 1000 float32: 4000 bytes, exactly
    4000
    """
    device = torch.device(device) if device is not None else _device_of(args, kwargs)
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


def format_bytes(n: int | None) -> str:
    """``12.3 MB`` (decimal units); ``not measured`` for ``None``."""
    if n is None:
        return "not measured"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def fit_power_law(x, y, *, last: int | None = None) -> tuple[float, float]:
    """Least-squares fit of ``y = prefactor * x ** exponent`` on log-log axes.

    ``last`` fits only the last ``last`` points (the upper lengths, where the
    leading term dominates). Returns ``(exponent, prefactor)``.

    >>> round(fit_power_law([1, 2, 4, 8], [3, 12, 48, 192])[0], 6)
    2.0
    """
    xs, ys = [float(v) for v in x], [float(v) for v in y]
    if len(xs) != len(ys):
        raise ValueError(f"x and y differ in length: {len(xs)} != {len(ys)}")
    if last is not None:
        xs, ys = xs[-last:], ys[-last:]
    if len(xs) < 2 or len(set(xs)) < 2:
        raise ValueError(f"need at least 2 distinct x values to fit, got {xs}")
    if min(xs) <= 0 or min(ys) <= 0:
        raise ValueError(f"a power law needs positive x and y, got x={xs}, y={ys}")
    lx, ly = [math.log(v) for v in xs], [math.log(v) for v in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    slope = sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)
    return slope, math.exp(my - slope * mx)


# --- sweeps ------------------------------------------------------------------------------

_OOM_ERRORS = (torch.cuda.OutOfMemoryError, MemoryError)


def is_out_of_memory(err: BaseException) -> bool:
    """True for the errors an allocator raises when memory runs out (CUDA or CPU)."""
    if isinstance(err, _OOM_ERRORS):
        return True
    text = str(err).lower()
    return isinstance(err, RuntimeError) and ("out of memory" in text or "can't allocate" in text)


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


def attention_inputs(length: int, *, batch: int = 1, heads: int = 1, head_dim: int = 64,
                     device=None, dtype=torch.float32, seed: int = 0):
    """Seeded ``(q, k, v)``, each (batch, heads, length, head_dim): the default sweep input.

    Drawn in float32 (float64 for ``dtype=torch.float64``) and then rounded to ``dtype``,
    so that a bfloat16 sweep sees the float32 inputs rounded, and `dtype_error` can
    compare the two.
    """
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype (torch.float32, "
                        f"torch.bfloat16, ...), got {dtype!r}")
    g = torch.Generator(device="cpu").manual_seed(seed)
    shape = (batch, heads, length, head_dim)
    drawn = torch.float64 if dtype == torch.float64 else torch.float32
    return tuple(torch.randn(shape, generator=g, dtype=drawn).to(device=device or "cpu", dtype=dtype)
                 for _ in range(3))


def dtype_error(kernel, length: int, dtype, *, make_inputs=None, **kernel_kwargs) -> float:
    """Max absolute error of ``kernel`` run in ``dtype`` against the same kernel in float32.

    ``make_inputs(length)`` gives the float32 inputs (default `attention_inputs`); the
    reduced-precision run gets them rounded to ``dtype``, on the same device. Prints
    beside a sweep run in bfloat16 what the lower precision costs in accuracy.

    >>> from labsupport.attention import sdpa
    >>> dtype_error(sdpa, 64, torch.float32)
    0.0
    >>> 0 < dtype_error(sdpa, 64, torch.bfloat16) < 0.05
    True
    """
    inputs = (make_inputs or attention_inputs)(length)
    if any(t.dtype != torch.float32 for t in inputs):
        raise TypeError("make_inputs must return float32 tensors (the reference); got "
                        f"{[t.dtype for t in inputs]}")
    with torch.no_grad():
        reference = kernel(*inputs, **kernel_kwargs)
        reduced = kernel(*(t.to(dtype) for t in inputs), **kernel_kwargs)
    return (reduced.float() - reference).abs().max().item()


def attention_flops(length: int, *, batch: int = 1, heads: int = 1, head_dim: int = 64,
                    is_causal: bool = False, keys: int | None = None) -> float:
    """A model of forward attention's floating-point operations: ``4 B H L K D``.

    Two matrix products (``Q K^T`` and ``P V``) of ``2 L K D`` each, where ``K`` is the
    number of keys each query reads: ``L`` for exact attention (the default), half of
    that with a causal mask when the kernel skips the masked half. Softmax and scaling
    are ignored. For the efficient kernels pass the keys they read instead, e.g.
    ``2 * window + 1`` (local), ``2 * k`` (Linformer: the projections of K and V cost
    as much as attending to ``k`` rows), ``head_dim`` (linear attention with
    ``elu + 1`` features), ``2 * num_features`` (Performer: feature maps, then the
    reordered product).

    >>> attention_flops(1024, head_dim=64) == 4 * 1024 * 1024 * 64
    True
    >>> attention_flops(1024, keys=129) == 4 * 1024 * 129 * 64
    True
    """
    if keys is None:
        flops = 4.0 * batch * heads * length * length * head_dim
        return flops / 2 if is_causal else flops
    if keys < 1:
        raise ValueError(f"keys per query must be >= 1, got {keys}")
    return 4.0 * batch * heads * length * keys * head_dim


def _forward_backward(kernel, inputs, kwargs):
    leaves = [t.detach().requires_grad_() for t in inputs]
    kernel(*leaves, **kwargs).sum().backward()


def _measure_point(kernel, inputs, kwargs, backward, reps):
    """Time, then measure the peak in a separate call: the profiler that reads the CPU
    peak must not slow the timed calls (`time_call` has warmed up, so no second warm-up)."""
    call = (lambda: _forward_backward(kernel, inputs, kwargs)) if backward else \
        (lambda: kernel(*inputs, **kwargs))
    with torch.set_grad_enabled(backward):
        timing = time_call(call, reps=reps, device=inputs[0].device)
        peak = peak_memory(call, device=inputs[0].device, warmup=0)
    return timing, peak


def _free_cuda():
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def cost_sweep(kernels, lengths, *, make_inputs=None, backward=False, reps=5,
               memory_budget=None, memory_models=None, flops=None, kernel_kwargs=None,
               progress=True) -> list[dict]:
    """Time and measure the peak memory of attention kernels over sequence lengths.

    ``kernels``: name -> callable ``kernel(*inputs, **kernel_kwargs)``. ``make_inputs(L)``
    returns the inputs at length L (default `attention_inputs`; its dtype is the sweep's).
    ``backward`` times forward plus backward of ``out.sum()``. Times and peaks come from
    separate calls. ``memory_budget`` (bytes): a point that would need more is skipped,
    not run; what it needs comes from ``memory_models`` (name -> ``f(L)``, a model of the
    bytes) where the kernel has one, else it is predicted from the kernel's measured
    peaks (a power law through the last two; with fewer the point runs). An out-of-memory
    error is caught and recorded, and the kernel's longer lengths are then skipped; the
    sweep goes on. ``flops(L)``, if given, adds the achieved ``tflops`` to each measured
    row; a mapping name -> ``f(L)`` gives each kernel its own model (others get None).

    Returns one dict per (kernel, length): ``kernel``, ``length``, ``dtype`` (of the
    inputs, e.g. ``"float32"``), ``time_s`` (median), ``time_min``, ``time_max``,
    ``peak_bytes`` (measured; None where not measurable), ``model_bytes`` (None without a
    model), ``predicted_bytes`` (the prediction a skip rests on, else None), ``tflops``,
    ``status`` (``ok``, ``oom`` or ``skipped``) and ``note`` (why a point did not run).
    """
    from tqdm.auto import tqdm

    lengths = sorted(int(n) for n in lengths)
    make_inputs = make_inputs or attention_inputs
    memory_models, kernel_kwargs = memory_models or {}, kernel_kwargs or {}
    rows, bar = [], tqdm(total=len(kernels) * len(lengths), disable=not progress,
                         desc="cost sweep", leave=False)
    for name, kernel in kernels.items():
        hit_wall, mine = None, []
        for length in lengths:
            bar.set_postfix_str(f"{name} L={length}")
            row = _sweep_point(name, kernel, length, make_inputs, backward, reps, memory_budget,
                               memory_models.get(name), _flops_for(flops, name), kernel_kwargs,
                               hit_wall, mine)
            hit_wall = hit_wall or (length if row["status"] == "oom" else None)
            mine.append(row)
            bar.update()
        rows += mine
    bar.close()
    ran = sum(r["status"] == "ok" for r in rows)
    if progress:
        print(f"cost sweep: {ran} of {len(rows)} points measured, "
              f"{sum(r['status'] == 'skipped' for r in rows)} skipped, "
              f"{sum(r['status'] == 'oom' for r in rows)} out of memory")
    return rows


def _flops_for(flops, name):
    """The flop model of kernel ``name``: ``flops`` itself, or its entry in a mapping."""
    if flops is None or callable(flops):
        return flops
    return flops.get(name)


def predict_peak(rows, length: int) -> int | None:
    """The peak bytes at ``length`` predicted from one kernel's measured `cost_sweep` rows:
    the power law through the last two measured peaks (shorter lengths), ``p2 (L / L2)^e``
    with ``e = log(p2 / p1) / log(L2 / L1)``. None with fewer than two positive peaks.

    >>> predict_peak([dict(length=1024, peak_bytes=4e6, status="ok"),
    ...               dict(length=2048, peak_bytes=16e6, status="ok")], 4096)
    64000000
    """
    points = [(r["length"], r["peak_bytes"]) for r in rows
              if r["status"] == "ok" and r["peak_bytes"] and r["length"] < length]
    if len(points) < 2 or points[-1][0] == points[-2][0]:
        return None
    (l1, p1), (l2, p2) = points[-2:]
    exponent = math.log(p2 / p1) / math.log(l2 / l1)
    return round(p2 * (length / l2) ** exponent)


def _sweep_point(name, kernel, length, make_inputs, backward, reps, budget, model, flops,
                 kwargs, hit_wall, measured) -> dict:
    model_bytes = int(model(length)) if model is not None else None
    row = dict(kernel=name, length=length, dtype=None, time_s=None, time_min=None, time_max=None,
               peak_bytes=None, model_bytes=model_bytes, predicted_bytes=None, tflops=None,
               status="ok", note="")
    if hit_wall is not None:
        return {**row, "status": "skipped", "note": f"out of memory at L={hit_wall}"}
    if budget is not None and model_bytes is not None and model_bytes > budget:
        return {**row, "status": "skipped",
                "note": f"needs {format_bytes(model_bytes)} > budget {format_bytes(budget)}"}
    predicted = predict_peak(measured, length) if budget is not None and model is None else None
    if predicted is not None and predicted > budget:
        return {**row, "status": "skipped", "predicted_bytes": predicted,
                "note": f"predicted {format_bytes(predicted)} > budget {format_bytes(budget)}"}
    try:
        inputs = make_inputs(length)
        timing, peak = _measure_point(kernel, inputs, kwargs, backward, reps)
    except Exception as err:                              # only memory errors are part of the lesson
        if not is_out_of_memory(err):
            raise
        _free_cuda()
        return {**row, "status": "oom", "note": str(err).splitlines()[0][:80]}
    row.update(dtype=dtype_name(inputs[0].dtype), time_s=timing.median, time_min=timing.min,
               time_max=timing.max, peak_bytes=peak)
    if flops is not None:
        row["tflops"] = flops(length) / timing.median / 1e12
    del inputs
    _free_cuda()
    return row


def sweep_exponent(rows, kernel: str, key: str = "time_s", *, last: int = 3) -> float:
    """Fitted power-law exponent of ``key`` against length over a kernel's last
    ``last`` measured points of a `cost_sweep` (the upper lengths)."""
    points = [(r["length"], r[key]) for r in rows
              if r["kernel"] == kernel and r["status"] == "ok" and r[key]]
    if len(points) < 2:
        raise ValueError(f"kernel {kernel!r} has {len(points)} measured points of {key!r}; "
                         "a fit needs at least 2")
    lengths, values = zip(*points)
    return fit_power_law(lengths, values, last=last)[0]


# --- which SDPA backend ran ---------------------------------------------------------------

_BACKEND_OPS = {           # the aten op each SDPA backend dispatches to
    "flash": "flash_attention", "efficient": "efficient_attention",
    "cudnn": "cudnn_attention", "math": "attention_math",
}


def sdpa_backend_used(q, k, v, *, is_causal=False) -> str:
    """Which backend ``F.scaled_dot_product_attention`` ran for these inputs, as the
    profiler saw it: ``"flash"``, ``"efficient"``, ``"cudnn"`` or ``"math"``
    (``"unknown"`` if none of their ops ran). Also importable from `labsupport.attention`.

    >>> sdpa_backend_used(*attention_inputs(8, head_dim=4), is_causal=True) in _BACKEND_OPS
    True
    """
    from torch.profiler import ProfilerActivity, profile

    from .attention import sdpa  # here: labsupport.attention re-exports this function

    activities = [ProfilerActivity.CPU]
    if q.is_cuda:
        activities.append(ProfilerActivity.CUDA)
    with torch.no_grad(), _quiet_stderr(), profile(activities=activities) as prof:
        sdpa(q, k, v, is_causal=is_causal)
    names = {event.name for event in prof.events()}
    for backend, op in _BACKEND_OPS.items():
        if any(op in name for name in names):
            return backend
    return "unknown"


# --- the device's matrix-multiply peak -------------------------------------------------------

_PEAK_SIZES = {"cuda": (2048, 4096, 8192, 16384), "cpu": (256, 512, 1024)}
_SHORT_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16",
                torch.float64: "fp64"}


def dtype_name(dtype: torch.dtype) -> str:
    """``"float32"`` for ``torch.float32``: how rows and tables name a dtype."""
    return str(dtype).removeprefix("torch.")


def matmul_peak_tflops(device=None, dtype=torch.bfloat16, sizes=None, *, reps: int = 5) -> float:
    """Measured dense matrix-multiply throughput of ``device`` in ``dtype``: TFLOP/s.

    Times ``n x n @ n x n`` (``2 n^3`` flops) with `time_call` (CUDA events on a GPU)
    for each ``n`` in ``sizes`` and returns the best median: the peak this device
    reaches in practice. To compare a sweep's achieved TFLOP/s with it, use
    `matmul_peak`, which keeps the dtype beside the number. ``device`` defaults to CUDA
    when available, else the CPU; ``sizes`` default to 2048..16384 on CUDA and
    256..1024 on the CPU (bfloat16 can be slow there).

    >>> matmul_peak_tflops("cpu", torch.float32, sizes=(64,)) > 0
    True
    """
    device = pick_device(device)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point type, got {dtype}")
    sizes = tuple(sizes) if sizes is not None else _PEAK_SIZES.get(device.type, _PEAK_SIZES["cpu"])
    if not sizes or any(int(n) != n or n < 1 for n in sizes):
        raise ValueError(f"sizes must be positive integers, got {sizes}")
    g = torch.Generator(device=device).manual_seed(0)
    best = 0.0
    for n in sizes:
        a, b = (torch.randn(n, n, generator=g, device=device, dtype=dtype) for _ in range(2))
        out = torch.empty(n, n, device=device, dtype=dtype)
        seconds = time_call(torch.mm, a, b, out=out, reps=reps, warmup=2, device=device).median
        best = max(best, 2.0 * n ** 3 / seconds / 1e12)
        del a, b, out
    _free_cuda()
    return best


@dataclass(frozen=True)
class MatmulPeak:
    """A measured matrix-multiply peak: ``tflops`` in ``dtype`` on ``device``; its
    ``label`` (``"bf16 peak"``, ``"fp32 peak"``, ``"tf32 peak"``) heads a table column."""

    tflops: float
    dtype: torch.dtype
    device: str
    tf32: bool = False

    @property
    def label(self) -> str:
        name = "tf32" if self.tf32 else _SHORT_NAMES.get(self.dtype, dtype_name(self.dtype))
        return f"{name} peak"


def matmul_peak(device, dtype, sizes=None, *, reps: int = 5) -> MatmulPeak:
    """`matmul_peak_tflops` in the dtype a sweep ran in (``profile.sweep_dtype``), kept with
    its dtype so that `add_peak_fraction` can refuse a peak of another precision:
    bfloat16 work against the bfloat16 peak, float32 work against the float32 one (TF32
    where CUDA matmuls use it, ``torch.get_float32_matmul_precision() != "highest"``).
    ``device`` None: CUDA when available, else the CPU.

    >>> matmul_peak("cpu", torch.float32, sizes=(64,)).label
    'fp32 peak'
    """
    device = pick_device(device)
    tflops = matmul_peak_tflops(device, dtype, sizes, reps=reps)
    tf32 = (device.type == "cuda" and dtype == torch.float32
            and torch.get_float32_matmul_precision() != "highest")
    return MatmulPeak(tflops, dtype, device.type, tf32)


def add_peak_fraction(rows, peak: MatmulPeak) -> list[dict]:
    """`cost_sweep` rows with ``peak_fraction``: achieved ``tflops`` / ``peak.tflops``
    (None where a row has no ``tflops``). ``peak`` is a `matmul_peak` measured in the
    dtype the rows ran in (rows without a dtype ran in float32); another dtype raises."""
    if not isinstance(peak, MatmulPeak):
        raise TypeError(f"peak must be a MatmulPeak from matmul_peak(device, dtype), got "
                        f"{type(peak).__name__}; a bare number does not say its dtype")
    if not peak.tflops or peak.tflops <= 0:
        raise ValueError(f"peak.tflops must be positive, got {peak.tflops}")
    ran = {r.get("dtype") or "float32" for r in rows if r.get("tflops")}
    if ran - {dtype_name(peak.dtype)}:
        raise ValueError(f"rows ran in {', '.join(sorted(ran))} but the peak was measured in "
                         f"{dtype_name(peak.dtype)}; compare work with the peak of its own dtype: "
                         f"matmul_peak(device, torch.{sorted(ran)[0]})")
    return [{**r, "peak_fraction": r["tflops"] / peak.tflops if r.get("tflops") else None}
            for r in rows]
