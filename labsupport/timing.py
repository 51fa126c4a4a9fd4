"""Honest timing and peak-memory measurement on CUDA and on the CPU.

Time: CUDA events after warm-up on a GPU, ``time.perf_counter`` after warm-up on the
CPU; the median of several repetitions with min and max.
Memory: measured, never computed. On CUDA, the allocator's peak statistics around
the call; on Linux, the process's peak resident set, reset through
``/proc/self/clear_refs`` and read back from ``VmHWM``. Elsewhere ``None``
("not measured"), never a model. Every reset first keeps the peak so far, so that
`session_peak_bytes` (a notebook's run record) still covers the whole process.
"""
from __future__ import annotations

import contextlib
import ctypes
import gc
import math
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode


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


_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def _load_libc():
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


_LIBC = _load_libc() if sys.platform.startswith("linux") else None
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


@contextlib.contextmanager
def _tensors_in_resident_set():
    """While measuring, make the resident set follow tensor allocations (glibc).

    glibc serves blocks below its (self-raising) mmap threshold from heap memory
    that may already be resident, which would hide them from the resident set.
    During a measurement every block above 64 KiB gets its own mapping, made on
    creation and unmapped on release. Afterwards the thresholds are set to glibc's
    own steady-state values (32 MiB mmap, 64 MiB trim), which keep training loops
    as fast as with the defaults.
    """
    if _LIBC is None:
        yield
        return
    _LIBC.mallopt(_M_MMAP_THRESHOLD, 64 * 1024)
    _LIBC.malloc_trim(0)
    try:
        yield
    finally:
        _LIBC.mallopt(_M_MMAP_THRESHOLD, 32 * 1024 * 1024)
        _LIBC.mallopt(_M_TRIM_THRESHOLD, 64 * 1024 * 1024)


def _call_in_fresh_thread(fn, args, kwargs) -> None:
    """Run ``fn`` in a new thread: glibc gives it an arena that holds no large free
    blocks left by earlier work, so its tensors land in new mappings (and are counted).
    Grad mode is carried over (it is thread-local); errors are re-raised here."""
    grad_enabled, box = torch.is_grad_enabled(), {}

    def target():
        try:
            with torch.set_grad_enabled(grad_enabled):
                fn(*args, **kwargs)
        except BaseException as err:                     # re-raised in the caller
            box["error"] = err

    worker = threading.Thread(target=target)
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"]


def _read_status_kib(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise OSError(f"{field} not in {_STATUS}")


def cpu_peak_supported() -> bool:
    """True where the CPU peak resident set can be reset and read (Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        _reset_peak(torch.device("cpu"))
        _read_status_kib("VmHWM")
        return True
    except OSError:
        return False


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


def peak_memory(fn, *args, device=None, warmup: int = 1, **kwargs) -> int | None:
    """Measured peak bytes that ``fn(*args, **kwargs)`` adds above what was allocated before it.

    The output counts (it is allocated during the call); the inputs do not.
    CUDA: ``reset_peak_memory_stats`` then ``max_memory_allocated`` minus the bytes
    allocated at the start. Linux CPU: the peak resident set (``VmHWM``) after a reset,
    minus the resident set at the start; page-granular (4 KiB) and it also counts
    anything else the process touches during the call, so measure calls that
    allocate megabytes. ``warmup`` untimed calls first absorb one-off costs (lazy
    initialisation, thread pools). Returns ``None`` where neither is available:
    "not measured".
    """
    device = torch.device(device) if device is not None else _device_of(args, kwargs)
    gc.collect()
    if device.type == "cuda":
        for _ in range(warmup):
            fn(*args, **kwargs)
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        _reset_peak(device)
        fn(*args, **kwargs)
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - base
    if device.type != "cpu" or not cpu_peak_supported():
        return None
    with _tensors_in_resident_set():
        for _ in range(warmup):
            _call_in_fresh_thread(fn, args, kwargs)
        _reset_peak(device)                              # peak := current resident set
        base = _read_status_kib("VmHWM")
        _call_in_fresh_thread(fn, args, kwargs)
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
    """Seeded ``(q, k, v)``, each (batch, heads, length, head_dim): the default sweep input."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    shape = (batch, heads, length, head_dim)
    return tuple(torch.randn(shape, generator=g, dtype=dtype).to(device or "cpu") for _ in range(3))


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
    call = (lambda: _forward_backward(kernel, inputs, kwargs)) if backward else \
        (lambda: kernel(*inputs, **kwargs))
    with torch.set_grad_enabled(backward):
        timing = time_call(call, reps=reps, device=inputs[0].device)
        peak = peak_memory(call, device=inputs[0].device)
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
    returns the inputs at length L (default `attention_inputs`). ``backward`` times
    forward plus backward of ``out.sum()``. ``memory_models``: name -> ``f(L)``, a model
    of the bytes a point needs; with ``memory_budget`` (bytes) a point whose model
    exceeds the budget is skipped, not run. An out-of-memory error is caught and
    recorded, and the kernel's longer lengths are then skipped; the sweep goes on.
    ``flops(L)``, if given, adds the achieved ``tflops`` to each measured row; a mapping
    name -> ``f(L)`` gives each kernel its own model (kernels without one get None).

    Returns one dict per (kernel, length): ``kernel``, ``length``, ``time_s`` (median),
    ``time_min``, ``time_max``, ``peak_bytes`` (measured; None where not measurable),
    ``model_bytes`` (None without a model), ``tflops``, ``status`` (``ok``, ``oom`` or
    ``skipped``) and ``note`` (why a point did not run).
    """
    from tqdm.auto import tqdm

    lengths = sorted(int(n) for n in lengths)
    make_inputs = make_inputs or attention_inputs
    memory_models, kernel_kwargs = memory_models or {}, kernel_kwargs or {}
    rows, bar = [], tqdm(total=len(kernels) * len(lengths), disable=not progress,
                         desc="cost sweep", leave=False)
    for name, kernel in kernels.items():
        hit_wall = None
        for length in lengths:
            bar.set_postfix_str(f"{name} L={length}")
            row = _sweep_point(name, kernel, length, make_inputs, backward, reps, memory_budget,
                               memory_models.get(name), _flops_for(flops, name), kernel_kwargs,
                               hit_wall)
            hit_wall = hit_wall or (length if row["status"] == "oom" else None)
            rows.append(row)
            bar.update()
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


def _sweep_point(name, kernel, length, make_inputs, backward, reps, budget, model, flops,
                 kwargs, hit_wall) -> dict:
    model_bytes = int(model(length)) if model is not None else None
    row = dict(kernel=name, length=length, time_s=None, time_min=None, time_max=None,
               peak_bytes=None, model_bytes=model_bytes, tflops=None, status="ok", note="")
    if hit_wall is not None:
        return {**row, "status": "skipped", "note": f"out of memory at L={hit_wall}"}
    if budget is not None and model_bytes is not None and model_bytes > budget:
        return {**row, "status": "skipped",
                "note": f"needs {format_bytes(model_bytes)} > budget {format_bytes(budget)}"}
    try:
        inputs = make_inputs(length)
        timing, peak = _measure_point(kernel, inputs, kwargs, backward, reps)
    except Exception as err:                              # only memory errors are part of the lesson
        if not is_out_of_memory(err):
            raise
        _free_cuda()
        return {**row, "status": "oom", "note": str(err).splitlines()[0][:80]}
    row.update(time_s=timing.median, time_min=timing.min, time_max=timing.max, peak_bytes=peak)
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


# --- the device's matrix-multiply peak -------------------------------------------------------

_PEAK_SIZES = {"cuda": (2048, 4096, 8192, 16384), "cpu": (256, 512, 1024)}


def matmul_peak_tflops(device=None, dtype=torch.bfloat16, sizes=None, *, reps: int = 5) -> float:
    """Measured dense matrix-multiply throughput of ``device`` in ``dtype``: TFLOP/s.

    Times ``n x n @ n x n`` (``2 n^3`` flops) with `time_call` (CUDA events on a GPU)
    for each ``n`` in ``sizes`` and returns the best median: the peak this device
    reaches in practice, the yardstick for an attention kernel's achieved TFLOP/s.
    ``device`` defaults to CUDA when available, else the CPU; ``sizes`` default to
    2048..16384 on CUDA and 256..1024 on the CPU (bfloat16 can be slow there).

    >>> matmul_peak_tflops("cpu", torch.float32, sizes=(64,)) > 0
    True
    """
    device = torch.device(device if device is not None else
                          "cuda" if torch.cuda.is_available() else "cpu")
    if not dtype.is_floating_point:
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


def add_peak_fraction(rows, peak_tflops: float) -> list[dict]:
    """`cost_sweep` rows with ``peak_fraction``: achieved ``tflops`` / ``peak_tflops``
    (None where a row has no ``tflops``). The peak is typically `matmul_peak_tflops`."""
    if not peak_tflops or peak_tflops <= 0:
        raise ValueError(f"peak_tflops must be positive, got {peak_tflops}")
    return [{**r, "peak_fraction": r["tflops"] / peak_tflops if r.get("tflops") else None}
            for r in rows]
