"""nbgrader end to end, offline, in a temporary course written by tools/book/make_assignments.py.

For every section: ``nbgrader generate_assignment``, then ``nbgrader autograde`` of five
submissions of the released notebook, then ``nbgrader generate_feedback``:

- ``unanswered``: the release as it is, run top to bottom (``--SkipReading.skip_reading=False``):
  zero on every exercise, and every other cell runs (this is also the test that a
  student's copy runs top to bottom);
- ``solutions``: the book's solutions in place of the stubs: full points;
- ``alternative``: a right answer in another style per exercise (tests/wrong_answers.py): full points;
- ``wrong``: a typical wrong answer per exercise: each exercise scores zero and its feedback
  shows the hint;
- ``forbidden``: an answer that calls the book's own implementation: zero, with the note.

The last four are graded as a class is: the autograder skips the cells tagged ``reading``
that no exercise depends on (tools/book/book_autograde.py). ``nbgrader export`` must then
list those totals. The kernels run the ``smoke`` profile (the least training, the shortest
sweeps): this checks grading, not results.

``LABSUPPORT_CLASS_SCALE=N`` adds a class of N generated submissions of 12.1, mixtures of
right, wrong and forbidden answers, graded with tools/book/grade_class.py; every score is
checked and the time per submission printed.
"""
import copy
import csv
import html
import os
import random
import re
import time
from pathlib import Path

import nbformat
import pytest

from labsupport.checks import NOT_ANSWERED
from tools.book.book_autograde import READING, SKIPPED, cells_to_run
from tools.book.make_assignments import (
    answered,
    exercises,
    graded_cells,
    is_graded,
    nbgrader,
    solution_code,
    source_version,
    write_course,
)
from tools.book.make_student import BEGIN, END
from wrong_answers import ANSWERS, first, missing, signature

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))
ANSWERED = {"solutions": None, "alternative": "right", "wrong": "wrong", "forbidden": "forbidden"}
STUDENTS = ("unanswered", *ANSWERED)
LIGHT = "[afsw]*"                   # every student but "unanswered": graded as a class is
SMOKE = {"LABSUPPORT_PROFILE": "smoke"}
# Seconds per cell: a smoke cell takes under 20 s on a loaded 2-core machine. nbclient can
# miss a cell's reply after a widget cell and then sit out the whole cell timeout before it
# carries on (jupyter/nbclient#312; seen in 12.2's top-to-bottom run after the attention
# explorer, a 300 s gap between two cells): this bounds what such a stall costs the test.
CELL_TIMEOUT = 120


def words(text: str) -> str:
    """Text with its whitespace collapsed (check messages wrap at 76 columns)."""
    return " ".join(text.split())


def answers_of(book, name: str, kind: str | None) -> dict:
    """``{solution grade_id: code}``: the book's solutions (``kind`` None), else the first
    answer of ``kind`` of every exercise, checked to define the exercise's function."""
    codes = {}
    for solution, _, check in exercises(book, name):
        cell = book.cells[solution]
        grade_id = cell.metadata["nbgrader"]["grade_id"]
        if kind is None:
            codes[grade_id] = solution_code(cell.source)
            continue
        assert any(a.kind == kind for a in ANSWERS.get(check, ())), missing(check, kind)
        chosen = first(check, kind)
        assert signature(chosen.source) == signature(cell.source), (
            f"{name}: the {kind} answer for checks.{check} is {signature(chosen.source)}, the exercise "
            f"defines {signature(cell.source)}: give tests/wrong_answers.py the exercise's def line")
        codes[grade_id] = chosen.body
    return codes


def submission(release, codes: dict, name: str):
    """The release with ``codes`` (by solution grade_id) written in place of the stubs."""
    nb, codes = nbformat.from_dict(release), dict(codes)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in codes:
            cell.source = answered(cell.source, codes.pop(grade_id))
    assert not codes, f"{name}: exercises {sorted(codes)} are missing from the release"
    return nb


def submissions(book, release, name: str) -> dict:
    """The five submissions of one section, from its book and released notebooks."""
    made = {"unanswered": nbformat.from_dict(release)}
    for student, kind in ANSWERED.items():
        made[student] = submission(release, answers_of(book, name, kind), name)
    return made


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The course with every section generated (source and release), nothing graded yet."""
    pytest.importorskip("nbgrader", reason="nbgrader is for instructors: "
                        "pip install -r requirements.txt -r requirements-instructor.txt")
    root = tmp_path_factory.mktemp("course")
    write_course(root, NOTEBOOKS)
    return {"root": root, "graded": {}, "seconds": {}}


def graded(course, path):
    """Autograde and feedback of the five submissions of one section (once per section)."""
    name, root = path.stem, course["root"]
    if name not in course["graded"]:
        book = nbformat.read(path, as_version=4)
        release = nbformat.read(root / "release" / name / path.name, as_version=4)
        for student, nb in submissions(book, release, name).items():
            folder = root / "submitted" / student / name
            folder.mkdir(parents=True)
            nbformat.write(nb, folder / path.name)
        timeout = f"--Execute.timeout={CELL_TIMEOUT}"
        start = time.perf_counter()
        nbgrader("autograde", name, "--force", timeout, "--student=unanswered",
                 "--SkipReading.skip_reading=False", course=root, env=SMOKE)
        middle = time.perf_counter()
        nbgrader("autograde", name, "--force", timeout, f"--student={LIGHT}", course=root, env=SMOKE)
        course["seconds"][name] = (middle - start, (time.perf_counter() - middle) / len(ANSWERED))
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


def skipped(nb) -> list:
    return [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
            and any(out.get("text") == SKIPPED for out in cell.outputs)]


def feedback_text(result) -> str:
    return words(html.unescape(re.sub(r"<[^>]+>", "", result["feedback"])))


# --- writing the course (no nbgrader needed) ---------------------------------------------------

def tiny_notebook(check_cell="checks.attention_weights(attention_weights)", metadata=True):
    exercise = nbformat.v4.new_code_cell(
        f"def attention_weights(q, k):\n    {BEGIN}\n    return q\n    {END}")
    if metadata:
        exercise.metadata["nbgrader"] = {"solution": True, "grade": False, "locked": False,
                                         "grade_id": "solution-1", "schema_version": 3, "task": False}
    return nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# 12.9"), nbformat.v4.new_code_cell("import torch"),
        nbformat.v4.new_code_cell("sweep = [t for t in range(10 ** 6)]"),
        nbformat.v4.new_markdown_cell("## Exercises\n\n### Exercise 12.9.1: Attention weights\n\nWrite it."),
        exercise, nbformat.v4.new_code_cell(check_cell)])


def test_source_version_makes_each_self_check_a_graded_cell_named_after_its_exercise():
    book = tiny_notebook('checks.attention_weights(attention_weights, label="Lab step 1: weights")')
    before = copy.deepcopy(book)
    source = source_version(book, "tiny", points=2)
    graded = graded_cells(source)
    assert [cell.metadata.nbgrader.grade_id for cell in graded] == ["exercise-12-9-1-attention-weights"]
    assert graded[0].metadata.nbgrader.points == 2 and graded[0].metadata.nbgrader.locked
    assert graded[0].source == (
        "# Exercise 12.9.1: Attention weights\n### BEGIN HIDDEN TESTS\n"
        'from labsupport.checks import graded as _graded_test\n'
        '_graded = _graded_test("attention_weights", attention_weights, label="Lab step 1: weights")\n'
        "assert _graded.passed, _graded\nprint(_graded)\n### END HIDDEN TESTS\n"
        'checks.attention_weights(attention_weights, label="Lab step 1: weights")')
    assert BEGIN in source.cells[4].source, "the solution stays for nbgrader to remove"
    assert source.cells[2].metadata.tags == [READING] and "tags" not in source.cells[1].metadata, \
        "the sweep is reading material; the import cell is needed"
    assert book == before, "the book's notebook is left as it was"
    with pytest.raises(ValueError, match=r"tiny, cell 5: expected the cell after an exercise to be its "
                                         r"self-check, one call checks.<name>\(...\); got 'print\(1\)'"):
        source_version(tiny_notebook("print(1)"), "tiny")
    with pytest.raises(ValueError, match="tiny, cell 4: .* without nbgrader solution metadata"):
        source_version(tiny_notebook(metadata=False), "tiny")


def test_the_autograder_runs_a_reading_cell_that_the_submission_needs():
    def cell(source, tags=None):
        made = nbformat.v4.new_code_cell(source)
        if tags:
            made.metadata["tags"] = tags
        return made
    nb = nbformat.v4.new_notebook(cells=[
        cell("import torch"), cell("def build():\n    return 1", [READING]),
        cell("table = build()", [READING]), cell("plot(table)", [READING]),
        cell("def answer():\n    return table\n"), cell("%matplotlib inline\nx = 1")])
    assert cells_to_run(nb) == {0, 1, 2, 4, 5}, "the answer reads table (cell 2), made by build (cell 1)"
    nb.cells[4].source = "def answer():\n    return 2\n"
    assert cells_to_run(nb) == {0, 4, 5}


# --- nbgrader end to end --------------------------------------------------------------------

@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
@pytest.mark.slow
def test_every_exercise_is_one_graded_cell_that_students_see_with_its_title(path, course):
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
        title, rest = cell.source.split("\n", 1)
        assert re.fullmatch(r"# (Lab e|E)xercise [\d.]+: .+", title), title
        assert rest == book.cells[check_at].source, "the student sees the book's self-check"
        assert cell.metadata.nbgrader.grade_id.startswith(("exercise-12-", "lab-exercise-"))
    for (_, _, check), cell in zip(found, graded_cells(source)):
        hidden = re.search(r"### BEGIN HIDDEN TESTS\n(.*)### END HIDDEN TESTS", cell.source, re.S)
        assert hidden and hidden[1].startswith("from labsupport.checks import graded as _graded_test\n"
                                               f'_graded = _graded_test("{check}", ')
    text = "\n".join(cell.source for cell in release.cells)
    for marker in ("HIDDEN TESTS", BEGIN, END):
        assert marker not in text, f"{marker!r} left in the release"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
@pytest.mark.slow
def test_the_book_solutions_and_other_right_answers_get_full_points(path, course):
    result = graded(course, path)
    for student in ("solutions", "alternative"):
        nb = result[student]["notebook"]
        assert errors(nb) == {}, (student, errors(nb))
        got = scores(course, path.stem, student)
        assert got and all(score == most > 0 for score, most in got.values()), (student, got)
        assert feedback_text(result[student]).count("[GRADED: PASS]") == len(got)
        assert "graded on inputs drawn with seed" in feedback_text(result[student]) \
            or "the measurement is repeated when grading" in feedback_text(result[student])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
@pytest.mark.slow
def test_unanswered_gets_zero_and_every_other_cell_runs(path, course):
    nb = graded(course, path)["unanswered"]["notebook"]
    printed = "".join(out.get("text", "") for cell in nb.cells if cell.cell_type == "code"
                      for out in cell.outputs)
    assert "Profile 'smoke' (from $LABSUPPORT_PROFILE)" in printed, "the kernel did not get the smoke profile"
    assert skipped(nb) == [], "the release runs top to bottom"
    failed = errors(nb)
    assert sorted(failed) == graded_indices(nb), "only the graded cells may fail"
    assert all(NOT_ANSWERED in text for text in failed.values()), failed
    got = scores(course, path.stem, "unanswered")
    assert got and all(score == 0 for score, _ in got.values()), got


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
@pytest.mark.slow
def test_graded_as_a_class_the_reading_cells_are_skipped(path, course):
    result = graded(course, path)
    nb = result["solutions"]["notebook"]
    tagged = [i for i, cell in enumerate(nb.cells) if READING in cell.metadata.get("tags", [])]
    assert tagged and skipped(nb) == tagged, "every reading cell skipped, and only those"
    assert all(nb.cells[i].execution_count is None for i in tagged)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
@pytest.mark.slow
def test_a_wrong_answer_loses_its_points_and_the_feedback_shows_the_hint(path, course):
    _zero_with(path, course, "wrong", "[GRADED: 0 POINTS]")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
@pytest.mark.slow
def test_an_answer_calling_the_books_implementation_scores_zero_with_a_note(path, course):
    _zero_with(path, course, "forbidden", "scores 0 whatever it returns")


def _zero_with(path, course, student, fragment):
    result = graded(course, path)[student]
    nb, feedback = result["notebook"], feedback_text(result)
    failed = errors(nb)
    assert sorted(failed) == graded_indices(nb), "only the graded cells may fail"
    for (_, _, check), at in zip(exercises(nbformat.read(path, as_version=4)), graded_indices(nb)):
        says = words(first(check, student).says)
        assert fragment in failed[at] and says in failed[at], failed[at]
        assert failed[at] in feedback, f"the feedback does not show {failed[at]!r}"
    got = scores(course, path.stem, student)
    assert got and all(score == 0 for score, _ in got.values()), got


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
@pytest.mark.slow
def test_the_feedback_names_every_exercise(path, course):
    feedback = graded(course, path)["wrong"]["feedback"]
    source = nbformat.read(course["root"] / "source" / path.stem / path.name, as_version=4)
    for cell in graded_cells(source):
        title = html.escape(cell.source.split("\n", 1)[0].lstrip("# "), quote=False)
        assert f'<a href="#{cell.metadata.nbgrader.grade_id}">{title}</a>' in feedback, \
            "the list of graded cells names the exercise"


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
        assert totals == {"solutions": (points, points), "alternative": (points, points),
                          "unanswered": (0, points), "wrong": (0, points), "forbidden": (0, points)}, \
            path.stem
    for name, (full, light) in course["seconds"].items():
        print(f"{name}: top to bottom {full:.0f} s, graded as a class {light:.1f} s per submission")


# --- a class ---------------------------------------------------------------------------------

CLASS_SIZE = int(os.environ.get("LABSUPPORT_CLASS_SCALE", "0"))


@pytest.mark.slow
@pytest.mark.skipif(not CLASS_SIZE, reason="set LABSUPPORT_CLASS_SCALE=N to grade a class of N submissions")
def test_a_class_of_generated_submissions_gets_every_score_right(tmp_path):
    """N submissions of 12.1, each exercise answered at random (a right answer, the book's
    solution, a wrong or a forbidden answer, or left unanswered), graded with grade_class."""
    pytest.importorskip("nbgrader")
    from tools.book.grade_class import grade_class
    path = ROOT / "chapters" / "12_1_self_attention.ipynb"
    course = tmp_path / "course"
    write_course(course, [path])
    book = nbformat.read(path, as_version=4)
    release = nbformat.read(course / "release" / path.stem / path.name, as_version=4)
    choices = {kind: answers_of(book, path.stem, kind) for kind in (None, "right", "wrong", "forbidden")}
    rng, expected = random.Random(0), {}
    folder = tmp_path / "submissions"
    folder.mkdir()
    for n in range(CLASS_SIZE):
        picks = {grade_id: rng.choice([None, "right", "wrong", "forbidden", "unanswered"])
                 for grade_id in choices[None]}
        codes = {g: choices[kind][g] for g, kind in picks.items() if kind != "unanswered"}
        nbformat.write(submission(release, codes, path.stem), folder / f"student{n:03d}.ipynb")
        expected[f"student{n:03d}"] = sum(kind in (None, "right") for kind in picks.values())
    start = time.perf_counter()
    results = grade_class(course, path.stem, folder, env=SMOKE)
    seconds = time.perf_counter() - start
    assert {r.student: r.score for r in results} == expected
    print(f"{CLASS_SIZE} submissions of {path.stem} in {seconds:.0f} s: {seconds / CLASS_SIZE:.1f} s each")


# --- the instructor's path: what make student hands out, a class with broken submissions ---------

@pytest.fixture(scope="module")
def one_section(tmp_path_factory):
    """A course of 12.1 alone, and the notebook `make student` hands out for it."""
    pytest.importorskip("nbgrader")
    from tools.book.make_student import main as make_student
    root = tmp_path_factory.mktemp("one")
    path = ROOT / "chapters" / "12_1_self_attention.ipynb"
    write_course(root / "course", [path])
    assert make_student(["--out", str(root / "student"), str(path)]) == 0
    handed = nbformat.read(root / "student" / "chapters" / path.name, as_version=4)
    return {"root": root, "path": path, "handed": handed, "book": nbformat.read(path, as_version=4)}


@pytest.mark.slow
def test_the_notebook_make_student_hands_out_is_the_release_and_grades_full_marks(one_section, tmp_path):
    from tools.book.grade_class import grade_class
    s = one_section
    release = nbformat.read(s["root"] / "course" / "release" / s["path"].stem / s["path"].name, 4)
    strip = lambda nb: [(c.cell_type, c.source, c.metadata.get("nbgrader")) for c in nb.cells]  # noqa: E731
    assert strip(s["handed"]) == strip(release), "make student writes what nbgrader grades"
    folder = tmp_path / "class"
    folder.mkdir()
    nbformat.write(submission(s["handed"], answers_of(s["book"], s["path"].stem, None), "12.1"),
                   folder / "ada.ipynb")
    [result] = grade_class(s["root"] / "course", s["path"].stem, folder, env=SMOKE)
    assert result.ok and result.score == result.max_score > 0
    assert set(result.exercises.values()) == {"passed"}


@pytest.mark.slow
def test_a_class_with_broken_submissions_is_graded_and_each_broken_one_named(one_section, tmp_path, capsys):
    from tools.book.grade_class import main
    s, name = one_section, one_section["path"].stem
    course, folder = s["root"] / "course", tmp_path / "class"
    folder.mkdir()
    write_course(course, [ROOT / "chapters" / "12_2_transformer.ipynb"])          # another section too
    right = submission(s["handed"], answers_of(s["book"], name, None), "12.1")
    nbformat.write(right, folder / "right.ipynb")
    text = nbformat.writes(right)
    (folder / "truncated.ipynb").write_text(text[: len(text) // 2])
    other = nbformat.read(course / "release" / "12_2_transformer" / "12_2_transformer.ipynb", 4)
    nbformat.write(other, folder / "other_section.ipynb")
    crash = nbformat.from_dict(s["handed"])
    first_solution = next(c for c in crash.cells if c.metadata.get("nbgrader", {}).get("solution"))
    first_solution.source = "1 / 0                  # the cell raises: its function is never defined\n" \
        + first_solution.source
    nbformat.write(crash, folder / "crash.ipynb")
    older = course / "submitted" / "earlier" / name
    older.mkdir(parents=True)
    nbformat.write(right, older / f"{name}.ipynb")
    status = main(["--assignment", name, "--submissions", str(folder), "--course", str(course)])
    out = capsys.readouterr().out
    print(out)
    assert status == 1, "some submissions could not be graded: the exit status says so"
    rows = {line.split()[0]: line for line in out.splitlines()[1:] if line and not line[0].isdigit()}
    assert "UNREADABLE" in rows["truncated"] and "not a readable notebook" in rows["truncated"]
    assert "ANOTHER ASSIGNMENT" in rows["other_section"] and "12_2_transformer" in rows["other_section"]
    total = len(graded_cells(s["handed"]))
    assert f"{total:g} / {total:g}" in rows["right"]
    student, score, _, most, passed, wrong, unanswered, crashed = rows["crash"].split()[:8]
    assert (crashed, unanswered, wrong) == ("1", str(total - 1), "0"), rows["crash"]
    assert "left as they were" in out
    assert not any((course / "submitted" / bad).exists() for bad in ("truncated", "other_section"))
    assert (older / f"{name}.ipynb").is_file()
