"""A pytest plugin: while ``pytest --nbval`` re-executes notebooks, keep what it ran, and
keep to a time budget.

    python -m pytest -p tools.ci.nbval_report --report-dir OUT chapters/*.ipynb
    python -m pytest -p tools.ci.nbval_report --report-dir OUT --budget-start EPOCH \
        --budget-seconds 600 [--budget-previous OLD/report.json] chapters/*.ipynb

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

The budget (tools/ci/gpu_check.sh passes it: ``--budget-seconds`` from ``--budget-start``, a
Unix time, so that what ran before pytest counts) decides at each notebook's first cell
whether to launch it: only when its estimate fits in what is left, less ``RESERVE_S`` kept
for the report. A notebook not launched is listed under ``skipped`` with the reason, and
its kernel is never started. Each cell of a launched notebook gets at most what is left as
its nbval timeout, so a notebook that runs past its estimate is interrupted at the budget:
its status is ``stopped``, the interrupted cell and those after it count as skipped (not
failed), and its note says where it stopped. Estimates: an earlier run's time plus
``MARGIN`` (``--budget-previous``, that run's report.json), else ``DEFAULT_NOTEBOOK_S``.

Run as a module, it serves gpu_check.sh: ``html-plan`` (does the HTML build fit, and in
how many seconds), ``check-previous``, and ``finish`` (the install and HTML results into
the report, report.md rewritten, the exit status).
"""
from __future__ import annotations

import argparse
import ast
import json
import platform
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from queue import Empty

import nbformat
import pytest

QUERY_TIMEOUT = 120                     # seconds for the kernel to answer a query
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# The budget's estimates when there is no earlier run: guesses, never measured on a GPU, and
# meant to be high: a notebook three times what the gpu profile aims at (labsupport/profile.py:
# about 5 minutes for all six on a data-centre GPU); the HTML build from the executions.
DEFAULT_NOTEBOOK_S = 180.0
DEFAULT_HTML_S = 150.0
MARGIN = 1.1                            # an earlier run's time, plus 10%
RESERVE_S = 15.0                        # kept at the end of the budget for the report

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
            budget = Budget.from_options(config)
        except ValueError as err:
            raise pytest.UsageError(str(err)) from None
        timeout = float(config.getoption("nbval_cell_timeout", default=None) or 2000)
        config.pluginmanager.register(Recorder(Path(out), budget, timeout), "nbval_report_recorder")


# --- the budget ------------------------------------------------------------------------------


def read_previous(path) -> dict:
    """An earlier run's report.json; ValueError unless it is one."""
    expected = "expected the report.json that tools/ci/nbval_report.py writes (an object with 'notebooks')"
    try:
        report = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"previous report {path}: not JSON ({err}); {expected}") from None
    if not isinstance(report, dict) or not isinstance(report.get("notebooks"), list):
        got = f"an object with keys {sorted(report)}" if isinstance(report, dict) else type(report).__name__
        raise ValueError(f"previous report {path}: {expected}, got {got}")
    return report


class Estimates:
    """Seconds each step should take: an earlier run's time plus MARGIN, else the defaults."""

    def __init__(self, previous: dict | None, source: str | None = None):
        previous = previous or {}
        self.source = source
        self.times = {}
        for n in previous.get("notebooks", []):
            if n.get("seconds") and n.get("status") in ("passed", "failed"):
                self.times[n["notebook"]] = n["seconds"] * MARGIN
            elif n.get("seconds") and n.get("status") == "stopped":      # a lower bound only
                self.times[n["notebook"]] = max(n["seconds"] * MARGIN, DEFAULT_NOTEBOOK_S)
        html = previous.get("run", {}).get("html") or {}
        built = html.get("status") == "built" and html.get("seconds")
        self.html_s = html["seconds"] * MARGIN if built else None

    def notebook(self, name: str) -> float:
        return self.times.get(name, DEFAULT_NOTEBOOK_S)

    def html(self) -> float:
        return DEFAULT_HTML_S if self.html_s is None else self.html_s

    def describe(self) -> str:
        defaults = f"defaults (notebook {DEFAULT_NOTEBOOK_S:.0f} s, HTML {DEFAULT_HTML_S:.0f} s)"
        if self.source is None:
            return defaults
        return f"{self.source}'s times plus {MARGIN - 1:.0%}, else the {defaults}"


def over_budget(estimate: float, *, now: float, deadline: float) -> str | None:
    """Why a step of `estimate` seconds may not start at `now`, or None when it fits.

    Math: it starts only if now + estimate + RESERVE_S <= deadline.
    """
    if now + estimate + RESERVE_S <= deadline:
        return None
    return (f"needs about {estimate:.0f} s, and {deadline - now:.0f} s of the budget are left "
            f"({RESERVE_S:.0f} s kept for the report)")


class Budget:
    """`seconds` from the Unix time `start`, with the estimates that decide what may start."""

    def __init__(self, seconds: float, start: float, estimates: Estimates):
        if not seconds > 0:
            raise ValueError(f"--budget-seconds must be above 0, got {seconds}")
        self.seconds, self.start, self.estimates = seconds, start, estimates
        self.deadline = start + seconds

    @classmethod
    def from_options(cls, config) -> Budget | None:
        seconds = config.getoption("budget_seconds")
        if seconds is None:
            return None
        path = config.getoption("budget_previous")
        estimates = Estimates(read_previous(path), path) if path else Estimates(None)
        return cls(seconds, config.getoption("budget_start") or time.time(), estimates)


def _is_cell(item) -> bool:
    return hasattr(item, "cell_num") and hasattr(item.parent, "kernel")


def run_in_kernel(kernel, code: str, expression: str | None = None, timeout: float = QUERY_TIMEOUT):
    """Execute ``code`` silently in nbval's kernel (in fresh globals); return the
    value of ``expression`` (a string) evaluated afterwards, or None.
    Raises RuntimeError when the kernel reports an error or does not answer in `timeout` s."""
    msg_id = kernel.kc.execute(f"exec({code!r}, {{}})", silent=True, store_history=False,
                               user_expressions={"r": expression} if expression else {},
                               allow_stdin=False, stop_on_error=False)
    deadline = time.monotonic() + timeout
    while True:
        try:
            reply = kernel.kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        except Empty:
            raise RuntimeError(f"the kernel did not answer within {timeout:.0f} s") from None
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
                    kernel, KERNEL_SUMMARY, "__import__('sys')._nbval_report", self._query_timeout()))
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


def _bytes(n) -> str:
    if n is None:
        return "not measured"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _budget_line(run: dict) -> str:
    """The budget, what was used of it and by the install, and where the estimates came from."""
    install = run.get("install")
    used = f"; {run['seconds']:.0f} s used" if run.get("seconds") is not None else ""
    if install and install["from"].startswith("none"):
        used += " (no install: the current environment)"
    elif install:
        used += f" (install {install['seconds']:.0f} s from {install['from']})"
    if run.get("budget_s") is None:
        return f"Budget: none{used}."
    return (f"Budget: {run['budget_s']:.0f} s from the script's start{used}; "
            f"estimates: {run.get('estimates') or '-'}.")


def _html_line(html: dict) -> str:
    status, seconds, reason = html.get("status"), html.get("seconds"), html.get("reason")
    if status == "built":
        return f"HTML: built in {seconds:.0f} s."
    after = f" after {seconds:.0f} s" if seconds is not None else ""
    return f"HTML: {status}{after}{': ' + reason if reason else ''}."


def markdown(summary: dict) -> str:
    """The report as a Markdown page: the budget, one row per notebook, what was not
    launched, the HTML build, then the slowest cells."""
    notebooks = summary["notebooks"]
    run, skipped = summary.get("run") or {}, summary.get("skipped") or []
    profiles = sorted({str(n["profile"]) for n in notebooks}) or ["-"]
    passed = sum(n["status"] == "passed" for n in notebooks)
    lines = ["# Notebook execution report", "",
             f"{len(notebooks)} notebooks, {passed} passed, in {summary['seconds']:.0f} s; "
             f"{len(skipped)} not launched; "
             f"profile {', '.join(profiles)}; created {summary['created']}.", ""]
    if run:
        lines += [_budget_line(run), ""]
    lines += [
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
    if skipped:
        lines += ["", "Not launched, for the budget:", ""]
        lines += [f"- {k['notebook']}: not launched: {k['reason']}" for k in skipped]
    if run.get("html"):
        lines += ["", _html_line(run["html"])]
    lines += ["", "Slowest cells (code-cell index, seconds):", ""]
    for n in notebooks:
        cells = ", ".join(f"{s['cell']} ({s['seconds']:.0f} s)" for s in n["slowest_cells"])
        lines.append(f"- {n['notebook']}: {cells or '-'}")
        lines += [f"  - note: {note}" for note in n["notes"]]
    return "\n".join(lines) + "\n"


def exit_status(summary: dict) -> int:
    """gpu_check.sh's exit status: 0 every notebook ran and passed and the HTML built (or was
    not asked for); 1 a notebook failed, or pytest itself did; 3 the HTML build failed; 4
    incomplete: a notebook or the HTML build was skipped or stopped for the budget."""
    notebooks, skipped = summary["notebooks"], summary.get("skipped") or []
    stopped = any(n["status"] == "stopped" for n in notebooks)
    pytest_status = summary.get("pytest_exit_status")
    if (any(n["status"] == "failed" for n in notebooks) or pytest_status not in (0, 1)
            or (pytest_status == 1 and not stopped) or not (notebooks or skipped)):
        return 1
    html = (summary.get("run") or {}).get("html", {}).get("status")
    if html == "failed":
        return 3
    return 4 if skipped or stopped or html in ("skipped", "stopped") else 0


# --- the command line that gpu_check.sh uses ---------------------------------------------------


def _html_plan(args) -> int:
    """Print the seconds the HTML build may take (or "none": no budget) and return 0, or
    print why it cannot start and return 3."""
    if args.budget == "none":
        print("none")
        return 0
    estimates = Estimates(read_previous(args.previous), args.previous) if args.previous else Estimates(None)
    deadline, now = args.started + float(args.budget), time.time()
    reason = over_budget(estimates.html(), now=now, deadline=deadline)
    print(reason or f"{deadline - RESERVE_S - now:.0f}")
    return 3 if reason else 0


def _finish(args) -> int:
    """Add the install and the HTML build to OUT/report.json, rewrite report.md; return the
    exit status."""
    path = Path(args.out) / "report.json"
    summary = json.loads(path.read_text())
    run = summary.setdefault("run", {})
    run.update(budget_s=None if args.budget == "none" else float(args.budget),
               started=datetime.fromtimestamp(args.started, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               seconds=round(time.time() - args.started, 1),
               install=dict(seconds=args.install_seconds, **{"from": args.install_from}),
               html=dict(status=args.html, seconds=args.html_seconds, reason=args.html_reason or None))
    status = exit_status(summary)
    summary["exit_status"] = status
    path.write_text(json.dumps(summary, indent=2) + "\n")
    (Path(args.out) / "report.md").write_text(markdown(summary))
    return status


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.ci.nbval_report",
                                     description="The budget and the report's last lines, for gpu_check.sh.")
    commands = parser.add_subparsers(dest="command", required=True)
    plan = commands.add_parser("html-plan", help="does the HTML build fit in the budget?")
    check = commands.add_parser("check-previous", help="is this an earlier run's report.json?")
    check.add_argument("previous")
    finish = commands.add_parser("finish", help="the install and HTML results into the report")
    finish.add_argument("out")
    for command in (plan, finish):
        command.add_argument("--started", type=float, required=True, help="the budget's start (Unix time)")
        command.add_argument("--budget", required=True, help="seconds, or none")
    plan.add_argument("--previous")
    finish.add_argument("--install-seconds", type=float, default=0.0)
    finish.add_argument("--install-from", default="none (the current environment)")
    finish.add_argument("--html", required=True,
                        choices=["built", "failed", "skipped", "stopped", "not requested"])
    finish.add_argument("--html-seconds", type=float)
    finish.add_argument("--html-reason", default="")
    args = parser.parse_args(argv)
    try:
        if args.command == "check-previous":
            read_previous(args.previous)
            return 0
        return _html_plan(args) if args.command == "html-plan" else _finish(args)
    except ValueError as err:
        print(f"gpu_check: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
