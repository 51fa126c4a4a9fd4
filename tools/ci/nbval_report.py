"""A pytest plugin: while ``pytest --nbval`` re-executes notebooks, keep what it ran.

    PYTHONPATH=tools python -m pytest -p nbval_report --report-dir OUT chapters/*.ipynb

nbval runs each notebook's code cells in one kernel, one test per cell, and compares
their outputs with the committed ones. That single execution is also the source of
what this plugin writes to ``OUT``:

- ``notebooks/NAME.ipynb``: each notebook as this run executed it (nbval's outputs,
  execution counts, the kernel's widget state; a view of a widget closed before the end,
  such as a finished progress bar, keeps its text form), for an HTML build with
  execution off;
- ``report.json`` and ``report.md``: per notebook the cells passed, failed and skipped,
  the wall time (kernel start to last cell) and the slowest cells, and what the
  kernel ran on: device name, torch and CUDA versions, the profile, and the peak GPU
  memory that PyTorch allocated.

Peak GPU memory is read from the notebook's own kernel. The notebooks reset the
allocator's peak statistics while they measure (`labsupport.timing.peak_memory`), so
``torch.cuda.max_memory_allocated()`` after the last cell would cover only the time
since the last reset. Before the first cell the plugin therefore wraps
``torch.cuda.reset_peak_memory_stats`` in the kernel so that every reset first folds
the peak so far into a running maximum, and reads that maximum after the last cell.
It counts tensors allocated through PyTorch (``max_memory_allocated``; the allocator's
reserved peak is reported beside it), not the CUDA context or other libraries.
Without CUDA it is "not measured". Both queries run silently: they add no outputs and
leave no names in the notebook's namespace.
"""
from __future__ import annotations

import ast
import json
import platform
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from queue import Empty

import nbformat
import pytest

QUERY_TIMEOUT = 120                     # seconds for the kernel to answer a query
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

# Runs in the kernel before the first cell, in its own globals (exec(..., {})).
KERNEL_SETUP = r'''
import torch
if torch.cuda.is_available():
    import torch.cuda.memory as memory
    from torch.cuda._utils import _get_device_index
    original, folded = memory.reset_peak_memory_stats, {}

    def reset_peak_memory_stats(device=None):
        """Fold the peak so far into nbval_report's running maximum, then reset."""
        i = _get_device_index(device, optional=True)
        allocated, reserved = folded.get(i, (0, 0))
        folded[i] = (max(allocated, torch.cuda.max_memory_allocated(i)),
                     max(reserved, torch.cuda.max_memory_reserved(i)))
        return original(device)

    reset_peak_memory_stats.__wrapped__ = original
    memory.reset_peak_memory_stats = torch.cuda.reset_peak_memory_stats = reset_peak_memory_stats
    memory._nbval_report_folded = folded
'''

# Runs in the kernel after the last cell; leaves its answer, JSON, in sys._nbval_report.
KERNEL_SUMMARY = r'''
import json, platform, sys
info = dict(python=platform.python_version(), torch=None, cuda=None, device=None,
            profile=None, peak_gpu_allocated=None, peak_gpu_reserved=None, widgets=None)
torch = sys.modules.get("torch")
if torch is not None:
    info.update(torch=torch.__version__, cuda=torch.version.cuda)
    if torch.cuda.is_available():
        i = torch.cuda.current_device()
        allocated, reserved = getattr(torch.cuda.memory, "_nbval_report_folded", {}).get(i, (0, 0))
        info.update(device=torch.cuda.get_device_name(i),
                    peak_gpu_allocated=max(allocated, torch.cuda.max_memory_allocated(i)),
                    peak_gpu_reserved=max(reserved, torch.cuda.max_memory_reserved(i)))
    else:
        info["device"] = f"cpu ({platform.machine()}, {torch.get_num_threads()} threads)"
profile = sys.modules.get("labsupport.profile")
if profile is not None:
    info["profile"] = profile.current().name
widgets = sys.modules.get("ipywidgets")
state = widgets.Widget.get_manager_state() if widgets is not None else {"state": {}}
if state["state"]:
    info["widgets"] = state
sys._nbval_report = json.dumps(info, default=str)
'''


def pytest_addoption(parser):
    parser.getgroup("nbval").addoption(
        "--report-dir", default=None, metavar="DIR",
        help="write the executed notebooks and an execution report (report.json, "
             "report.md) to DIR")


def pytest_configure(config):
    out = config.getoption("report_dir")
    if out:
        config.pluginmanager.register(Recorder(Path(out)), "nbval_report_recorder")


def _is_cell(item) -> bool:
    return hasattr(item, "cell_num") and hasattr(item.parent, "kernel")


def run_in_kernel(kernel, code: str, expression: str | None = None):
    """Execute ``code`` silently in nbval's kernel (in fresh globals); return the
    value of ``expression`` (a string) evaluated afterwards, or None.
    Raises RuntimeError when the kernel reports an error or does not answer."""
    msg_id = kernel.kc.execute(f"exec({code!r}, {{}})", silent=True, store_history=False,
                               user_expressions={"r": expression} if expression else {},
                               allow_stdin=False, stop_on_error=False)
    deadline = time.monotonic() + QUERY_TIMEOUT
    while True:
        try:
            reply = kernel.kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        except Empty:
            raise RuntimeError(f"the kernel did not answer within {QUERY_TIMEOUT} s") from None
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    content = reply["content"]
    if content["status"] != "ok":
        raise RuntimeError(f"{content.get('ename')}: {content.get('evalue')}")
    if not expression:
        return None
    value = content["user_expressions"]["r"]
    if value["status"] != "ok":
        raise RuntimeError(f"{value.get('ename')}: {value.get('evalue')}")
    return ast.literal_eval(value["data"]["text/plain"])


class Recorder:
    """Collects, per notebook, nbval's outputs and outcomes; writes them as it goes."""

    def __init__(self, out: Path):
        self.out = out
        self.created = datetime.now(timezone.utc)
        self.started = time.perf_counter()
        self.notebooks: dict[str, dict] = {}            # notebook node id -> record
        self.exit_status = None

    def _record(self, item) -> dict:
        return self.notebooks.setdefault(item.parent.nodeid, dict(
            path=Path(item.parent.path), start=time.perf_counter(), seconds=None,
            cells={}, cell_seconds={}, outputs={}, kernel={}, notes=[]))

    # --- the hooks -----------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item):
        first = _is_cell(item) and item.parent.nodeid not in self.notebooks
        if _is_cell(item):
            self._record(item)
        result = yield                                   # nbval starts the kernel here
        if first:
            try:
                run_in_kernel(item.parent.kernel, KERNEL_SETUP)
            except RuntimeError as err:
                self._record(item)["notes"].append(f"peak GPU memory not tracked: {err}")
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        try:
            return (yield)
        finally:
            if _is_cell(item):
                self._record(item)["outputs"][item.cell_num] = item.test_outputs

    def pytest_runtest_logreport(self, report):
        notebook, _, cell = report.nodeid.partition("::")
        record = self.notebooks.get(notebook)
        if record is None or not cell:
            return
        if report.failed:
            record["cells"][cell] = "failed"
        elif record["cells"].get(cell) != "failed":
            if report.skipped:
                record["cells"][cell] = "skipped"
            elif report.when == "call":
                record["cells"][cell] = "passed"
        if report.when == "call":
            record["cell_seconds"][cell] = report.duration

    @pytest.hookimpl(tryfirst=True)                      # before nbval stops the kernel
    def pytest_runtest_teardown(self, item, nextitem):
        if not _is_cell(item) or (nextitem is not None and nextitem.parent is item.parent):
            return
        record = self._record(item)
        record["seconds"] = time.perf_counter() - record["start"]
        kernel = item.parent.kernel
        if kernel is not None and kernel.is_alive():
            try:
                record["kernel"] = json.loads(run_in_kernel(
                    kernel, KERNEL_SUMMARY, "__import__('sys')._nbval_report"))
            except RuntimeError as err:
                record["notes"].append(f"kernel summary failed: {err}")
        else:
            record["notes"].append("the kernel had died: no device or memory information")
        self._write_notebook(record)
        self._write_report()

    def pytest_sessionfinish(self, session, exitstatus):
        self.exit_status = int(exitstatus)
        self._write_report()

    # --- writing -------------------------------------------------------------------------

    def _write_notebook(self, record: dict) -> None:
        nb = nbformat.read(record["path"], as_version=4)
        widgets = record["kernel"].get("widgets") or {}
        live = set(widgets.get("state", {}))
        count = 0
        for cell_num, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
            cell.metadata.pop("execution", None)
            outputs = record["outputs"].get(cell_num)
            if outputs is None:                          # not run (skipped, dead kernel)
                cell.outputs, cell.execution_count = [], None
                continue
            count += 1
            cell.execution_count = count
            cell.outputs = [nbformat.from_dict(dict(o)) for o in outputs]
            for out in cell.outputs:
                if out.output_type == "execute_result":
                    out.execution_count = count
                _drop_closed_widget_view(out, live)
        if live:
            nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": widgets}
        else:
            nb.metadata.pop("widgets", None)
        path = self.out / "notebooks" / record["path"].name
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, path)

    def summary(self) -> dict:
        notebooks = [_notebook_summary(r) for r in self.notebooks.values() if r["seconds"] is not None]
        return dict(created=self.created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    seconds=round(time.perf_counter() - self.started, 1),
                    runner_python=platform.python_version(),
                    pytest_exit_status=self.exit_status,
                    passed=bool(notebooks) and all(n["status"] == "passed" for n in notebooks),
                    notebooks=notebooks)

    def _write_report(self) -> None:
        summary = self.summary()
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "report.json").write_text(json.dumps(summary, indent=2) + "\n")
        (self.out / "report.md").write_text(markdown(summary))


def _drop_closed_widget_view(output, live: set) -> None:
    """A view of a widget closed before the end (a finished ``tqdm`` bar) has no state to
    render from: keep its text form instead."""
    view = output.get("data", {}).get(WIDGET_VIEW)
    if view is not None and view.get("model_id") not in live and len(output.data) > 1:
        del output.data[WIDGET_VIEW]


def _notebook_summary(record: dict) -> dict:
    counts = Counter(record["cells"].values())
    kernel = record["kernel"]
    slowest = sorted(record["cell_seconds"].items(), key=lambda kv: -kv[1])[:3]
    name = record["path"].name
    return dict(
        notebook=name,
        status="passed" if counts["passed"] and not counts["failed"] else "failed",
        cells=dict(passed=counts["passed"], failed=counts["failed"], skipped=counts["skipped"]),
        seconds=round(record["seconds"], 1),
        slowest_cells=[dict(cell=c, seconds=round(s, 1)) for c, s in slowest],
        device=kernel.get("device"), torch=kernel.get("torch"), cuda=kernel.get("cuda"),
        profile=kernel.get("profile"), python=kernel.get("python"),
        peak_gpu_allocated_bytes=kernel.get("peak_gpu_allocated"),
        peak_gpu_reserved_bytes=kernel.get("peak_gpu_reserved"),
        executed=f"notebooks/{name}", notes=record["notes"])


def _bytes(n) -> str:
    if n is None:
        return "not measured"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def markdown(summary: dict) -> str:
    """The report as a Markdown page: one row per notebook, then the slowest cells."""
    notebooks = summary["notebooks"]
    profiles = sorted({str(n["profile"]) for n in notebooks}) or ["-"]
    passed = sum(n["status"] == "passed" for n in notebooks)
    lines = ["# Notebook execution report", "",
             f"{len(notebooks)} notebooks, {passed} passed, in {summary['seconds']:.0f} s; "
             f"profile {', '.join(profiles)}; created {summary['created']}.", "",
             "| notebook | result | cells passed / failed / skipped | time (s) | device | torch "
             "| CUDA | peak GPU memory (allocated; reserved) |",
             "| --- | --- | --- | ---: | --- | --- | --- | --- |"]
    for n in notebooks:
        c = n["cells"]
        peak = _bytes(n["peak_gpu_allocated_bytes"])
        if n["peak_gpu_reserved_bytes"] is not None:
            peak += f"; {_bytes(n['peak_gpu_reserved_bytes'])}"
        lines.append(f"| {n['notebook']} | {n['status']} | {c['passed']} / {c['failed']} / "
                     f"{c['skipped']} | {n['seconds']:.0f} | {n['device'] or '-'} | "
                     f"{n['torch'] or '-'} | {n['cuda'] or '-'} | {peak} |")
    lines += ["", "Slowest cells (code-cell index, seconds):", ""]
    for n in notebooks:
        cells = ", ".join(f"{s['cell']} ({s['seconds']:.0f} s)" for s in n["slowest_cells"])
        lines.append(f"- {n['notebook']}: {cells or '-'}")
        lines += [f"  - note: {note}" for note in n["notes"]]
    return "\n".join(lines) + "\n"
