"""tools/ci/gpu_check.sh rehearsed on the CPU (the GPU run is .github/workflows/gpu.yml).

Its dry run executes 12.1 once under nbval with the report plugin (tools/ci/nbval_report),
writes the executed notebook and the report, and builds the HTML book from that
execution; a notebook whose checked output was changed makes it fail. That execution is
also the session's nbval run of 12.1: the same pyproject options and sanitizer, so when
the dry run is selected conftest.py deselects the plain nbval items of 12.1 (12.1 is
executed once per `make test`, not twice).

The budget (`--budget SECONDS`, from the script's start): a notebook is launched only when
its estimate fits in what is left, a notebook that runs past the budget is stopped at it,
and the HTML build is skipped when it cannot fit; the report says what was skipped and why.
The bundle and the rehearsal of a whole GPU slot are in test_gpu_wheels.py.
"""
import ast
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
import yaml

from tools.ci.nbval_report import budget, cli, kernel, render

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "ci" / "gpu_check.sh"
NB_12_1 = ROOT / "chapters" / "12_1_self_attention.ipynb"


def gpu_check(out, *args):
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(["bash", str(SCRIPT), "--dry-run", "--out", str(out), *args],
                          capture_output=True, text=True, env=env, timeout=900)


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-out")
    result = gpu_check(out)
    return out, result


@pytest.mark.slow
def test_dry_run_passes_and_reports_each_notebook(dry_run):
    out, result = dry_run
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    report = json.loads((out / "report.json").read_text())
    assert report["passed"] is True and report["pytest_exit_status"] == 0
    [nb] = report["notebooks"]
    code_cells = [c for c in nbformat.read(NB_12_1, 4).cells if c.cell_type == "code"]
    assert nb["notebook"] == NB_12_1.name and nb["status"] == "passed"
    assert nb["cells"] == dict(passed=len(code_cells), failed=0, skipped=0)
    assert nb["profile"] == "cpu" and nb["device"].startswith("cpu") and nb["cuda"] is None
    assert nb["torch"] and nb["python"] and 0 < nb["seconds"] and len(nb["slowest_cells"]) == 3
    assert nb["peak_gpu_allocated_bytes"] is None and nb["notes"] == []
    markdown = (out / "report.md").read_text()
    escaped = NB_12_1.name.replace("_", "\\_")                # labsupport.report's Markdown table
    assert f"| {escaped} | passed |" in markdown and "not measured" in markdown
    assert "# Notebook execution report" in result.stdout       # the script prints it


# a line 12.1 prints in every run: the multi-head layer's output and weights
SHAPES_LINE = "output: (2, 28, 64) | weights: (2, 4, 28, 28)"

@pytest.mark.slow
def test_dry_run_writes_the_executed_notebook(dry_run):
    out, _ = dry_run
    executed = nbformat.read(out / "notebooks" / NB_12_1.name, 4)
    nbformat.validate(executed)
    committed = nbformat.read(NB_12_1, 4)
    ran = [c for c in executed.cells if c.cell_type == "code"]
    assert [c.source for c in ran] == [c.source for c in committed.cells if c.cell_type == "code"]
    assert [c.execution_count for c in ran] == list(range(1, len(ran) + 1))
    text = "".join(o.get("text", "") for c in ran for o in c.outputs)
    assert SHAPES_LINE in text and "Profile 'cpu' (from $LABSUPPORT_PROFILE)" in text
    assert any("image/png" in o.get("data", {}) for c in ran for o in c.outputs)


@pytest.mark.slow
def test_dry_run_builds_the_html_from_that_execution(dry_run):
    out, _ = dry_run
    page = (out / "html" / "chapters" / "12_1_self_attention.html").read_text()
    assert SHAPES_LINE in page and "Traceback" not in page
    assert (out / "html" / "index.html").is_file()


@pytest.mark.slow
def test_the_books_provenance_page_shows_that_execution_and_the_report(dry_run):
    """12.1 ran here: its row is the record its last cell glued in this execution (or,
    for a notebook without one, what the report says) and nbval's result; the notebooks
    that did not run say so."""
    from labsupport import provenance, sphinx_provenance

    out, _ = dry_run
    [entry] = json.loads((out / "report.json").read_text())["notebooks"]
    executed = nbformat.read(out / "notebooks" / NB_12_1.name, 4)
    glued = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs
             if o.get("metadata", {}).get("scrapbook", {}).get("name") == provenance.RUN_KEY]
    record = (ast.literal_eval(glued[0].data["application/papermill.record/text/plain"])
              if glued else sphinx_provenance.from_nbval(entry))
    html = (out / "html" / "provenance.html").read_text()
    cells = r"<td[^>]*>(.*?)</td>"
    rows = [[" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in re.findall(cells, r, re.S)]
            for r in re.findall(r"<tr[^>]*>(.*?)</tr>", html, re.S)]
    by_title = {r[0]: r[1:] for r in rows if r}
    c = entry["cells"]
    assert by_title.pop("12.1 Self-Attention") == [
        *provenance.describe(record).values(),
        f"{entry['status']}: {c['passed']} cells passed, {c['failed']} failed, {c['skipped']} skipped"]
    assert len(by_title) == 5 and all(r[-1] == "not run" for r in by_title.values())


@pytest.mark.slow
def test_the_dry_run_has_no_budget_and_reports_the_html_build(dry_run):
    out, _ = dry_run
    report = json.loads((out / "report.json").read_text())
    run = report["run"]
    assert report["skipped"] == [] and run["budget_s"] is None
    assert run["html"]["status"] == "built" and run["html"]["seconds"] > 0
    assert run["install"]["from"] == "none (the current environment)"
    assert "HTML: built in" in (out / "report.md").read_text()


@pytest.mark.slow
def test_a_changed_checked_output_fails(tmp_path):
    """A short copy of 12.1 (setup, imports, the data cell) whose checked output was edited."""
    nb = nbformat.read(NB_12_1, 4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    data_cell = next(c for c in code if "print(\"tokens:\"" in c.source)
    nb.cells = [code[0], code[1], data_cell]
    assert "tokens: (28, 24)" in data_cell.outputs[0].text
    data_cell.outputs[0].text = data_cell.outputs[0].text.replace("(28, 24)", "(28, 25)")
    broken = tmp_path / "broken_12_1.ipynb"
    nbformat.write(nb, broken)
    out = tmp_path / "out"
    result = gpu_check(out, "--no-html", "--notebooks", str(broken))
    assert result.returncode != 0 and "FAILED" in result.stdout
    [report] = json.loads((out / "report.json").read_text())["notebooks"]
    assert report["status"] == "failed" and report["cells"] == dict(passed=2, failed=1, skipped=0)
    executed = nbformat.read(out / "notebooks" / broken.name, 4)
    assert "tokens: (28, 24)" in executed.cells[-1].outputs[0].text     # what really ran
    assert not (out / "html").exists()


@pytest.mark.slow
def test_a_notebook_that_runs_past_the_budget_is_stopped_at_it(tmp_path):
    """Launched on an earlier run's estimate (1 s), a notebook that sleeps for minutes is
    interrupted at the budget; the cells after it are not run; the script ends near the budget,
    long before the sleep would have (a loaded worker may take a while to write the report)."""
    out, limit, sleep = tmp_path / "out", 45, 300
    nb = nbformat.v4.new_notebook()
    cells = [("print('start')", "start\n"), (f"import time\ntime.sleep({sleep})\nprint('slept')", "slept\n"),
             ("print('end')", "end\n")]
    nb.cells = [nbformat.v4.new_code_cell(src, execution_count=i + 1,
                                          outputs=[nbformat.v4.new_output("stream", name="stdout", text=t)])
                for i, (src, t) in enumerate(cells)]
    sleepy = tmp_path / "sleepy.ipynb"
    nbformat.write(nb, sleepy)
    previous = tmp_path / "previous.json"
    previous.write_text(json.dumps({"notebooks": [{"notebook": "sleepy.ipynb", "status": "passed",
                                                   "seconds": 1.0}]}))
    started = time.perf_counter()
    result = gpu_check(out, "--no-html", "--budget", str(limit), "--previous", str(previous),
                       "--notebooks", str(sleepy))
    wall = time.perf_counter() - started
    assert result.returncode == 4, result.stdout[-3000:] + result.stderr[-3000:]
    [entry] = json.loads((out / "report.json").read_text())["notebooks"]
    assert entry["status"] == "stopped" and entry["cells"] == dict(passed=1, failed=0, skipped=2)
    assert any(re.search(r"stopped at the budget: cell 1 interrupted after \d+ s; cells 2-2 not run", n)
               for n in entry["notes"]), entry["notes"]
    executed = nbformat.read(out / "notebooks" / "sleepy.ipynb", 4)
    interrupted = executed.cells[1].outputs                  # what ran: no "slept", an interrupt
    assert [o.output_type for o in interrupted] == ["error"] and interrupted[0].ename == "KeyboardInterrupt"
    assert executed.cells[2].outputs == [] and executed.cells[2].execution_count is None
    assert wall < limit + 60 < sleep
    assert "stopped" in (out / "report.md").read_text()


def test_the_budget_and_the_previous_report_are_checked(tmp_path):
    for value in ("0", "-3", "ten"):
        result = gpu_check(tmp_path / "out", "--budget", value)
        assert result.returncode == 2
        assert f"--budget must be a number of seconds above 0, or none; got '{value}'" in result.stderr
    result = gpu_check(tmp_path / "out", "--previous", str(tmp_path / "nothing.json"))
    assert result.returncode == 2 and f"no previous report {tmp_path / 'nothing.json'}" in result.stderr


def test_an_environment_that_cannot_run_the_check_says_so_in_the_report(tmp_path):
    """No stale report from an earlier run survives, and the reason is in the new one."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text('{"notebooks": [{"notebook": "old.ipynb"}]}')
    missing = tmp_path / "no-such-python"
    env = {**os.environ, "PYTHON": str(missing), "VENV": str(tmp_path / "venv")}
    result = subprocess.run(["bash", str(SCRIPT), "--out", str(out), "--profile", "cpu"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 2 and f"could not create {tmp_path / 'venv'}" in result.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["notebooks"] == [] and report["run"]["error"].startswith("could not create")
    assert (out / "report.md").read_text().startswith("# Notebook execution report\n\nNothing ran: could not")


def test_estimates_are_an_earlier_runs_times_with_a_margin_else_the_defaults():
    previous = {"notebooks": [{"notebook": "a.ipynb", "status": "passed", "seconds": 100.0},
                              {"notebook": "b.ipynb", "status": "failed", "seconds": 50.0},
                              {"notebook": "c.ipynb", "status": "stopped", "seconds": 30.0}],
                "skipped": [{"notebook": "d.ipynb", "reason": "budget"}],
                "run": {"html": {"status": "built", "seconds": 60.0}}}
    est = budget.Estimates(previous)
    assert budget.MARGIN == 1.1
    assert est.notebook("a.ipynb") == pytest.approx(110.0) and est.notebook("b.ipynb") == pytest.approx(55.0)
    # a stopped run's time is only a lower bound; a skipped or unknown notebook has no time
    assert est.notebook("c.ipynb") == est.notebook("d.ipynb") == est.notebook("e.ipynb") == 180.0
    assert est.html() == pytest.approx(66.0)
    assert budget.DEFAULT_NOTEBOOK_S == 180.0 and budget.DEFAULT_HTML_S == 150.0
    none = budget.Estimates(None)
    assert none.notebook("a.ipynb") == 180.0 and none.html() == 150.0
    assert budget.Estimates({"notebooks": [], "run": {"html": {"status": "skipped"}}}).html() == 150.0


def test_a_step_is_launched_only_when_its_estimate_fits_before_the_reserve():
    reserve = budget.RESERVE_S
    assert reserve == 15.0
    assert budget.over_budget(100.0, now=0.0, deadline=100.0 + reserve) is None
    reason = budget.over_budget(100.0, now=0.0, deadline=100.0 + reserve - 1)
    assert reason == ("needs about 100 s, and 114 s of the budget are left "
                      f"({reserve:.0f} s kept for the report)")


def test_a_previous_report_that_is_not_one_is_refused(tmp_path):
    bad = tmp_path / "report.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"previous report .*report.json: expected the report.json that "
                                         r"tools/ci/nbval_report writes \(an object with "
                                         r"'notebooks'\), got list"):
        budget.read_previous(bad)
    bad.write_text("{not json")
    with pytest.raises(ValueError, match=r"previous report .*: not JSON"):
        budget.read_previous(bad)


def summary(statuses, html="built", skipped=(), pytest_status=0):
    return dict(notebooks=[dict(notebook=f"{i}.ipynb", status=s) for i, s in enumerate(statuses)],
                skipped=[dict(notebook=n, reason="budget") for n in skipped],
                pytest_exit_status=pytest_status, run=dict(html=dict(status=html)))


@pytest.mark.parametrize("case, expected", [
    (summary(["passed", "passed"]), 0),
    (summary(["passed"], html="not requested"), 0),
    (summary(["passed", "failed"]), 1),
    (summary(["failed"], skipped=["x.ipynb"]), 1),
    (summary(["passed"], pytest_status=3), 1),                # pytest's own error
    (summary(["passed"], html="failed"), 3),
    (summary(["passed"], skipped=["x.ipynb"]), 4),
    (summary(["passed", "stopped"], pytest_status=1), 4),     # the interrupted cell is not a failure
    (summary(["passed"], html="skipped"), 4),
    (summary(["passed"], html="stopped"), 4),
    (summary([], skipped=["x.ipynb"]), 4),
])
def test_the_exit_status_says_passed_failed_html_failed_or_incomplete(case, expected):
    assert cli.exit_status(case) == expected


def test_the_report_page_lists_what_was_skipped_and_the_budget():
    page = render.markdown(dict(
        created="2026-01-01T00:00:00Z", seconds=100.0, notebooks=[], passed=False,
        skipped=[dict(notebook="12_2.ipynb", reason="needs about 200 s, and 90 s of the budget are left",
                      estimate_s=200.0, left_s=90.0)],
        run=dict(budget_s=600, seconds=590.0, estimates="defaults (notebook 180 s, HTML 150 s)",
                 install=dict(seconds=42.0, **{"from": "wheels /w"}),
                 html=dict(status="skipped", seconds=None, reason="needs about 150 s, and 80 s left"))))
    assert "Budget: 600 s from the script's start; 590 s used (install 42 s from wheels /w)" in page
    assert "- 12_2.ipynb: not launched: needs about 200 s, and 90 s of the budget are left" in page
    assert "HTML: skipped: needs about 150 s, and 80 s left" in page
    assert "estimates: defaults (notebook 180 s, HTML 150 s)" in page


def test_gpu_requirements_are_the_tested_pins_without_cpu_torch():
    def pins(name):
        lines = (ROOT / name).read_text().splitlines()
        return [line for line in lines if line.strip() and not line.startswith("#")]
    expected = [p for p in pins("requirements.txt") if not p.startswith(("torch==", "-e "))]
    assert pins("requirements-gpu.txt") == expected


def test_workflows_run_the_test_command_and_the_gpu_check():
    workflows = ROOT / ".github" / "workflows"
    ci = yaml.safe_load((workflows / "ci.yml").read_text())
    gpu = yaml.safe_load((workflows / "gpu.yml").read_text())
    ci_steps = [s.get("run", "") for job in ci["jobs"].values() for s in job["steps"]]
    assert any(".ci/run" in run for run in ci_steps)
    [job] = gpu["jobs"].values()
    assert job["runs-on"] == ["self-hosted", "gpu"]
    runs = " ".join(s.get("run", "") for s in job["steps"])
    assert "tools/ci/gpu_check.sh" in runs and "--out gpu-out" in runs
    uploads = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@v4")]
    paths = " ".join(s["with"]["path"] for s in uploads)
    assert "gpu-out/html" in paths and "gpu-out/report.md" in paths and "gpu-out/report.json" in paths
    assert all(s.get("if") == "always()" for s in uploads)
    assert "workflow_dispatch" in gpu[True]                 # YAML 1.1 reads the key `on` as True


def test_peak_gpu_memory_survives_the_notebooks_own_resets(monkeypatch):
    """The plugin's kernel-side code, run here against a fake CUDA torch: a notebook that
    resets the peak statistics (as labsupport.timing.peak_memory does) keeps its peak."""
    import types

    gpu = dict(peak=0, reserved=0)                            # the fake allocator's statistics

    def original_reset(device=None):
        gpu.update(peak=1e9, reserved=2e9)                    # what is still allocated

    torch = types.ModuleType("torch")
    cuda = types.ModuleType("torch.cuda")
    memory = types.ModuleType("torch.cuda.memory")
    utils = types.ModuleType("torch.cuda._utils")
    memory.reset_peak_memory_stats = cuda.reset_peak_memory_stats = original_reset
    utils._get_device_index = lambda device, optional=False: 0
    cuda.memory, cuda._utils, torch.cuda = memory, utils, cuda
    cuda.is_available, cuda.current_device = (lambda: True), (lambda: 0)
    cuda.get_device_name = lambda i: "Fake GPU"
    cuda.max_memory_allocated = lambda i=None: gpu["peak"]
    cuda.max_memory_reserved = lambda i=None: gpu["reserved"]
    torch.__version__, torch.version = "0.0+fake", types.SimpleNamespace(cuda="12.9")
    for name, module in (("torch", torch), ("torch.cuda", cuda), ("torch.cuda.memory", memory),
                         ("torch.cuda._utils", utils)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(sys, "_nbval_report", None, raising=False)

    exec(kernel.KERNEL_SETUP, {})                             # before the first cell
    gpu.update(peak=5e9, reserved=6e9)                        # a cell peaks at 5 GB
    cuda.reset_peak_memory_stats("cuda")                      # a measurement resets the stats
    gpu.update(peak=3e9, reserved=4e9)                        # later cells stay lower
    exec(kernel.KERNEL_SUMMARY, {})                           # after the last cell
    info = json.loads(sys._nbval_report)
    assert info["device"] == "Fake GPU" and info["torch"] == "0.0+fake" and info["cuda"] == "12.9"
    assert info["peak_gpu_allocated"] == 5e9 and info["peak_gpu_reserved"] == 6e9
    assert memory.reset_peak_memory_stats.__wrapped__ is original_reset
