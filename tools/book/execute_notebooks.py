"""Re-execute notebooks in place, top to bottom in a fresh kernel, so the committed
outputs are the ones nbval compares against.

    python -m tools.book.execute_notebooks                     # every notebook in chapters/
    python -m tools.book.execute_notebooks chapters/12_1_self_attention.ipynb
    python -m tools.book.execute_notebooks --fold-only         # fold hidden cells, run nothing

Each notebook runs with chapters/ as its working directory, like the book build and
nbval. Cell timing metadata is not recorded, so a re-run changes only what changed, and
progress bars (tqdm widgets) are dropped: a reader of the page wants the result, not a
bar frozen at the moment the notebook was saved. Every code cell whose input the book
hides (remove-input, hide-input, remove-cell) is folded in JupyterLab, VS Code and Colab
too (`tools.book.make_student.fold_hidden_cells`; the setup cell stays visible).
"""
import argparse
import os
import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from tools.book import stepped_polling
from tools.book.make_student import fold_hidden_cells

ROOT = Path(__file__).resolve().parents[2]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
PROGRESS_BAR = re.compile(r"\d+%\|.*\| *\d+/\d+ \[")      # tqdm's text: "desc: 40%|####  | 2/5 ["


def is_progress_bar(output) -> bool:
    data = output.get("data", {})
    return WIDGET_VIEW in data and bool(PROGRESS_BAR.search(str(data.get("text/plain", ""))))


def widget_tree(state: dict, model_id: str) -> set:
    """The ids of a widget and of every model it refers to (children, layout, style)."""
    ids, todo = set(), [model_id]
    while todo:
        key = todo.pop()
        if key in ids or key not in state:
            continue
        ids.add(key)
        for value in state[key].get("state", {}).values():
            refs = value if isinstance(value, list) else [value]
            todo += [r[len("IPY_MODEL_"):] for r in refs
                     if isinstance(r, str) and r.startswith("IPY_MODEL_")]
    return ids


def drop_progress_bars(nb) -> None:
    """Remove tqdm's widget outputs and their saved widget state from `nb`, in place."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in (c for c in nb.cells if c.cell_type == "code"):
        for bar in filter(is_progress_bar, cell.outputs):
            for key in widget_tree(state, bar["data"][WIDGET_VIEW]["model_id"]):
                state.pop(key, None)
        cell.outputs = [o for o in cell.outputs if not is_progress_bar(o)]


def execute(path: Path, timeout: int) -> float:
    """Execute ``path`` in place; a claim of its text that does not hold stops it (the committed
    outputs are what the book shows, so every claim in them held)."""
    os.environ.setdefault("LABSUPPORT_STRICT_CLAIMS", "1")
    stepped_polling.install()                     # no stall after a widget cell
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - start
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    drop_progress_bars(nb)
    fold_hidden_cells(nb)
    nbformat.write(nb, path)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    parser.add_argument("--fold-only", action="store_true",
                        help="fold the cells the book hides in every client; execute nothing")
    args = parser.parse_args()
    paths = args.notebooks or sorted((ROOT / "chapters").glob("*.ipynb"))
    if args.fold_only:
        for path in paths:
            nb = nbformat.read(path, as_version=4)
            if fold_hidden_cells(nb):
                nbformat.write(nb, path)
                print(f"{path.name}: hidden cells folded")
        return 0
    for path in paths:
        print(f"{path.name}: executed in {execute(path.resolve(), args.timeout):.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
