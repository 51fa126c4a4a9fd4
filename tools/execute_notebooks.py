"""Re-execute notebooks in place, top to bottom in a fresh kernel, so the committed
outputs are the ones nbval compares against.

    python tools/execute_notebooks.py                     # every notebook in chapters/
    python tools/execute_notebooks.py chapters/12_1_self_attention.ipynb

Each notebook runs with chapters/ as its working directory, like the book build and
nbval. Cell timing metadata is not recorded, so a re-run changes only what changed.
"""
import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def execute(path: Path, timeout: int) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - start
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nbformat.write(nb, path)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    args = parser.parse_args()
    paths = args.notebooks or sorted((ROOT / "chapters").glob("*.ipynb"))
    for path in paths:
        print(f"{path.name}: executed in {execute(path.resolve(), args.timeout):.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
