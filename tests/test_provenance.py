"""The page "Where the numbers came from".

A notebook records its own execution (`labsupport.provenance.start_run` early,
`record_run` in its last cell: device, versions, profile, wall time, peak memory, glued
under `labsupport.provenance.RUN_KEY`); the Sphinx extension
`labsupport.sphinx_provenance` gathers the records into one table when the book is
built. Tested here: the record (its fields, its wall time, peaks kept across the resets
that measurements make, on the CPU and on a faked CUDA device), and synthetic books
built with execution off from notebooks executed in a real kernel: a row per notebook,
"not recorded" where a notebook has no record, a book with no record at all, and the
nbval report of tools/ci/gpu_check.sh feeding the same page.
"""
import ast
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
import torch
import yaml
from nbclient import NotebookClient

from labsupport import profile, provenance, sphinx_provenance
from labsupport.timing import peaks

ROOT = Path(__file__).resolve().parents[1]


# --- the record ---------------------------------------------------------------------------

def test_a_record_has_every_field_as_a_plain_value():
    record = provenance.run_record(provenance.start_run(profile.current("cpu")))
    assert tuple(record) == provenance.SCHEMA
    assert ast.literal_eval(repr(record)) == record           # what the page reads back
    assert record["profile"] == "cpu" and record["torch"] == torch.__version__
    assert record["cuda"] == torch.version.cuda and record["peak_gpu_bytes"] is None
    assert f"({torch.get_num_threads()} thread" in record["device"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", record["finished"])
    if sys.platform.startswith("linux"):
        assert record["peak_rss_bytes"] > 50e6                 # torch alone is more


def test_the_wall_time_counts_from_the_start():
    """75 s before the start, plus however long the record took to make (a loaded worker may
    take seconds), to the tenth of a second the record keeps."""
    start = provenance.RunStart("cpu", torch.device("cpu"), time.perf_counter() - 75.0)
    before = time.perf_counter()
    wall = provenance.run_record(start)["wall_s"]
    took = time.perf_counter() - before
    assert 75.0 <= wall <= 75.0 + took + 0.05


def test_start_and_record_say_what_they_need():
    with pytest.raises(TypeError, match=r"profile must be .*labsupport.profile.Profile .*got str"):
        provenance.start_run("cpu")
    with pytest.raises(TypeError, match=r"start must be what start_run\(P\) returned .*got NoneType"):
        provenance.run_record(None)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the resident peak resets on Linux")
def test_the_cpu_peak_survives_the_resets_that_measurements_make():
    block = torch.ones(32 * 2**20)                             # 128 MiB, touched: resident
    before = peaks.session_peak_bytes("cpu")
    del block
    try:
        peaks._reset_peak(torch.device("cpu"))                 # as peak_memory does
    except OSError as err:
        pytest.skip(f"this kernel does not let the resident peak be reset: {err}")
    assert peaks._read_status_kib("VmHWM") * 1024 < before - 100e6, "the reset did not happen"
    # kept to within what Linux's lazily updated VmHWM resolves (a few hundred kB)
    assert peaks.session_peak_bytes("cpu") >= before - 1e6


@pytest.fixture
def fake_cuda(monkeypatch):
    """A CUDA device whose allocator statistics a test sets: peak, reset."""
    stats = dict(peak=0, now=0)

    def reset(device=None):
        stats["peak"] = stats["now"]

    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: stats["peak"])
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", reset)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Fake GPU")
    monkeypatch.setattr(torch.version, "cuda", "12.9")
    monkeypatch.setattr(peaks, "_PEAK_BEFORE_RESETS", {})
    return stats


def test_the_gpu_peak_survives_the_resets_that_measurements_make(fake_cuda):
    fake_cuda.update(peak=5e9, now=1e9)                       # a cell peaked at 5 GB
    peaks._reset_peak(torch.device("cuda"))                    # as peak_memory does
    fake_cuda.update(peak=3e9)                                 # later cells stay lower
    assert peaks.session_peak_bytes("cuda:0") == 5e9
    start = provenance.RunStart("gpu", torch.device("cuda", 0), time.perf_counter())
    record = provenance.run_record(start)
    assert (record["device"], record["cuda"], record["peak_gpu_bytes"]) == ("Fake GPU", "12.9", 5e9)
    assert "5.0 GB allocated on the GPU; " in provenance.summary(record)


def test_the_shared_module_needs_neither_torch_nor_sphinx():
    """Its examples run in tests/test_doctests.py."""
    code = ("import sys; import labsupport.provenance; "
            "assert not {'torch', 'sphinx', 'docutils'} & set(sys.modules), sys.modules.keys()")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# --- the page: synthetic books -------------------------------------------------------------

def notebook(title: str, *, record: bool) -> nbformat.NotebookNode:
    """A notebook that starts a run after its imports and, with ``record``, records it
    in its last cell, tagged as the book's notebooks tag it."""
    cells = [nbformat.v4.new_markdown_cell(f"# {title}\n\nA synthetic page."),
             nbformat.v4.new_code_cell("from labsupport import profile, provenance\n"
                                       "P = profile.current()\nRUN = provenance.start_run(P)")]
    if record:
        cells.append(nbformat.v4.new_code_cell(
            "provenance.record_run(RUN)", metadata={"tags": ["nbval-ignore-output", "remove-cell"]}))
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """'First' executed in a real kernel (it glues a record); 'Second' has no record."""
    folder = tmp_path_factory.mktemp("notebooks")
    first = notebook("First", record=True)
    NotebookClient(first, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(folder)}}).execute()
    return {"first.ipynb": first, "second.ipynb": notebook("Second", record=False)}


def build(folder: Path, notebooks: dict, *, nbval_report: dict | None = None) -> str:
    """Build a book of ``notebooks`` and the page, execution off, -W -n; the page's table as text."""
    folder.mkdir()
    for name, nb in notebooks.items():
        nbformat.write(nb, folder / name)
    config = {"title": "Synthetic", "only_build_toc_files": True,
              "exclude_patterns": [".*", "**/.*", "_build"],
              "execute": {"execute_notebooks": "off"},
              "sphinx": {"extra_extensions": ["labsupport.sphinx_provenance"], "config": {}}}
    if nbval_report is not None:
        (folder / "report.json").write_text(json.dumps(nbval_report))
        config["sphinx"]["config"]["provenance_nbval_report"] = str(folder / "report.json")
    (folder / "_config.yml").write_text(yaml.safe_dump(config))
    chapters = [{"file": Path(n).stem} for n in notebooks] + [{"file": "numbers"}]
    (folder / "_toc.yml").write_text(yaml.safe_dump({"format": "jb-book", "root": "index",
                                                     "chapters": chapters}))
    (folder / "index.md").write_text("# Synthetic\n\nThe landing page.\n")
    (folder / "numbers.md").write_text("# Where the numbers came from\n\n```{provenance-table}\n```\n")
    jb = Path(sys.executable).with_name("jupyter-book")
    result = subprocess.run([str(jb), "build", str(folder), "--all", "-W", "-n", "--keep-going"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    html = (folder / "_build" / "html" / "numbers.html").read_text()
    [table] = re.findall(r"<table.*?</table>", html, flags=re.S)
    return table


def rows(table: str) -> list[list[str]]:
    cells = [re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r, flags=re.S)
             for r in re.findall(r"<tr[^>]*>(.*?)</tr>", table, flags=re.S)]
    return [[" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in r] for r in cells]


@pytest.mark.slow
def test_the_page_has_a_row_per_notebook_with_its_record(tmp_path, executed):
    table = build(tmp_path / "book", executed)
    header, first, second = rows(table)
    assert header == list(sphinx_provenance.COLUMNS)
    glued = executed["first.ipynb"].cells[-1].outputs[-1]
    assert glued.metadata["scrapbook"]["name"] == provenance.RUN_KEY
    record = ast.literal_eval(glued.data["application/papermill.record/text/plain"])
    assert first == ["First", *provenance.describe(record).values()]
    assert first[1] == provenance.device_description("cpu") and first[4] == profile.current().name
    assert second == ["Second", provenance.NOT_RECORDED] + ["-"] * 6
    assert 'href="first.html"' in table and 'href="second.html"' in table


@pytest.mark.slow
def test_a_book_without_any_record_builds(tmp_path, executed):
    table = build(tmp_path / "book", {"second.ipynb": executed["second.ipynb"]})
    assert rows(table)[1] == ["Second", provenance.NOT_RECORDED] + ["-"] * 6


@pytest.mark.slow
def test_the_nbval_report_of_the_gpu_check_feeds_the_page(tmp_path, executed):
    """The record wins where there is one; 'Second' takes the report's device, versions,
    profile, time and GPU peak; both say what nbval found."""
    entry = dict(status="passed", cells=dict(passed=2, failed=0, skipped=0), seconds=42.0,
                 device="Fake GPU", torch="9.9.9", cuda="12.9", profile="gpu",
                 peak_gpu_allocated_bytes=5e9)
    nbval_report = {"notebooks": [dict(entry, notebook="second.ipynb"),
                                  dict(entry, notebook="first.ipynb", status="failed",
                                       cells=dict(passed=1, failed=1, skipped=0))]}
    header, first, second = rows(build(tmp_path / "book", executed, nbval_report=nbval_report))
    assert header[-1] == "nbval" and first[1] == provenance.device_description("cpu")
    assert first[-1] == "failed: 1 cells passed, 1 failed, 0 skipped"
    assert second == ["Second", "Fake GPU", "9.9.9", "12.9", "gpu", "42 s",
                      "5.0 GB allocated on the GPU", "nbval report",
                      "passed: 2 cells passed, 0 failed, 0 skipped"]


def test_a_stale_or_broken_glue_file_is_not_a_record(tmp_path, caplog):
    folder = tmp_path / "jupyter_execute"
    folder.mkdir()
    good = {provenance.RUN_KEY: {"data": {"text/plain": repr({"device": "X"})}}}
    (folder / "a.glue.json").write_text(json.dumps(good))
    (folder / "b.glue.json").write_text(json.dumps({provenance.RUN_KEY: {"data": {"text/plain": "[1, 2"}}}))
    env = SimpleNamespace(mystnb_config=SimpleNamespace(output_folder=str(folder)),
                          nb_metadata={name: {"glue": [provenance.RUN_KEY]} for name in "ab"})
    assert sphinx_provenance.read_record(env, "a") == {"device": "X"}
    env.nb_metadata["a"]["glue"] = []                          # re-read without a record
    assert sphinx_provenance.read_record(env, "a") is None
    assert sphinx_provenance.read_record(env, "b") is None     # and a warning (-W: an error)
    assert "cannot read the run record" in caplog.text


# --- the book's notebooks ------------------------------------------------------------------

RECORD_TAGS = {"nbval-ignore-output", "remove-cell"}


@pytest.mark.parametrize("path", sorted((ROOT / "chapters").glob("*.ipynb")), ids=lambda p: p.stem)
def test_every_notebook_records_its_run(path):
    """An early cell starts the run (``RUN = start_run(P)``, after the profile is set);
    the last code cell records it (``record_run(RUN)``), its output ignored by nbval
    (it differs between machines) and the cell removed from the HTML (the page shows it)."""
    code = [c for c in nbformat.read(path, 4).cells if c.cell_type == "code"]
    starts = [i for i, c in enumerate(code) if re.search(r"\bRUN = (provenance\.)?start_run\(P\)", c.source)]
    assert starts and starts[0] <= 3, "add RUN = start_run(P) right after P = profile.current()"
    last = code[-1]
    assert re.search(r"^(provenance\.)?record_run\(RUN\)$", last.source, flags=re.M), \
        "end the notebook with a code cell that calls record_run(RUN)"
    assert RECORD_TAGS <= set(last.metadata.get("tags", [])), f"tag the record cell {sorted(RECORD_TAGS)}"
