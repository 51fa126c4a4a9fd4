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
