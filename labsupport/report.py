"""Printing measured results the same way in every notebook: verdicts and small tables,
and the record of what executed the notebook.

A verdict is a claim and whether it held, on one line; the regression tests compare
these lines, so a claim must not print hardware-dependent numbers.

The record: an early cell calls ``RUN = start_run(P)``, the last cell
``record_run(RUN)``, which prints the device, versions, profile, wall time and peak
memory on one line and glues them for the book's page "Where the numbers came from"
(`labsupport.provenance`, `labsupport.sphinx_provenance`).

>>> verdict("rows sum to one", True, width=20)
rows sum to one      True
"""
from __future__ import annotations

import json
import platform
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import torch

from .devices import pick_device
from .profile import Profile, current
from .provenance import RUN_KEY, summary
from .timing import attention_inputs, dtype_error, dtype_name, sdpa_backend_used, session_peak_bytes
from .validation import check_instance

WIDTH = 58


def verdict(claim: str, holds, *, width: int = WIDTH) -> None:
    """Print ``claim`` padded to ``width`` and whether it ``holds`` (True/False)."""
    print(f"{claim:<{width}} {bool(holds)}")


def glue(name: str, value, *, display: bool = False) -> None:
    """Record ``value`` under ``name`` for the book's prose (``{glue:text}`name:.3f```):
    ``myst_nb.glue(name, value, display=display)`` where myst-nb is installed (the book
    build, nbval); without it (Colab installs only this package) nothing, so the notebook
    still runs and prints its own results. A NumPy scalar or a one-element tensor is
    glued as the Python number it holds, whose text a format such as ``:.3f`` can read
    (myst-nb formats the text of the value; ``np.float64(0.5)`` is not a number there).
    Returns None, so that a cell ending in a glue shows nothing."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    elif hasattr(value, "item") and getattr(value, "shape", None) == ():      # NumPy scalars
        value = value.item()
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        return
    myst_glue(name, value, display=display)


def checklist(rows, *, title: str = "checks", width: int = WIDTH) -> None:
    """Print secondary checks as one compact block under a ``title``: each claim and
    whether it held, so that a section's main claims keep their own `verdict` lines."""
    rows = [(claim, bool(holds)) for claim, holds in rows]
    held = sum(holds for _, holds in rows)
    print(f"{title}: {held} of {len(rows)} hold")
    for claim, holds in rows:
        print(f"  {claim:<{width - 2}} {holds}")


def table(headers, rows, *, formats=None) -> None:
    """Print rows under right-aligned headers; ``formats`` maps a column to a format spec
    (``"{:.1f}"``) or a callable."""
    formats = formats or {}
    cells = [[_fmt(value, formats.get(i)) for i, value in enumerate(row)] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    print("  ".join(f"{h:>{w}}" for h, w in zip(headers, widths)))
    for r in cells:
        print("  ".join(f"{c:>{w}}" for c, w in zip(r, widths)))


def _fmt(value, spec) -> str:
    if spec is None:
        return str(value)
    return spec(value) if callable(spec) else spec.format(value)


def sweep_table(rows, *, flops: bool = False, peak=None) -> None:
    """Print `labsupport.timing.cost_sweep` rows: time median (with min-max where a point
    was timed several times), measured peak, the model where there is one, and why a
    point did not run.

    ``flops`` adds the achieved TFLOP/s; ``peak`` (a `labsupport.timing.matmul_peak`
    measured in the dtype the rows ran in) adds it and the fraction of that peak, in a
    column headed with the peak's label (``% of bf16 peak``, ``% of fp32 peak``)."""
    from .timing import add_peak_fraction, format_bytes

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


def machine_name(device=None) -> str:
    """A short name of the device a measurement ran on, for labels and saved sweeps."""
    import os
    import platform

    device = pick_device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU, {os.cpu_count()} cores ({platform.machine()})"


def save_sweep(rows, path, *, title: str = "", device=None, profile: str = "") -> Path:
    """Write `cost_sweep` rows to a JSON file, with where and how they were measured."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = dict(title=title, device=machine_name(device), profile=profile,
                  torch=torch.__version__, rows=list(rows))
    path.write_text(json.dumps(record, indent=1))
    return path


def load_sweep(path) -> dict:
    """Read a sweep written by `save_sweep`; a clear error if it is not one."""
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read a saved sweep from {path}: {err}") from err
    missing = {"rows", "device"} - set(record) if isinstance(record, dict) else {"rows"}
    rows = record.get("rows", []) if isinstance(record, dict) else []
    if missing or not all({"kernel", "length", "status"} <= set(r) for r in rows):
        raise ValueError(f"{path} is not a saved sweep: expected keys 'device' and 'rows', "
                         "each row with 'kernel', 'length' and 'status'")
    return record


def cpu_model() -> str:
    """The processor's model name (Linux: ``/proc/cpuinfo``), else what Python reports."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model") and value.strip():
                return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or f"{platform.machine() or 'unknown'} CPU"


def device_description(device) -> str:
    """The GPU's name, or the CPU's model and the threads PyTorch uses."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    threads = torch.get_num_threads()
    return f"{cpu_model()} ({threads} thread{'s' if threads != 1 else ''})"


@dataclass(frozen=True)
class RunStart:
    """When and with which profile a notebook's execution began; `record_run` ends it."""

    profile: str
    device: torch.device
    started: float                     # time.perf_counter() at the start


def start_run(profile=None) -> RunStart:
    """Mark the start of a notebook's execution (call it in an early cell).

    ``profile``: the notebook's `labsupport.profile.Profile` (``P``), or None for
    `labsupport.profile.current()`.
    """
    profile = current() if profile is None else profile
    check_instance("start_run's profile", profile, Profile,
                   "the notebook's labsupport.profile.Profile (P = profile.current()) or None")
    return RunStart(profile.name, profile.device, time.perf_counter())


def run_record(start: RunStart) -> dict:
    """The record of this execution (`labsupport.provenance` lists its fields): device,
    torch and CUDA versions, profile, wall time since ``start`` and peak memory: the
    CUDA allocator's peak on a GPU, and the process's peak resident set (both across
    the resets that measurements make: `labsupport.timing.session_peak_bytes`)."""
    check_instance("the run's start", start, RunStart,
                   "what start_run(P) returned (add RUN = start_run(P) after the imports)")
    return dict(device=device_description(start.device), torch=torch.__version__,
                cuda=torch.version.cuda, python=platform.python_version(),
                profile=start.profile, wall_s=round(time.perf_counter() - start.started, 1),
                peak_gpu_bytes=session_peak_bytes(start.device) if start.device.type == "cuda" else None,
                peak_rss_bytes=session_peak_bytes("cpu"),
                finished=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))


def record_run(start: RunStart) -> None:
    """The notebook's last cell: print the record of this execution on one line and glue
    it (``myst_nb.glue``, not displayed) under `labsupport.provenance.RUN_KEY`, for the
    page "Where the numbers came from". Without myst-nb or outside a Jupyter kernel
    (Colab, a script) the line is printed and nothing is glued."""
    record = run_record(start)
    print("run record:", summary(record))
    try:
        from IPython import get_ipython
        from myst_nb import glue
    except ImportError:
        return
    if get_ipython() is not None:
        glue(RUN_KEY, record, display=False)
