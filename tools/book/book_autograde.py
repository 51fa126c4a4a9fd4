"""Autograde only what grading needs: the code cells the exercises depend on.

`tools/book/make_assignments.py` tags ``reading`` every code cell of a section that no
exercise depends on (experiments, sweeps, training runs, figures) and copies this file
into the course folder, whose ``nbgrader_config.py`` makes `SkipReading` the executor of
``nbgrader autograde``. At autograde time `SkipReading` reads the submitted notebook
again and runs every cell except the tagged cells that none of the others needs: the
first code cell (setup), every untagged cell (imports, the student's answers, the graded
cells, cells the student added) and every tagged cell that defines a name one of those
uses, before it, run in order. A skipped cell keeps its source and gets one line of output
saying it was not run. ``--SkipReading.skip_reading=False`` runs everything (a check that
a notebook runs top to bottom); ``nbgrader generate_assignment`` and the students' own
runs are not affected.

Names are found with `symtable` on each cell's source (IPython magics and shell lines
read as ``pass``); a cell that does not parse is always run.
"""
from __future__ import annotations

import symtable

from nbformat.v4 import new_output

READING = "reading"                  # the cell tag that lets the autograder skip a cell
SKIPPED = "(not run by the autograder: reading material that no exercise depends on)\n"


def names(source: str) -> tuple[set, set] | None:
    """``(defined, used)``: the global names a cell binds and those it reads; None when
    the cell does not parse."""
    lines = ["pass" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    try:
        table = symtable.symtable("\n".join(lines) + "\n", "<cell>", "exec")
    except SyntaxError:
        return None
    defined = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    used = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
    stack = list(table.get_children())
    while stack:                                       # globals read inside functions and classes
        child = stack.pop()
        used |= {s.get_name() for s in child.get_symbols()
                 if s.is_referenced() and s.is_global()}
        stack.extend(child.get_children())
    return defined, used


def _closure(sources: dict, always: set) -> set:
    """The cells in ``always``, the cells that do not parse, and every cell that defines a
    name that a later cell of the result reads (repeated until nothing is added)."""
    found = {i: names(source) for i, source in sources.items()}
    run = {i for i in sources if i in always or found[i] is None}
    changed = True
    while changed:
        changed = False
        for i in sources:
            if i not in run and any(j > i and found[i][0] & found[j][1] for j in run):
                run.add(i)
                changed = True
    return run


def _code(nb) -> dict:
    return {i: cell.source for i, cell in enumerate(nb.cells) if cell.cell_type == "code"}


def cells_to_run(nb) -> set[int]:
    """Indices of the code cells that grading ``nb`` needs (see the module docstring)."""
    sources = _code(nb)
    always = {min(sources)} | {i for i in sources if READING not in nb.cells[i].metadata.get("tags", [])}
    return _closure(sources, always)


def reading_cells(nb, needed) -> list[int]:
    """The code cells of a book notebook to tag ``reading``: all but the first, the cells
    in ``needed`` (the exercises and their graded cells) and those they depend on."""
    sources = _code(nb)
    keep = _closure(sources, {min(sources)} | set(needed))
    return [i for i in sources if i not in keep]


try:                                   # writing a course needs no nbgrader; grading one does
    from nbgrader.preprocessors import Execute
    from traitlets import Bool
except ImportError:                    # pragma: no cover
    Execute = None

if Execute is not None:
    class SkipReading(Execute):
        """nbgrader's executor, skipping the reading cells that no graded cell depends on."""

        skip_reading = Bool(True, help="Skip the cells tagged 'reading' that no other cell "
                                       "needs (False: run every cell)").tag(config=True)

        def preprocess(self, nb, resources=None, km=None):
            self._run = cells_to_run(nb) if self.skip_reading else None
            return super().preprocess(nb, resources, km=km)

        def preprocess_cell(self, cell, resources, index):
            if self._run is None or cell.cell_type != "code" or index in self._run:
                return super().preprocess_cell(cell, resources, index)
            cell.outputs = [new_output("stream", name="stdout", text=SKIPPED)]
            return cell, resources
