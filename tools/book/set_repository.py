"""Write the book's setup cell, with the repository URL of _config.yml, into every notebook.

Every notebook starts with the same setup cell: `setup_cell(url)` below. On Colab it
clones the repository and installs `labsupport` from the clone (a regular install: the
series ships inside the package); elsewhere it does nothing. Its tag `remove-input` hides
it in the HTML, where it is boilerplate; in JupyterLab, VS Code and Colab it is folded under its
first line, a Colab form title that says what it does. The URL is one setting:
`repository.url` in _config.yml (it drives the book's repository and Colab buttons too).
After changing it, or the cell below, run

    python -m tools.book.set_repository

A test checks that every notebook's first code cell is this cell.
"""
import sys
from pathlib import Path

import nbformat
import yaml

from tools.book.make_student import fold_code

ROOT = Path(__file__).resolve().parents[2]
TAGS = ["remove-input"]
SETUP = '''\
#@title Setup: on Colab, install the book's package and data; elsewhere, do nothing
# Safe to run again, also after an install that failed or was stopped half-way.
import importlib.util, os, shutil, subprocess, sys
REPOSITORY, CLONE = "{url}", "/content/ch12"
if importlib.util.find_spec("labsupport") is None:
    if "google.colab" not in sys.modules:
        raise ModuleNotFoundError(
            "labsupport is missing: run `pip install .` in the repository")
    if not os.path.isdir(os.path.join(CLONE, ".git")):   # none yet, or half made
        shutil.rmtree(CLONE, ignore_errors=True)
        subprocess.run(["git", "clone", "--depth", "1", REPOSITORY, CLONE],
                       check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", CLONE],
                   check=True)
    importlib.invalidate_caches()          # see the package installed just now'''


def repository_url() -> str:
    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


def setup_cell(url: str) -> str:
    """The source of every notebook's first code cell."""
    return SETUP.format(url=url)


def main() -> int:
    source = setup_cell(repository_url())
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        setup = next(c for c in nb.cells if c.cell_type == "code")
        folded = setup.metadata.get("jupyter", {}).get("source_hidden") and setup.metadata.get("cellView")
        if setup.source != source or setup.metadata.get("tags") != TAGS or not folded:
            setup.source = source
            setup.metadata["tags"] = list(TAGS)
            fold_code(setup)
            nbformat.write(nb, path)
            print(f"{path.name}: setup cell written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
