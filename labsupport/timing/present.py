"""Cost sweeps as the notebooks show them: `sweep_table` (time, measured peak, the model,
why a point did not run) and `precision_note` (the SDPA backend that ran, and each kernel's
error against itself in float32 below float32)."""
from __future__ import annotations

import torch

from ..attention import sdpa_backend_used
from ..display import table
from ..units import format_bytes
from .sweep import attention_inputs, dtype_error
from .throughput import add_peak_fraction, dtype_name

__all__ = ["sweep_table", "precision_note"]


def sweep_table(rows, *, flops: bool = False, peak=None) -> None:
    """Print `labsupport.timing.cost_sweep` rows: time median (with min-max where a point
    was timed several times), measured peak, the model where there is one, and why a
    point did not run.

    ``flops`` adds the achieved TFLOP/s; ``peak`` (a `labsupport.timing.matmul_peak`
    measured in the dtype the rows ran in) adds it and the fraction of that peak, in a
    column headed with the peak's label (``% of bf16 peak``, ``% of fp32 peak``)."""

    def ranged(r):                      # several repetitions: they differ, min < max
        return r["status"] == "ok" and r["time_min"] != r["time_max"]

    def ms(r):
        if r["status"] != "ok":
            return r["status"]
        spread = f" ({r['time_min'] * 1e3:.1f}-{r['time_max'] * 1e3:.1f})" if ranged(r) else ""
        return f"{r['time_s'] * 1e3:.1f}{spread}"

    if peak is not None:
        rows, flops = add_peak_fraction(rows, peak), True
    time_header = "time ms (min-max)" if any(ranged(r) for r in rows) else "time ms"
    headers = ["kernel", "L", time_header, "peak (measured)", "model"]
    headers += ["TFLOP/s"] if flops else []
    headers += [f"% of {peak.label}"] if peak is not None else []
    out = []
    for r in rows:
        measured = format_bytes(r["peak_bytes"]) if r["status"] == "ok" else r["note"]
        model = format_bytes(r["model_bytes"]) if r["model_bytes"] is not None else "-"
        row = [r["kernel"], r["length"], ms(r), measured, model]
        if flops:
            row.append(f"{r['tflops']:.3f}" if r.get("tflops") else "-")
        if peak is not None:
            row.append(f"{100 * r['peak_fraction']:.1f}" if r["peak_fraction"] else "-")
        out.append(row)
    table(headers, out)


def precision_note(kernels, length: int, dtype, *, make_inputs=None, **kernel_kwargs) -> None:
    """Print what a sweep in ``dtype`` measured: the SDPA backend that ran on its inputs, and,
    below float32, each kernel's max error against itself in float32 at ``length``
    (`labsupport.timing.dtype_error`). ``kernels``: name -> kernel, as for `cost_sweep`;
    ``make_inputs(L)``: float32 inputs on the sweep's device (default `attention_inputs`);
    ``kernel_kwargs`` (e.g. ``is_causal=True``) go to every kernel. Its lines depend on the
    device: print them in a cell whose output is not checked."""

    make_inputs = make_inputs or attention_inputs
    q, k, v = (t.to(dtype) for t in make_inputs(length))
    backend = sdpa_backend_used(q, k, v, is_causal=kernel_kwargs.get("is_causal", False))
    print(f"inputs in {dtype_name(dtype)} on {q.device.type}; SDPA ran its {backend} backend")
    if dtype == torch.float32:
        return
    print(f"max |error| against the same kernel in float32, L = {length}:")
    table(["kernel", "max error"],
          [(name, dtype_error(kernel, length, dtype, make_inputs=make_inputs, **kernel_kwargs))
           for name, kernel in kernels.items()], formats={1: "{:.1e}"})


