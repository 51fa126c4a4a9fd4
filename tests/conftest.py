"""Fixtures for every test module; plain helper functions are in helpers.py."""
import pytest
import torch

from helpers import ROOT, build_book

NOTEBOOK_12_1 = "chapters/12_1_self_attention.ipynb"
# the test that asserts the dry run's nbval result, cell by cell
DRY_RUN = "tests/test_gpu_check.py::test_dry_run_passes_and_reports_each_notebook"


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def book_html(tmp_path_factory):
    """The HTML book built once per session, with warnings as errors (-W -n), from the
    committed outputs (nbval re-executes the notebooks; the build does not): shared by
    tests/test_book.py and tests/test_browser.py, which must not change it (the browser
    test works on a copy)."""
    return build_book(ROOT, tmp_path_factory.mktemp("book"), "-W", "-n", "--keep-going")


@pytest.hookimpl(trylast=True)                 # after -k and -m have deselected what they do
def pytest_collection_modifyitems(config, items):
    """12.1 is executed once per run, not twice: when the test of the gpu_check dry run's
    result is selected, that dry run is the nbval run of 12.1 (the same pyproject options
    and sanitizer, profile cpu, plus the report and an HTML build) and its test fails on any
    cell that nbval fails, so the plain nbval items of 12.1 are deselected; they run
    whenever that test does not."""
    if any(item.nodeid == DRY_RUN for item in items):
        twice = [item for item in items if item.nodeid.startswith(NOTEBOOK_12_1 + "::")]
        if twice:
            config.hook.pytest_deselected(items=twice)
            items[:] = [item for item in items if item not in twice]
    _group_for_workers(config, items)


# The slow groups by their measured length on 2 cores, longest first (README, "How long the
# tests take"); a group is one notebook's cells, or one test file's tests with its fixtures.
LONGEST_FIRST = ("chapters/12_lab", "tests/test_grading.py", "chapters/12_2", "chapters/12_3",
                 "chapters/12_5", "chapters/12_4", "book", "tests/test_gpu_check.py",
                 "tests/test_wheel.py", "tests/test_clients.py", "chapters/12_1")


def _group_of(item) -> str | None:
    """The worker group of a test that must share a process with others: a notebook's
    cells (one kernel, in order), the book's two test files (one build), and every other
    slow test file (its module fixtures); None for a test any worker can take."""
    path = item.nodeid.split("::")[0]
    if path.startswith("chapters/"):
        return path
    if path in ("tests/test_book.py", "tests/test_browser.py"):
        return "book"
    return path if item.get_closest_marker("slow") else None


def _group_for_workers(config, items) -> None:
    """Under pytest-xdist (`make test` runs `-n 2 --dist loadgroup`): mark each item with
    its group, so that a notebook runs in one kernel and the book is built once, and hand
    out the longest groups first, so that no worker is left alone with one at the end."""
    for item in items:
        group = _group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    if not hasattr(config, "workerinput"):
        return                                    # a plain run keeps pytest's order

    def rank(item):
        group = _group_of(item) or ""
        return next((i for i, prefix in enumerate(LONGEST_FIRST) if group.startswith(prefix)),
                    len(LONGEST_FIRST))

    items.sort(key=rank)                          # stable: each group keeps its order
