"""Where the book's numbers came from: the record a notebook keeps of its own execution.

A notebook's last code cell calls `labsupport.report.record_run`, which glues a record
under the name ``RUN_KEY``; the Sphinx extension `labsupport.sphinx_provenance` gathers
the records of every notebook into the page "Where the numbers came from". This module
is what both sides share: the name, the fields and how a record reads. It imports
neither torch nor Sphinx.

A record is a dict of plain values (``SCHEMA`` lists the keys):

- ``device``: the GPU's name, or the CPU's model with the threads PyTorch used;
- ``torch``, ``cuda`` (None for a CPU build), ``python``: versions;
- ``profile``: the size profile (``cpu``, ``gpu``, ``smoke``);
- ``wall_s``: seconds from `labsupport.report.start_run` to the record;
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

RUN_KEY = "labsupport_run"
SCHEMA = ("device", "torch", "cuda", "python", "profile", "wall_s", "peak_gpu_bytes",
          "peak_rss_bytes", "finished")
NOT_RECORDED = "not recorded"


def format_bytes(n) -> str:
    """``1.9 GB`` (decimal units, as `labsupport.timing.format_bytes`); None: not measured."""
    if n is None:
        return "not measured"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def format_seconds(seconds) -> str:
    """``48 s``, ``12 min 34 s``, ``1 h 02 min``; None: not measured."""
    if seconds is None:
        return "not measured"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def peak_text(record: dict) -> str:
    """The peak memory, labelled with what was measured: the GPU allocator's peak and
    the host process's resident set on a GPU run, the resident set alone on a CPU run."""
    gpu, rss = record.get("peak_gpu_bytes"), record.get("peak_rss_bytes")
    resident = f"{format_bytes(rss)} resident (process)" if rss is not None else None
    if gpu is None:
        return resident or "not measured"
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
