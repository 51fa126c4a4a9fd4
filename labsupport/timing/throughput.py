"""Throughput: the device's measured matrix-multiply peak (TFLOP/s) in a given dtype, and
the fraction of it that a sweep's kernels reach, compared only within one dtype."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..devices import pick_device
from ..validation import check_distinct_positive_ints, check_positive_int
from .clocks import time_call
from .peaks import free_cuda

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
    sizes = _PEAK_SIZES.get(device.type, _PEAK_SIZES["cpu"]) if sizes is None else sizes
    sizes, reps = check_distinct_positive_ints("sizes", sizes), check_positive_int("reps", reps)
    g = torch.Generator(device=device).manual_seed(0)
    best = 0.0
    for n in sizes:
        a, b = (torch.randn(n, n, generator=g, device=device, dtype=dtype) for _ in range(2))
        out = torch.empty(n, n, device=device, dtype=dtype)
        seconds = time_call(torch.mm, a, b, out=out, reps=reps, warmup=2, device=device).median
        best = max(best, 2.0 * n ** 3 / seconds / 1e12)
        del a, b, out
    free_cuda()
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
    tflops = matmul_peak_tflops(device, dtype, sizes, reps=reps)    # checks dtype, sizes and reps
    tf32 = (device.type == "cuda" and dtype == torch.float32
            and torch.get_float32_matmul_precision() != "highest")
    return MatmulPeak(tflops, dtype, device.type, tf32)


def add_peak_fraction(rows, peak: MatmulPeak) -> list[dict]:
    """`cost_sweep` rows with ``peak_fraction``: achieved ``tflops`` / ``peak.tflops``
    (None where a row has no ``tflops``). ``peak`` is a `matmul_peak` measured in the
    dtype the rows ran in (each measured row names its ``dtype``); another dtype raises."""
    if not isinstance(peak, MatmulPeak):
        raise TypeError(f"peak must be a MatmulPeak from matmul_peak(device, dtype), got "
                        f"{type(peak).__name__}; a bare number does not say its dtype")
    if not peak.tflops or peak.tflops <= 0:
        raise ValueError(f"peak.tflops must be positive, got {peak.tflops}")
    for r in rows:
        if r.get("tflops") and not r.get("dtype"):
            raise ValueError(f"a row with tflops has no dtype (kernel {r.get('kernel')!r}, "
                             f"L={r.get('length')}); add_peak_fraction takes cost_sweep rows, which "
                             "name the dtype they ran in")
    ran = {r["dtype"] for r in rows if r.get("tflops")}
    if ran - {dtype_name(peak.dtype)}:
        raise ValueError(f"rows ran in {', '.join(sorted(ran))} but the peak was measured in "
                         f"{dtype_name(peak.dtype)}; compare work with the peak of its own dtype: "
                         f"matmul_peak(device, torch.{sorted(ran)[0]})")
    return [{**r, "peak_fraction": r["tflops"] / peak.tflops if r.get("tflops") else None}
            for r in rows]
