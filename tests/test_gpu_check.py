"""tools/ci/gpu_check.sh rehearsed on the CPU (the GPU run is .github/workflows/gpu.yml).

Its dry run executes 12.1 once under nbval with the report plugin (tools/ci/nbval_report.py),
writes the executed notebook and the report, and builds the HTML book from that
execution; a notebook whose checked output was changed makes it fail. That execution is
also the session's nbval run of 12.1: the same pyproject options and sanitizer, so when
the dry run is selected conftest.py deselects the plain nbval items of 12.1 (12.1 is
executed once per `make test`, not twice).
"""
import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

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
    assert f"| {NB_12_1.name} | passed |" in markdown and "not measured" in markdown
    assert "# Notebook execution report" in result.stdout       # the script prints it


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
    assert "every row of weights sums to one" in text and "profile 'cpu' on cpu" in text
    assert any("image/png" in o.get("data", {}) for c in ran for o in c.outputs)


@pytest.mark.slow
def test_dry_run_builds_the_html_from_that_execution(dry_run):
    out, _ = dry_run
    page = (out / "html" / "chapters" / "12_1_self_attention.html").read_text()
    assert "every row of weights sums to one" in page and "Traceback" not in page
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
    import importlib.util
    import types
    spec = importlib.util.spec_from_file_location("nbval_report", ROOT / "tools" / "ci" / "nbval_report.py")
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)

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

    exec(plugin.KERNEL_SETUP, {})                             # before the first cell
    gpu.update(peak=5e9, reserved=6e9)                        # a cell peaks at 5 GB
    cuda.reset_peak_memory_stats("cuda")                      # a measurement resets the stats
    gpu.update(peak=3e9, reserved=4e9)                        # later cells stay lower
    exec(plugin.KERNEL_SUMMARY, {})                           # after the last cell
    info = json.loads(sys._nbval_report)
    assert info["device"] == "Fake GPU" and info["torch"] == "0.0+fake" and info["cuda"] == "12.9"
    assert info["peak_gpu_allocated"] == 5e9 and info["peak_gpu_reserved"] == 6e9
    assert memory.reset_peak_memory_stats.__wrapped__ is original_reset
