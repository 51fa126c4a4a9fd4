"""The pytest plugin: while ``pytest --nbval`` re-executes notebooks, keep what it ran, and
keep to a time budget.

    python -m pytest -p tools.ci.nbval_report.plugin --report-dir OUT [--budget-start EPOCH \
        --budget-seconds 600 [--budget-previous OLD/report.json]] chapters/*.ipynb

nbval runs each notebook's code cells in one kernel, one test per cell, and compares
their outputs with the committed ones. That single execution is also the source of
what this plugin writes to ``OUT``:

- ``notebooks/NAME.ipynb``: each notebook as this run executed it (nbval's outputs,
  execution counts, the kernel's widget state; a view of a widget closed before the end,
  such as a finished progress bar, keeps its text form), for an HTML build with
  execution off;
- ``report.json`` and ``report.md`` (`tools.ci.nbval_report.render`): per notebook the
  cells passed, failed and skipped, the wall time (kernel start to last cell) and the
  slowest cells, and what the kernel ran on (`tools.ci.nbval_report.kernel`): device name,
  torch and CUDA versions, the profile, and the peak GPU memory that PyTorch allocated.

The budget (tools/ci/gpu_check.sh passes it: ``--budget-seconds`` from ``--budget-start``, a
Unix time, so that what ran before pytest counts; `tools.ci.nbval_report.budget`) decides at
each notebook's first cell whether to launch it. A notebook not launched is listed under
``skipped`` with the reason, and its kernel is never started. Each cell of a launched
notebook gets at most what is left as its nbval timeout, so a notebook that runs past its
estimate is interrupted at the budget: its status is ``stopped``, the interrupted cell and
those after it count as skipped (not failed), and its note says where it stopped.
"""
from __future__ import annotations

import json
import platform
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest

from .budget import RESERVE_S, Budget, Estimates, over_budget
from .kernel import KERNEL_SETUP, KERNEL_SUMMARY, QUERY_TIMEOUT, SUMMARY_EXPRESSION, run_in_kernel
from .render import markdown

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def pytest_addoption(parser):
    group = parser.getgroup("nbval")
    group.addoption(
        "--report-dir", default=None, metavar="DIR",
        help="write the executed notebooks and an execution report (report.json, "
             "report.md) to DIR")
    group.addoption("--budget-seconds", type=float, default=None, metavar="S",
                    help="launch a notebook only if its estimate fits in this budget; stop one at it")
    group.addoption("--budget-start", type=float, default=None, metavar="EPOCH",
                    help="when the budget started (Unix time; default: now)")
    group.addoption("--budget-previous", default=None, metavar="REPORT",
                    help="an earlier run's report.json, whose times are the estimates")


def pytest_configure(config):
    out = config.getoption("report_dir")
    if out:
        try:
            budget = budget_from_options(config)
        except ValueError as err:
            raise pytest.UsageError(str(err)) from None
        timeout = float(config.getoption("nbval_cell_timeout", default=None) or 2000)
        config.pluginmanager.register(Recorder(Path(out), budget, timeout), "nbval_report_recorder")


def budget_from_options(config) -> Budget | None:
    """The budget that the command line asks for, or None (no ``--budget-seconds``)."""
    seconds = config.getoption("budget_seconds")
    if seconds is None:
        return None
    estimates = Estimates.from_report(config.getoption("budget_previous"))
    return Budget(seconds, config.getoption("budget_start") or time.time(), estimates)


def _is_cell(item) -> bool:
    return hasattr(item, "cell_num") and hasattr(item.parent, "kernel")


class Recorder:
    """Collects, per notebook, nbval's outputs and outcomes; writes them as it goes; keeps
    to the budget, if there is one."""

    def __init__(self, out: Path, budget: Budget | None = None, cell_timeout: float = 2000.0):
        self.out = out
        self.budget, self.cell_timeout = budget, cell_timeout
        self.created = datetime.now(timezone.utc)
        self.started = time.perf_counter()
        self.notebooks: dict[str, dict] = {}            # notebook node id -> record
        self.skipped: dict[str, dict] = {}              # notebook node id -> why not launched
        self.exit_status = None

    def _record(self, item) -> dict:
        return self.notebooks.setdefault(item.parent.nodeid, dict(
            path=Path(item.parent.path), start=time.perf_counter(), seconds=None,
            cells={}, cell_seconds={}, outputs={}, kernel={}, notes=[], limits={}, stopped=None))

    def _keep_to_budget(self, item) -> None:
        """Skip a cell that the budget cannot hold (all of a notebook not launched); give the
        others at most what is left as their nbval timeout."""
        nodeid, now, budget = item.parent.nodeid, time.time(), self.budget
        if nodeid in self.skipped:
            pytest.skip(f"not launched: {self.skipped[nodeid]['reason']}")
        if nodeid not in self.notebooks:                 # the first cell: launch the notebook?
            name = Path(item.parent.path).name
            estimate = budget.estimates.notebook(name)
            reason = over_budget(estimate, now=now, deadline=budget.deadline)
            if reason:
                self.skipped[nodeid] = dict(notebook=name, reason=reason, estimate_s=round(estimate, 1),
                                            left_s=round(budget.deadline - now, 1))
                pytest.skip(f"not launched: {reason}")
        record = self._record(item)
        if record["stopped"]:
            pytest.skip("the notebook was stopped at the budget")
        left = budget.deadline - RESERVE_S - now
        if left <= 0:
            record["stopped"] = dict(cell=item.cell_num, after=None)
            pytest.skip("stopped at the budget")
        item.config.option.nbval_cell_timeout = min(left, self.cell_timeout)
        if left < self.cell_timeout:
            record["limits"][item.nodeid.partition("::")[2]] = (item.cell_num, left)

    def _query_timeout(self) -> float:
        if self.budget is None:
            return QUERY_TIMEOUT
        return max(5.0, min(QUERY_TIMEOUT, self.budget.deadline - time.time()))

    # --- the hooks -----------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item):
        first = _is_cell(item) and item.parent.nodeid not in self.notebooks
        if _is_cell(item):
            if self.budget is not None:
                self._keep_to_budget(item)               # raises pytest.skip when over
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
        limit = record["limits"].get(cell)
        if (limit and report.when == "call" and report.failed and report.duration >= limit[1] - 1.0
                and "Timeout of" in str(report.longrepr)):      # interrupted at the budget
            record["cells"][cell] = "skipped"
            record["cell_seconds"][cell] = report.duration
            record["stopped"] = dict(cell=limit[0], after=report.duration)
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
        if item.parent.nodeid in self.skipped:
            self._write_report()
            return
        record = self._record(item)
        record["seconds"] = time.perf_counter() - record["start"]
        if record["stopped"]:
            record["notes"].append(_stopped_note(record["stopped"], item.cell_num))
        kernel = item.parent.kernel
        if kernel is not None and kernel.is_alive():
            try:
                record["kernel"] = json.loads(run_in_kernel(
                    kernel, KERNEL_SUMMARY, SUMMARY_EXPRESSION, self._query_timeout()))
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
        budget = self.budget
        return dict(created=self.created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    seconds=round(time.perf_counter() - self.started, 1),
                    runner_python=platform.python_version(),
                    pytest_exit_status=self.exit_status,
                    passed=(bool(notebooks) and not self.skipped
                            and all(n["status"] == "passed" for n in notebooks)),
                    notebooks=notebooks, skipped=list(self.skipped.values()),
                    run=dict(budget_s=None if budget is None else budget.seconds,
                             estimates=None if budget is None else budget.estimates.describe()))

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


def _stopped_note(stopped: dict, last: int) -> str:
    """Where the budget stopped a notebook whose last code cell is `last`."""
    k = stopped["cell"]
    if stopped["after"] is None:
        return f"stopped at the budget before cell {k}; cells {k}-{last} not run"
    rest = f"cells {k + 1}-{last} not run" if k < last else "it was the last cell"
    return f"stopped at the budget: cell {k} interrupted after {stopped['after']:.0f} s; {rest}"


def _status(record: dict, counts: Counter) -> str:
    if counts["failed"]:
        return "failed"
    if record["stopped"]:
        return "stopped"
    return "passed" if counts["passed"] else "failed"


def _notebook_summary(record: dict) -> dict:
    counts = Counter(record["cells"].values())
    kernel = record["kernel"]
    slowest = sorted(record["cell_seconds"].items(), key=lambda kv: -kv[1])[:3]
    name = record["path"].name
    return dict(
        notebook=name,
        status=_status(record, counts),
        cells=dict(passed=counts["passed"], failed=counts["failed"], skipped=counts["skipped"]),
        seconds=round(record["seconds"], 1),
        slowest_cells=[dict(cell=c, seconds=round(s, 1)) for c, s in slowest],
        device=kernel.get("device"), torch=kernel.get("torch"), cuda=kernel.get("cuda"),
        profile=kernel.get("profile"), python=kernel.get("python"),
        peak_gpu_allocated_bytes=kernel.get("peak_gpu_allocated"),
        peak_gpu_reserved_bytes=kernel.get("peak_gpu_reserved"),
        executed=f"notebooks/{name}", notes=record["notes"])
