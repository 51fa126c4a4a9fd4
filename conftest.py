"""Loaded by every pytest run in this repository, a notebook's alone included
(`pytest chapters/12_1_self_attention.ipynb`); the tests' fixtures are in tests/conftest.py."""
from nbval.plugin import IPyNbCell

from tools.book.execute_notebooks import is_progress_bar

_compare_outputs = IPyNbCell.compare_outputs


def _compare_without_progress_bars(self, test, ref, skip_compare=None):
    """nbval compares a cell's new outputs with the committed ones less tqdm's bars, which
    tools/book/execute_notebooks.py drops from the committed notebooks (a bar is a widget
    whose text is the moment it was drawn, not a result)."""
    return _compare_outputs(self, [out for out in test if not is_progress_bar(out)], ref,
                            skip_compare)


IPyNbCell.compare_outputs = _compare_without_progress_bars
