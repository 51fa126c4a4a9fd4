"""The student versions (`make student`): no solution code, the same exercises.

That a student's copy runs top to bottom is tested by tests/test_grading.py: nbgrader
autogrades the released version, unanswered, and every cell but the graded ones must run."""
import re
from pathlib import Path

import nbformat
import pytest

from tools.book.make_student import BEGIN, END, strip_solution_code, student_version

ROOT = Path(__file__).resolve().parents[1]

NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))
EXERCISE = re.compile(r"^### (?:Exercise )?(12\.\d\.\d|Lab exercise \d):", re.M)   # 12.1.1, Lab exercise 1


def solution_lines(nb):
    """The distinctive lines of every solution: those found nowhere else in the notebook."""
    inside, lines = False, set()
    for cell in nb.cells:
        for line in cell.source.splitlines():
            if line.strip() in (BEGIN, END):
                inside = line.strip() == BEGIN
            elif inside and line.strip():
                lines.add(line.strip())
    elsewhere = "\n".join(cell.source for cell in nb.cells if BEGIN not in cell.source)
    return {line for line in lines if line not in elsewhere}


def student_text(nb):
    return "\n".join(cell.source for cell in nb.cells)


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    chapters = out / "chapters"
    chapters.mkdir()
    for path in NOTEBOOKS:
        nbformat.write(student_version(nbformat.read(path, as_version=4), path.name),
                       chapters / path.name)
    return chapters


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_student_version_has_no_solution_code(path, student_dir):
    book = nbformat.read(path, as_version=4)
    student = nbformat.read(student_dir / path.name, as_version=4)
    text = student_text(student)
    for marker in (BEGIN, END):
        assert marker not in text, f"{path.name}: {marker!r} left in the student version"
    leaked = [line for line in solution_lines(book) if line in text]
    assert not leaked, f"{path.name}: solution lines left: {leaked}"
    exercises = [c for c in book.cells if BEGIN in c.source]
    stubs = [c for c in student.cells if "raise NotImplementedError" in c.source
             and c.metadata.get("nbgrader", {}).get("solution")]
    assert len(stubs) == len(exercises) >= 2, \
        f"{path.name}: {len(stubs)} stubs for {len(exercises)} exercises"
    assert EXERCISE.findall(text) == EXERCISE.findall(student_text(book))
    for cell in student.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            assert "hide-input" not in cell.metadata.get("tags", []) and "cellView" not in cell.metadata \
                and not cell.metadata.get("jupyter", {}).get("source_hidden"), \
                f"{path.name}: a student's answer cell is folded"
    assert all(not c.get("outputs") for c in student.cells if c.cell_type == "code")


def test_stub_keeps_indentation_and_rejects_broken_markers():
    source = f"def f(x):\n    {BEGIN}\n    return x\n    {END}\n"
    stub = "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError"
    assert strip_solution_code(source, "t") == stub
    for broken in (f"{BEGIN}\nx = 1\n", f"x = 1\n{END}\n", f"{BEGIN}\n{BEGIN}\n{END}\n"):
        with pytest.raises(ValueError, match="SOLUTION"):
            strip_solution_code(broken, "t")


def test_instructor_page_lists_every_exercise_and_function():
    page = (ROOT / "instructor.md").read_text()
    for path in NOTEBOOKS:
        text = student_text(nbformat.read(path, as_version=4))
        numbers = EXERCISE.findall(text)
        assert numbers, path.name
        for number in numbers:
            assert number.lower() in page.lower(), f"instructor.md does not list {number}"
        for function in re.findall(r"^checks\.\w+\((\w+)\)", text, flags=re.M):
            assert f"`{function}(" in page, f"instructor.md does not list `{function}`"
