"""Where the book's numbers came from: the record a notebook keeps of its own execution,
and where a saved measurement was made.

A notebook's early cell calls ``RUN = start_run(P)``, its last cell ``record_run(RUN)``,
which prints the device, versions, profile, wall time and peak memory on one line and
glues the record under the name ``RUN_KEY``; the Sphinx extension
`labsupport.sphinx_provenance` gathers the records of every notebook into the page "Where
the numbers came from". `save_sweep` and `load_sweep` keep a cost sweep with the machine
it ran on (`machine_name`), for comparing machines (`labsupport.widgets.cost_figure`).

Importing this module imports neither torch nor Sphinx, so the Sphinx extension can read
records without either: the functions that measure (`start_run`, `run_record`,
`record_run`, `device_description`, `machine_name`, `save_sweep`) import torch when called.

A record is a dict of plain values (``SCHEMA`` lists the keys):

- ``device``: the GPU's name, or the CPU's model with the threads PyTorch used;
- ``torch``, ``cuda`` (None for a CPU build), ``python``: versions;
- ``profile``: the size profile (``cpu``, ``gpu``, ``smoke``);
- ``wall_s``: seconds from `start_run` to the record;
- ``peak_gpu_bytes``: the CUDA allocator's peak (None without CUDA);
- ``peak_rss_bytes``: the process's peak resident set (None where not measured);
- ``finished``: when the record was made, UTC, ``YYYY-MM-DD HH:MM UTC``.

>>> record = dict(device="cpu: Example CPU (2 threads)", torch="2.13.0", cuda=None,
...               python="3.11.7", profile="cpu", wall_s=754.2, peak_gpu_bytes=None,
...               peak_rss_bytes=1.9e9, finished="2026-01-01 12:00 UTC")
>>> summary(record).split(" | ")  # doctest: +NORMALIZE_WHITESPACE
['cpu: Example CPU (2 threads)', 'torch 2.13.0, CUDA none', 'profile cpu', '12 min 34 s',
 'peak 1.9 GB resident (process)']
"""
from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from .units import NOT_MEASURED, format_bytes, format_seconds

RUN_KEY = "labsupport_run"
SCHEMA = ("device", "torch", "cuda", "python", "profile", "wall_s", "peak_gpu_bytes",
          "peak_rss_bytes", "finished")
NOT_RECORDED = "not recorded"

if TYPE_CHECKING:
    import torch


# --- reading a record (torch-free: the Sphinx extension's side) ---------------------------

def peak_text(record: dict) -> str:
    """The peak memory, labelled with what was measured: the GPU allocator's peak and
    the host process's resident set on a GPU run, the resident set alone on a CPU run."""
    gpu, rss = record.get("peak_gpu_bytes"), record.get("peak_rss_bytes")
    resident = f"{format_bytes(rss)} resident (process)" if rss is not None else None
    if gpu is None:
        return resident or NOT_MEASURED
    allocated = f"{format_bytes(gpu)} allocated on the GPU"
    return f"{allocated}; {resident}" if resident else allocated


def describe(record: dict) -> dict[str, str]:
    """A record's fields as the page and the summary line show them."""
    return {"device": str(record.get("device") or "-"),
            "torch": str(record.get("torch") or "-"),
            "CUDA": str(record.get("cuda") or "none"),
            "profile": str(record.get("profile") or "-"),
            "wall time": format_seconds(record.get("wall_s")),
            "peak memory": peak_text(record),
            "recorded": str(record.get("finished") or "-")}


def summary(record: dict) -> str:
    """One line: device | versions | profile | wall time | peak memory."""
    d = describe(record)
    return (f"{d['device']} | torch {d['torch']}, CUDA {d['CUDA']} | profile {d['profile']} "
            f"| {d['wall time']} | peak {d['peak memory']}")


# --- the machine -------------------------------------------------------------------------

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
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    threads = torch.get_num_threads()
    return f"{cpu_model()} ({threads} thread{'s' if threads != 1 else ''})"


def machine_name(device=None) -> str:
    """A short name of the device a measurement ran on, for labels and saved sweeps."""
    import torch

    from .devices import pick_device

    device = pick_device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU, {os.cpu_count()} cores ({platform.machine()})"


# --- a notebook's run --------------------------------------------------------------------

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
    from .profile import Profile, current
    from .validation import check_instance

    profile = current() if profile is None else profile
    check_instance("start_run's profile", profile, Profile,
                   "the notebook's labsupport.profile.Profile (P = profile.current()) or None")
    return RunStart(profile.name, profile.device, time.perf_counter())


def run_record(start: RunStart) -> dict:
    """The record of this execution (the module's docstring lists its fields): device,
    torch and CUDA versions, profile, wall time since ``start`` and peak memory: the
    CUDA allocator's peak on a GPU, and the process's peak resident set (both across
    the resets that measurements make: `labsupport.timing.session_peak_bytes`)."""
    import torch

    from .timing import session_peak_bytes
    from .validation import check_instance

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
    it (``myst_nb.glue``, not displayed) under `RUN_KEY`, for the page "Where the numbers
    came from". Without myst-nb or outside a Jupyter kernel (Colab, a script) the line is
    printed and nothing is glued."""
    record = run_record(start)
    print("run record:", summary(record))
    try:
        from IPython import get_ipython
        from myst_nb import glue
    except ImportError:
        return
    if get_ipython() is not None:
        glue(RUN_KEY, record, display=False)


# --- saved sweeps ------------------------------------------------------------------------

def save_sweep(rows, path, *, title: str = "", device=None, profile: str = "") -> Path:
    """Write `labsupport.timing.cost_sweep` rows to a JSON file, with where and how they
    were measured."""
    import torch

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
