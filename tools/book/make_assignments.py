"""Write an nbgrader course from the book: every section is an assignment, source and release.

    python -m tools.book.make_assignments                  # -> assignments/ (make assignments)
    python -m tools.book.make_assignments --out /tmp/course chapters/12_1_self_attention.ipynb

Each notebook becomes the assignment named after it (``12_1_self_attention``, ...).
``source/<name>/<name>.ipynb`` is the book's notebook without outputs and solution
dropdowns (tools/book/make_student.py), its solutions kept between nbgrader's markers, and
each exercise's self-check (the code cell after the solution, ``checks.<name>(...)``)
turned into an autograded test cell worth ``--points``, named after the exercise's heading
(grade id ``exercise-12-1-1-attention-weights``). That cell opens with the exercise's title
and a hidden test, then shows the book's self-check unchanged:

    # Exercise 12.1.1: Attention weights
    ### BEGIN HIDDEN TESTS
    from labsupport.checks import graded as _graded_test
    _graded = _graded_test("attention_weights", attention_weights)
    assert _graded.passed, _graded
    print(_graded)
    ### END HIDDEN TESTS
    checks.attention_weights(attention_weights)

``nbgrader generate_assignment`` removes solutions and hidden tests from ``release/``:
a student sees the title and the book's self-check, a practice check on fixed inputs,
and the notebook runs top to bottom (a check never raises). ``nbgrader autograde`` puts
the hidden test back: `labsupport.checks.graded` runs the check on inputs drawn when it
runs (the seed is in the verdict), and gives 0 to an answer that calls the book's own
implementation; a failing answer's assertion fails, the cell loses its points and the
feedback shows the verdict with its hint or note. The feedback lists the graded cells by
their titles (``templates/book_feedback``, nbgrader's feedback template adapted).

Code cells that no exercise depends on are tagged ``reading``; the course's
``nbgrader_config.py`` makes ``book_autograde.SkipReading`` (tools/book/book_autograde.py,
copied into the course) the autograder's executor, which skips them unless the submission
needs them (``--SkipReading.skip_reading=False`` runs everything). The config also gives
each cell 15 minutes (nbgrader's default is 30 s) and uses the book's stub.
"""
from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat

from tools.book.book_autograde import READING, reading_cells
from tools.book.make_student import BEGIN, END, STUB, student_version

ROOT = Path(__file__).resolve().parents[2]
COURSE_ID = "ch12-attention"
HIDDEN = ("# {title}\n### BEGIN HIDDEN TESTS\nfrom labsupport.checks import graded as _graded_test\n"
          "_graded = {graded}\nassert _graded.passed, _graded\n"
          "print(_graded)\n### END HIDDEN TESTS\n")
AUTOGRADE = Path(__file__).with_name("book_autograde.py")
CONFIG = f'''\
# nbgrader configuration of the course written by tools/book/make_assignments.py.
import os
import sys

from nbgrader.converters import Autograde
from nbgrader.preprocessors import Execute

c = get_config()  # noqa: F821 (nbgrader defines it)
c.CourseDirectory.course_id = "{COURSE_ID}"
# A section runs for minutes on a laptop CPU; nbgrader's default is 30 s per cell.
c.Execute.timeout = 900
# The stub of the book's student versions (make student).
c.ClearSolutions.code_stub = {{"python": {STUB!r}}}
# Autograde runs what the graded cells need, skipping the cells tagged {READING!r} that
# nothing else needs (book_autograde.py, beside this file); run everything with
# --SkipReading.skip_reading=False.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from book_autograde import SkipReading  # noqa: E402

c.Autograde.autograde_preprocessors = [
    SkipReading if step is Execute else step
    for step in Autograde.class_traits()["autograde_preprocessors"].default()]
# Feedback: nbgrader's page, its list of graded cells naming each by its exercise's title
# (templates/book_feedback, beside this file, where nbgrader's template could be adapted).
if os.path.isdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates", "book_feedback")):
    import nbgrader
    c.HTMLExporter.template_name = "book_feedback"
    c.HTMLExporter.extra_template_basedirs = [
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates"),
        os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader", "templates")]
'''
TOC_LINK = '">Test cell</a>'          # how nbgrader's feedback lists a graded cell
TOC_TITLE = '">{{ (cell.source.splitlines() or ["Test cell"])[0].lstrip("# ") }}</a>'
TITLE = re.compile(r"^#{2,4}\s+((?:Lab e|E)xercise\s+[\w.]+:.*?)\s*$", re.M)


def self_check_call(source: str, where: str) -> tuple[str, str]:
    """``(check name, call source)`` of a self-check cell: one call ``checks.<name>(...)``."""
    call = _check_call(source, where)
    return call.func.attr, ast.get_source_segment(source, call)


def graded_call(source: str, where: str) -> str:
    """The graded call of a self-check cell: ``checks.<name>(args)`` becomes
    ``_graded_test("<name>", args)`` (`labsupport.checks.graded`, imported in the hidden test), its
    arguments (the label too) as written."""
    call = _check_call(source, where)
    parts = [ast.get_source_segment(source, node) for node in (*call.args, *call.keywords)]
    return f"_graded_test(\"{call.func.attr}\", {', '.join(parts)})"


def _check_call(source: str, where: str) -> ast.Call:
    try:
        body = ast.parse(source).body
    except SyntaxError as err:
        raise ValueError(f"{where}: the self-check cell does not parse ({err})") from None
    call = body[0].value if len(body) == 1 and isinstance(body[0], ast.Expr) else None
    func = getattr(call, "func", None)
    if not (isinstance(call, ast.Call) and isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name) and func.value.id == "checks"):
        raise ValueError(f"{where}: expected the cell after an exercise to be its self-check, one "
                         f"call checks.<name>(...); got {source!r}")
    return call


def exercise_title(nb, index: int, fallback: str) -> str:
    """The title of the exercise whose solution is cell ``index``: the last exercise heading
    (``### Exercise 12.1.1: Attention weights``, ``### Lab exercise 1: ...``) above it."""
    for cell in reversed(nb.cells[:index]):
        if cell.cell_type == "markdown":
            titles = TITLE.findall(cell.source)
            if titles:
                return titles[-1]
        elif BEGIN in cell.source:
            break                                  # the previous exercise: no heading between
    return fallback


def grade_id(title: str) -> str:
    """``exercise-12-1-1-attention-weights`` for ``Exercise 12.1.1: Attention weights``."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def exercises(nb, name: str = "notebook") -> list[tuple[int, int, str]]:
    """``(solution cell, self-check cell, check name)`` of every exercise, by cell index.

    An exercise is a code cell with nbgrader solution metadata and ``### BEGIN SOLUTION``;
    its self-check is the next code cell (tests/test_notebooks.py checks that pattern).
    """
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or BEGIN not in cell.source:
            continue
        if not cell.metadata.get("nbgrader", {}).get("solution"):
            raise ValueError(f"{name}, cell {index}: {BEGIN!r} in a cell without nbgrader solution "
                             "metadata; expected metadata nbgrader.solution = true")
        after = [i for i in range(index + 1, len(nb.cells)) if nb.cells[i].cell_type == "code"]
        if not after:
            raise ValueError(f"{name}, cell {index}: the exercise has no self-check cell after it")
        check, _ = self_check_call(nb.cells[after[0]].source, f"{name}, cell {after[0]}")
        found.append((index, after[0], check))
    return found


def source_version(nb, name: str = "notebook", *, points: float = 1):
    """The nbgrader source of a book notebook: solutions between their markers, dropdowns
    and outputs removed, each self-check an autograded test cell worth ``points`` named
    after its exercise, and the code cells that no exercise needs tagged ``reading``."""
    nb = student_version(nb, name, keep_solution_code=True)
    found = exercises(nb, name)
    for solution, index, check in found:
        cell = nb.cells[index]
        where = f"{name}, cell {index}"
        title = exercise_title(nb, solution, f"Exercise {check}")
        cell.source = HIDDEN.format(title=title, graded=graded_call(cell.source, where)) + cell.source
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "task": False,
                                     "points": points, "grade_id": grade_id(title), "schema_version": 3}
    ids = [nb.cells[index].metadata["nbgrader"]["grade_id"] for _, index, _ in found]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{name}: two exercises share a title, so their graded cells would share a "
                         f"grade id: {ids}; give each exercise heading its own number")
    for index in reading_cells(nb, {i for solution, test, _ in found for i in (solution, test)}):
        tags = nb.cells[index].metadata.get("tags", [])
        nb.cells[index].metadata["tags"] = [*tags, READING]
    return nb


def solution_code(source: str) -> str:
    """The code between the solution markers of a book exercise cell, dedented."""
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == BEGIN)
    stop = next(i for i, line in enumerate(lines) if line.strip() == END)
    return textwrap.dedent("\n".join(lines[start + 1:stop]))


def answered(stubbed: str, code: str) -> str:
    """A released exercise cell with ``code`` written in place of its stub, at the stub's indent."""
    first = STUB.splitlines()[0]
    lines = stubbed.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip() == first)
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    stub_end = at + len(STUB.splitlines())
    return "\n".join(lines[:at] + [indent + line if line else "" for line in code.splitlines()]
                     + lines[stub_end:])


def is_graded(cell) -> bool:
    """An autograded test cell (nbgrader: grade, not solution)."""
    marks = cell.metadata.get("nbgrader", {})
    return bool(marks.get("grade") and not marks.get("solution"))


def graded_cells(nb) -> list:
    """The autograded test cells of a source or release notebook."""
    return [cell for cell in nb.cells if is_graded(cell)]


def nbgrader(*args: str, course: Path, env: dict | None = None) -> str:
    """Run the nbgrader command line of this environment in ``course``; its log, or raise.

    ``env`` adds to the environment (the kernels that autograde starts inherit it).
    nbgrader runs ``alembic`` from the PATH: this environment's scripts come first.
    """
    command = [sys.executable, "-m", "nbgrader", *args]
    scripts = str(Path(sys.executable).parent)
    env = {**os.environ, **(env or {}), "PATH": os.pathsep.join([scripts, os.environ.get("PATH", "")])}
    done = subprocess.run(command, cwd=course, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"`nbgrader {' '.join(args)}` in {course} failed "
                           f"({done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout + done.stderr


def write_course(out: Path, notebooks, *, points: float = 1, release: bool = True) -> list[str]:
    """An nbgrader course in ``out``: its config, ``source/`` and (``release``) ``release/``.

    Returns the assignment names, one per notebook (its file name without suffix).
    """
    out.mkdir(parents=True, exist_ok=True)
    (out / "nbgrader_config.py").write_text(CONFIG)
    shutil.copyfile(AUTOGRADE, out / AUTOGRADE.name)
    feedback_template(out)
    names = []
    for path in map(Path, notebooks):
        folder = out / "source" / path.stem
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(source_version(nbformat.read(path, as_version=4), path.name, points=points),
                       folder / path.name)
        names.append(path.stem)
    if release:
        for name in names:
            nbgrader("generate_assignment", name, "--force", course=out)
    return names


def feedback_template(out: Path) -> bool:
    """Write ``out/templates/book_feedback``: nbgrader's feedback template with each graded
    cell listed by its first line, the exercise's title, instead of "Test cell". False (and
    nbgrader's own page) where nbgrader is missing or its template reads otherwise."""
    try:
        import nbgrader
    except ImportError:
        return False
    base = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates" / "feedback"
    page = (base / "index.html.j2").read_text() if (base / "index.html.j2").is_file() else ""
    if TOC_LINK not in page:
        return False
    target = out / "templates" / "book_feedback"
    target.mkdir(parents=True, exist_ok=True)
    (target / "index.html.j2").write_text(page.replace(TOC_LINK, TOC_TITLE))
    shutil.copyfile(base / "conf.json", target / "conf.json")
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="default: every notebook in chapters/")
    parser.add_argument("--out", type=Path, default=ROOT / "assignments",
                        help="the course folder (default: assignments/)")
    parser.add_argument("--points", type=float, default=1, help="points per exercise (default: 1)")
    parser.add_argument("--no-release", action="store_true",
                        help="write source/ only (no nbgrader needed)")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "chapters").glob("*.ipynb"))
    names = write_course(args.out, paths, points=args.points, release=not args.no_release)
    for name in names:
        source = nbformat.read(args.out / "source" / name / f"{name}.ipynb", as_version=4)
        print(f"{args.out / 'source' / name}: {len(graded_cells(source))} graded exercises")
    released = "" if args.no_release else f"; release versions in {args.out / 'release'}"
    print(f"course in {args.out}{released}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
