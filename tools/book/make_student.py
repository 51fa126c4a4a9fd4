"""Write the student version of every notebook: solutions removed, everything else kept.

    python -m tools.book.make_student                       # chapters/*.ipynb -> student/chapters/
    python -m tools.book.make_student --out /tmp/hw chapters/12_1_self_attention.ipynb

What it writes is what nbgrader grades: the released notebook of the nbgrader course that
tools/book/make_assignments.py makes (built in a temporary course), so a class can be handed
either `student/` or the course's `release/` and graded all the same (`make grade`). Without
nbgrader installed (`requirements-instructor.txt`) it says so and stops.

In each exercise's code cell the lines between ``### BEGIN SOLUTION`` and
``### END SOLUTION`` become ``raise NotImplementedError`` (the nbgrader convention), the
cell is unfolded (the book folds its solutions: tag ``hide-input`` for the HTML book,
``jupyter.source_hidden`` for JupyterLab and VS Code, ``cellView: form`` for Colab), and
outputs are cleared. The cell keeps its nbgrader metadata, so the student version also
works as an nbgrader source.
An unanswered exercise raises only when its function is called: its self-check then
says "not answered yet", and cells that build on it use the book's reference version,
so a student notebook runs top to bottom.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = "# YOUR CODE HERE\nraise NotImplementedError"


def strip_solution_code(source: str, where: str) -> str:
    """Replace each BEGIN/END SOLUTION region by the stub, at the marker's indentation."""
    lines, out, inside = source.splitlines(), [], False
    for line in lines:
        marker = line.strip()
        if marker == BEGIN:
            if inside:
                raise ValueError(f"{where}: {BEGIN!r} inside an open solution")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            out.extend(indent + stub_line for stub_line in STUB.splitlines())
        elif marker == END:
            if not inside:
                raise ValueError(f"{where}: {END!r} without {BEGIN!r}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{where}: {BEGIN!r} is never closed by {END!r}")
    return "\n".join(out)


FOLDED = "hide-input"


def fold(cell) -> None:
    """Fold a solution cell in every client: the book (tag hide-input), JupyterLab and VS Code
    (``jupyter.source_hidden``), Colab (``cellView: form``: the code hidden, a Show code link)."""
    cell.metadata["tags"] = [*[t for t in cell.metadata.get("tags", []) if t != FOLDED], FOLDED]
    fold_code(cell)


def fold_code(cell) -> None:
    """Fold a code cell's input in JupyterLab and VS Code (``jupyter.source_hidden``) and in
    Colab (``cellView: form``), as the book's tags fold or remove it there."""
    cell.metadata["jupyter"] = {**cell.metadata.get("jupyter", {}), "source_hidden": True}
    cell.metadata["cellView"] = "form"


HIDDEN_IN_BOOK = ("remove-input", "hide-input", "remove-cell")


def is_setup_cell(cell) -> bool:
    """The Colab setup cell (folded like every cell the book hides: its title says what it does)."""
    return cell.cell_type == "code" and "google.colab" in cell.source


def fold_hidden_cells(nb) -> int:
    """Fold, in every client, each code cell whose input the book hides (tags `HIDDEN_IN_BOOK`),
    the setup cell among them, and the output of each cell the book removes whole (`remove-cell`:
    the run record); return how many cells changed."""
    changed = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = set(cell.metadata.get("tags", []))
        if tags & set(HIDDEN_IN_BOOK):
            before = (cell.metadata.get("jupyter", {}).get("source_hidden"), cell.metadata.get("cellView"))
            fold_code(cell)
            changed += before != (True, "form")
        if "remove-cell" in tags and not cell.metadata.get("jupyter", {}).get("outputs_hidden"):
            cell.metadata.setdefault("jupyter", {})["outputs_hidden"] = True
            changed += 1
    return changed


def unfold(cell) -> None:
    """Undo `fold`: the student sees the stub where the answer goes."""
    tags = [t for t in cell.metadata.get("tags", []) if t != FOLDED]
    if tags:
        cell.metadata["tags"] = tags
    else:
        cell.metadata.pop("tags", None)
    cell.metadata.get("jupyter", {}).pop("source_hidden", None)
    if not cell.metadata.get("jupyter", True):
        cell.metadata.pop("jupyter")
    cell.metadata.pop("cellView", None)


def student_version(nb, name: str = "notebook", *, keep_solution_code: bool = False):
    """A copy of ``nb`` without solutions, outputs or widget state.

    With ``keep_solution_code`` the code between the markers stays (the cell is unfolded
    all the same): the source version of an nbgrader assignment, where nbgrader removes it.
    """
    nb = nbformat.from_dict(nb)
    cells = []
    for index, cell in enumerate(nb.cells):
        where = f"{name}, cell {index}"
        if cell.cell_type == "code":
            if BEGIN in cell.source:
                if not keep_solution_code:
                    cell.source = strip_solution_code(cell.source, where)
                unfold(cell)
            cell.outputs, cell.execution_count = [], None
            cell.metadata.pop("execution", None)
        cells.append(cell)
    nb.cells = cells
    nb.metadata.pop("widgets", None)
    return nb


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="default: every notebook in chapters/")
    parser.add_argument("--out", type=Path, default=ROOT / "student",
                        help="output folder; notebooks land in OUT/chapters/ (default: student/)")
    args = parser.parse_args(argv)
    try:
        import nbgrader  # noqa: F401
    except ImportError:
        print("make_student: the student version is nbgrader's release, and nbgrader is not installed: "
              "run `make student` (it installs requirements-instructor.txt) or pip install -r "
              "requirements.txt -r requirements-instructor.txt", file=sys.stderr)
        return 1
    from tools.book.make_assignments import write_course

    paths = [p.resolve() for p in args.notebooks] or sorted((ROOT / "chapters").glob("*.ipynb"))
    target = args.out / "chapters"
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in write_course(Path(tmp), paths):
            shutil.copyfile(Path(tmp) / "release" / name / f"{name}.ipynb", target / f"{name}.ipynb")
            released = nbformat.read(target / f"{name}.ipynb", as_version=4)
            count = sum(STUB.splitlines()[-1] in c.source for c in released.cells)
            print(f"{target / name}.ipynb: {count} exercises left for the student")
    return 0


if __name__ == "__main__":
    sys.exit(main())
