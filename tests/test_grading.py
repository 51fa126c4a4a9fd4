"""nbgrader end to end, offline, in a temporary course written by tools/book/make_assignments.py.

For every section: ``nbgrader generate_assignment``, then ``nbgrader autograde`` of three
submissions of the released notebook, then ``nbgrader generate_feedback``:

- ``solutions``: the book's solutions in place of the stubs: full points;
- ``unanswered``: the release as it is: zero on every exercise, and every other cell runs
  (this is also the test that a student's copy runs top to bottom);
- ``wrong``: one typical wrong answer per exercise (tests/wrong_answers.py): each exercise
  loses its points and its feedback shows the self-check's hint.

``nbgrader export`` must then list those totals. The kernels run the ``smoke`` profile
(the least training, the shortest sweeps): this checks grading, not results.
"""
import copy
import csv
import html
import re
import textwrap
from pathlib import Path

import nbformat
import pytest

from labsupport.checks import NOT_ANSWERED
from wrong_answers import WRONG_ANSWERS, missing, signature

ROOT = Path(__file__).resolve().parents[1]
from tools.book.make_assignments import (  # noqa: E402
    exercises,
    graded_cells,
    is_graded,
    nbgrader,
    source_version,
    write_course,
)
from tools.book.make_student import BEGIN, END, STUB  # noqa: E402

NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))
STUDENTS = ("solutions", "unanswered", "wrong")
SMOKE = {"LABSUPPORT_PROFILE": "smoke"}
# Seconds per cell: smoke cells take under 2 minutes on a loaded 2-core machine. nbclient
# can miss a cell's reply after a widget cell and then sit out the whole cell timeout
# before it carries on (jupyter/nbclient#312; seen once in 18 autogrades here, 900 s):
# this bounds what such a stall costs the test.
CELL_TIMEOUT = 300


def words(text: str) -> str:
    """Text with its whitespace collapsed (check messages wrap at 76 columns)."""
    return " ".join(text.split())


def solution_code(source: str) -> str:
    """The code between the solution markers, dedented."""
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == BEGIN)
    stop = next(i for i, line in enumerate(lines) if line.strip() == END)
    return textwrap.dedent("\n".join(lines[start + 1:stop]))


def answer(stubbed: str, code: str) -> str:
    """A released exercise cell with ``code`` written in place of its stub, at the stub's indent."""
    first = STUB.splitlines()[0]
    lines = stubbed.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip() == first)
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    stub_end = at + len(STUB.splitlines())
    return "\n".join(lines[:at] + [indent + line if line else "" for line in code.splitlines()]
                     + lines[stub_end:])


def submissions(book, release, name: str) -> dict:
    """The three submissions of one section, from its book and released notebooks."""
    answers = {"solutions": {}, "wrong": {}}
    for solution, _, check in exercises(book, name):
        cell = book.cells[solution]
        grade_id = cell.metadata["nbgrader"]["grade_id"]
        assert check in WRONG_ANSWERS, missing(check)
        wrong = WRONG_ANSWERS[check]
        assert signature(wrong.source) == signature(cell.source), (
            f"{name}: the wrong answer for checks.{check} is {signature(wrong.source)}, the exercise "
            f"defines {signature(cell.source)}: give tests/wrong_answers.py the exercise's def line")
        answers["solutions"][grade_id] = solution_code(cell.source)
        answers["wrong"][grade_id] = wrong.body
    made = {"unanswered": nbformat.from_dict(release)}
    for student, codes in answers.items():
        nb = nbformat.from_dict(release)
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id in codes:
                cell.source = answer(cell.source, codes.pop(grade_id))
        assert not codes, f"{name}: exercises {sorted(codes)} are missing from the release"
        made[student] = nb
    return made


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The course with every section generated (source and release), nothing graded yet."""
    pytest.importorskip("nbgrader", reason="nbgrader is for instructors: "
                        "pip install -r requirements.txt -r requirements-instructor.txt")
    root = tmp_path_factory.mktemp("course")
    write_course(root, NOTEBOOKS)
    return {"root": root, "graded": {}}


def graded(course, path):
    """Autograde and feedback of the three submissions of one section (once per section)."""
    name, root = path.stem, course["root"]
    if name not in course["graded"]:
        book = nbformat.read(path, as_version=4)
        release = nbformat.read(root / "release" / name / path.name, as_version=4)
        for student, nb in submissions(book, release, name).items():
            folder = root / "submitted" / student / name
            folder.mkdir(parents=True)
            nbformat.write(nb, folder / path.name)
        nbgrader("autograde", name, "--force", f"--Execute.timeout={CELL_TIMEOUT}", course=root, env=SMOKE)
        nbgrader("generate_feedback", name, "--force", course=root)
        course["graded"][name] = {
            student: {"notebook": nbformat.read(root / "autograded" / student / name / path.name, 4),
                      "feedback": (root / "feedback" / student / name / f"{name}.html").read_text()}
            for student in STUDENTS}
    return course["graded"][name]


def scores(course, name, student) -> dict:
    """``{grade_id: (score, max score)}`` of a student's autograded section, from the gradebook."""
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course['root'] / 'gradebook.db'}") as gradebook:
        notebook = gradebook.find_submission_notebook(name, name, student)
        return {grade.name: (grade.score, grade.max_score) for grade in notebook.grades}


def errors(nb) -> dict:
    """``{cell index: error text}`` of every cell that raised."""
    return {i: words(f"{out.ename}: {out.evalue}") for i, cell in enumerate(nb.cells)
            if cell.cell_type == "code" for out in cell.outputs if out.output_type == "error"}


def graded_indices(nb) -> list:
    return [i for i, cell in enumerate(nb.cells) if is_graded(cell)]


def tiny_notebook(check_cell="checks.attention_weights(attention_weights)", metadata=True):
    exercise = nbformat.v4.new_code_cell(
        f"def attention_weights(q, k):\n    {BEGIN}\n    return q\n    {END}")
    if metadata:
        exercise.metadata["nbgrader"] = {"solution": True, "grade": False, "locked": False,
                                         "grade_id": "solution-1", "schema_version": 3, "task": False}
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 12.9"), exercise,
                                           nbformat.v4.new_code_cell(check_cell)])


def test_source_version_makes_each_self_check_a_graded_cell_and_says_what_it_expected():
    book = tiny_notebook()
    before = copy.deepcopy(book)
    source = source_version(book, "tiny", points=2)
    graded = graded_cells(source)
    assert [cell.metadata.nbgrader.grade_id for cell in graded] == ["exercise-1-attention_weights"]
    assert graded[0].metadata.nbgrader.points == 2 and graded[0].metadata.nbgrader.locked
    assert graded[0].source.startswith("### BEGIN HIDDEN TESTS\n_verdict = checks.attention_weights(")
    assert graded[0].source.endswith("### END HIDDEN TESTS\nchecks.attention_weights(attention_weights)")
    assert BEGIN in source.cells[1].source, "the solution stays for nbgrader to remove"
    assert book == before, "the book's notebook is left as it was"
    with pytest.raises(ValueError, match=r"tiny, cell 2: expected the cell after an exercise to be its "
                                         r"self-check, one call checks.<name>\(...\); got 'print\(1\)'"):
        source_version(tiny_notebook("print(1)"), "tiny")
    with pytest.raises(ValueError, match="tiny, cell 1: .* without nbgrader solution metadata"):
        source_version(tiny_notebook(metadata=False), "tiny")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
@pytest.mark.slow
def test_every_exercise_is_one_graded_cell_that_students_see_unchanged(path, course):
    book = nbformat.read(path, as_version=4)
    source = nbformat.read(course["root"] / "source" / path.stem / path.name, as_version=4)
    release = nbformat.read(course["root"] / "release" / path.stem / path.name, as_version=4)
    found = exercises(book, path.name)
    assert len(found) >= 2
    for nb in (source, release):
        cells = graded_cells(nb)
        assert len(cells) == len(found), f"{len(cells)} graded cells for {len(found)} exercises"
        assert all(cell.metadata.nbgrader.points > 0 and cell.metadata.nbgrader.locked for cell in cells)
    for (_, check_at, _), cell in zip(found, graded_cells(release)):
        assert cell.source == book.cells[check_at].source, "the student sees the book's self-check"
    for (_, _, check), cell in zip(found, graded_cells(source)):
        hidden = re.search(r"### BEGIN HIDDEN TESTS\n(.*)### END HIDDEN TESTS", cell.source, re.S)
        assert hidden and f"checks.{check}(" in hidden[1] and "assert" in hidden[1]
    text = "\n".join(cell.source for cell in release.cells)
    for marker in ("HIDDEN TESTS", BEGIN, END):
        assert marker not in text, f"{marker!r} left in the release"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
@pytest.mark.slow
def test_the_book_solutions_get_full_points(path, course):
    result = graded(course, path)["solutions"]
    assert errors(result["notebook"]) == {}
    got = scores(course, path.stem, "solutions")
    assert got and all(score == most > 0 for score, most in got.values()), got


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
@pytest.mark.slow
def test_unanswered_gets_zero_and_every_other_cell_runs(path, course):
    nb = graded(course, path)["unanswered"]["notebook"]
    printed = "".join(out.get("text", "") for cell in nb.cells if cell.cell_type == "code"
                      for out in cell.outputs)
    assert "profile 'smoke'" in printed, "the kernel did not get the smoke profile"
    failed = errors(nb)
    assert sorted(failed) == graded_indices(nb), "only the graded cells may fail"
    assert all(NOT_ANSWERED in text for text in failed.values()), failed
    got = scores(course, path.stem, "unanswered")
    assert got and all(score == 0 for score, _ in got.values()), got


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
@pytest.mark.slow
def test_a_wrong_answer_loses_its_points_and_the_feedback_shows_the_hint(path, course):
    result = graded(course, path)["wrong"]
    nb, feedback = result["notebook"], words(html.unescape(re.sub(r"<[^>]+>", "", result["feedback"])))
    failed = errors(nb)
    assert sorted(failed) == graded_indices(nb), "only the graded cells may fail"
    for (_, _, check), at in zip(exercises(nbformat.read(path, as_version=4)), graded_indices(nb)):
        hint = words(WRONG_ANSWERS[check].hint)
        assert "[TRY AGAIN]" in failed[at] and hint in failed[at], failed[at]
        assert failed[at] in feedback, f"the feedback does not show {failed[at]!r}"
    got = scores(course, path.stem, "wrong")
    assert got and all(score == 0 for score, _ in got.values()), got


@pytest.mark.slow
def test_the_gradebook_export_lists_the_totals(course):
    for path in NOTEBOOKS:
        graded(course, path)
    root = course["root"]
    nbgrader("export", course=root)
    rows = list(csv.DictReader((root / "grades.csv").open()))
    for path in NOTEBOOKS:
        points = sum(cell.metadata.nbgrader.points for cell in
                     graded_cells(nbformat.read(root / "source" / path.stem / path.name, 4)))
        totals = {row["student_id"]: (float(row["score"]), float(row["max_score"]))
                  for row in rows if row["assignment"] == path.stem}
        assert totals == {"solutions": (points, points), "unanswered": (0, points),
                          "wrong": (0, points)}, path.stem
