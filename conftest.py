"""Loaded by every pytest run in this repository, a notebook's alone included
(`pytest chapters/12_1_self_attention.ipynb`): how nbval compares outputs, and how the
tests are shared between pytest-xdist workers. The tests' fixtures are in tests/conftest.py."""
import os
import random

import pytest
from nbval.plugin import IPyNbCell

from tools.book.execute_notebooks import is_progress_bar

# Under the tests a claim of the text that does not hold stops its cell (a reader gets a notice
# and goes on): every kernel nbval and the book builds start inherits it (labsupport.report).
os.environ.setdefault("LABSUPPORT_STRICT_CLAIMS", "1")

_compare_outputs = IPyNbCell.compare_outputs


def _compare_without_progress_bars(self, test, ref, skip_compare=None):
    """nbval compares a cell's new outputs with the committed ones less tqdm's bars, which
    tools/book/execute_notebooks.py drops from the committed notebooks (a bar is a widget
    whose text is the moment it was drawn, not a result)."""
    return _compare_outputs(self, [out for out in test if not is_progress_bar(out)], ref,
                            skip_compare)


IPyNbCell.compare_outputs = _compare_without_progress_bars


# The slowest groups by their measured length on 2 cores, longest first (docs/testing.md, "How
# long it takes"); the rest follow in pytest's order.
LONGEST_FIRST = ("chapters/12_lab", "tests/test_grading.py", "chapters/12_2", "chapters/12_3",
                 "chapters/12_5", "chapters/12_4", "book", "tests/test_gpu_check.py",
                 "tests/test_wheel.py", "tests/test_clients.py", "chapters/12_1")
BOOK_TESTS = ("tests/test_book.py", "tests/test_browser.py")    # one build of the book


def _group_of(nodeid: str) -> str:
    """The worker group of a test: its file (a notebook's cells run in one kernel, in
    order; a test file's tests share its module fixtures), the book's two test files one
    group (they share one build)."""
    path = nodeid.split("::")[0]
    return "book" if path in BOOK_TESTS else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`make test` runs `-n 2 --dist loadfile`: each worker takes whole groups, longest
    first, so that no worker is left alone with a long one at the end."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ByGroup(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group_of(nodeid)

    config.option.loadscopereorder = False        # keep the workers' order, below
    return ByGroup(config, log)


def pytest_addoption(parser):
    parser.addoption("--test-order", default="as-written", metavar="ORDER",
                     help="as-written (default), reverse, or shuffle:SEED: run the unit tests in another "
                          "order, to show that none depends on what ran before it (a plain run only; "
                          "notebook cells always keep theirs)")


def _reorder(items, order: str) -> None:
    """Reverse or shuffle ``items`` in place; a notebook's cells stay together, in order."""
    if order == "as-written":
        return
    blocks = {}
    for item in items:                                       # a notebook: one block, kept in order
        key = item.nodeid.split("::")[0] if item.nodeid.split("::")[0].endswith(".ipynb") else item.nodeid
        blocks.setdefault(key, []).append(item)
    groups = list(blocks.values())
    if order == "reverse":
        groups.reverse()
    elif order.startswith("shuffle:") and order[len("shuffle:"):].isdigit():
        random.Random(int(order[len("shuffle:"):])).shuffle(groups)
    else:
        raise pytest.UsageError(f"--test-order must be as-written, reverse or shuffle:SEED, got {order!r}")
    items[:] = [item for group in groups for item in group]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Under workers, the longest groups come first in the collection that each reports,
    which the scheduler hands out in that order; a plain run keeps pytest's order, or takes
    the one --test-order names."""
    if not hasattr(config, "workerinput"):
        _reorder(items, config.getoption("--test-order"))
        return

    def rank(item):
        group = _group_of(item.nodeid)
        return next((i for i, prefix in enumerate(LONGEST_FIRST) if group.startswith(prefix)),
                    len(LONGEST_FIRST))

    items.sort(key=rank)                          # stable: each group keeps its order
