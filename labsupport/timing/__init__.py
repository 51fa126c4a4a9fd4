"""Honest timing and peak-memory measurement on CUDA and on the CPU.

Time: CUDA events after warm-up on a GPU, ``time.perf_counter`` after warm-up on the
CPU; the median of several repetitions with min and max. Memory: measured, never
computed, and never in the same call as a timing. One job per module:

- `clocks`: `Timing`, `time_call`;
- `peaks`: measured peak memory (`peak_memory`, `session_peak_bytes`,
  `peak_resident_bytes`, `profiler_active`, `cpu_peak_supported`) and the structural
  probe `LargestTensor`;
- `sweep`: `cost_sweep` over kernels and lengths, `predict_peak`, `sweep_exponent`, its
  inputs (`attention_inputs`, `dtype_error`), `attention_flops`, `is_out_of_memory`;
- `throughput`: the matrix-multiply peak (`matmul_peak_tflops`, `matmul_peak`,
  `MatmulPeak`), `add_peak_fraction`, `dtype_name`;
- `present`: a sweep's rows as a table (`sweep_table`) and what a half-precision sweep ran
  (`precision_note`).

Every public name is imported from here (``from labsupport.timing import cost_sweep``), with
`fit_power_law`, which the design lists here (it lives in `labsupport.scaling`).
"""
from ..scaling import fit_power_law
from .clocks import Timing, time_call
from .peaks import (
    LargestTensor,
    cpu_peak_supported,
    peak_memory,
    peak_resident_bytes,
    profiler_active,
    session_peak_bytes,
)
from .present import precision_note, sweep_table
from .sweep import (
    attention_flops,
    attention_inputs,
    cost_sweep,
    dtype_error,
    is_out_of_memory,
    predict_peak,
    sweep_exponent,
)
from .throughput import MatmulPeak, add_peak_fraction, dtype_name, matmul_peak, matmul_peak_tflops

__all__ = [
    "Timing", "time_call",
    "peak_memory", "session_peak_bytes", "peak_resident_bytes", "profiler_active",
    "cpu_peak_supported", "LargestTensor",
    "cost_sweep", "predict_peak", "sweep_exponent", "attention_inputs", "dtype_error",
    "attention_flops", "is_out_of_memory",
    "matmul_peak_tflops", "matmul_peak", "MatmulPeak", "add_peak_fraction", "dtype_name",
    "sweep_table", "precision_note", "fit_power_law",
]
