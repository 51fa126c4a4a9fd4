"""Autograde a folder of submissions of one section, write their feedback, print a table.

    make assignments                                           # once: the course in assignments/
    make grade ASSIGNMENT=12_1_self_attention SUBMISSIONS=DIR  # from the repository's root
    .venv/bin/python -m tools.book.grade_class --assignment 12_1_self_attention --submissions DIR

``DIR`` holds one notebook per student, either ``DIR/<student>.ipynb`` or
``DIR/<student>/<anything>.ipynb``. Only the students of ``DIR`` are graded: each notebook is
first read and compared with the released assignment (a file that is not a notebook, or a
notebook of another section, is named with the reason and not graded), then copied to
``<course>/submitted/<student>/<assignment>/`` (replacing that student's earlier submission),
autograded alone (the cells no exercise needs are skipped: tools/book/book_autograde.py) and
given feedback in ``<course>/feedback/<student>/<assignment>/``. Submissions of other students
already in the course are left as they are, and not graded again. A submission nbgrader cannot
grade is named with nbgrader's last line and taken out of ``submitted/``, so that it blocks no
later run. The table gives each student's score and, per exercise, whether it passed, got a
wrong answer, was left unanswered or crashed (the student's code raised before its test
could run). The exit status is 1 when some submission could not be graded. The kernels run
``LABSUPPORT_PROFILE=smoke`` unless ``--profile`` says otherwise: no check depends on training.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from tools.book.make_assignments import ROOT, graded_cells, nbgrader

NOT_ANSWERED_MARK = "not answered yet"           # labsupport.checks.NOT_ANSWERED begins so


@dataclass
class Graded:
    """One student's result: ``status`` graded, unreadable, another assignment or not graded."""

    student: str
    status: str
    score: float | None = None
    max_score: float | None = None
    exercises: dict = field(default_factory=dict)     # grade id -> passed, wrong, unanswered, crashed
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "graded"


def collect(folder: Path) -> dict:
    """``{student: notebook path}`` from ``folder`` (see the module docstring)."""
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such folder of submissions")
    found = {path.stem: path for path in sorted(folder.glob("*.ipynb"))}
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        notebooks = sorted(sub.glob("*.ipynb"))
        if len(notebooks) > 1:
            raise ValueError(f"{sub}: {len(notebooks)} notebooks ({', '.join(p.name for p in notebooks)}); "
                             "expected one per student folder")
        if notebooks:
            found[sub.name] = notebooks[0]
    if not found:
        raise ValueError(f"{folder}: no submissions; expected DIR/<student>.ipynb or "
                         "DIR/<student>/<notebook>.ipynb")
    return found


def graded_ids(nb) -> list[str]:
    return [cell.metadata["nbgrader"]["grade_id"] for cell in graded_cells(nb)]


def released_ids(course: Path) -> dict:
    """``{assignment: its graded cells' ids}`` of every released assignment of the course."""
    out = {}
    for folder in sorted((course / "release").iterdir()):
        notebooks = sorted(folder.glob("*.ipynb"))
        if notebooks:
            out[folder.name] = graded_ids(nbformat.read(notebooks[0], as_version=4))
    return out


def refusal(path: Path, assignment: str, released: dict) -> str:
    """Why ``path`` cannot be graded as ``assignment`` ("" when it can)."""
    try:
        nb = nbformat.read(path, as_version=4)
    except (ValueError, UnicodeDecodeError) as err:     # not JSON, or JSON that is no notebook
        return f"not a readable notebook ({type(err).__name__}: {str(err).splitlines()[0][:80]}); truncated?"
    ids, wanted = set(graded_ids(nb)), set(released[assignment])
    if wanted <= ids:
        return ""
    other = [name for name, theirs in released.items()
             if name != assignment and theirs and set(theirs) <= ids]
    if other:
        return f"a notebook of {other[0]}, not of {assignment}"
    missing = sorted(wanted - ids)
    return (f"{len(missing)} of {assignment}'s {len(wanted)} graded cells are missing ({missing[0]}, ...): "
            "hand out the notebooks of make student or of release/")


def outcomes(notebook: Path) -> dict:
    """Per graded cell of an autograded notebook: passed, wrong, unanswered or crashed."""
    out = {}
    for cell in graded_cells(nbformat.read(notebook, as_version=4)):
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if not errors:
            out[cell.metadata["nbgrader"]["grade_id"]] = "passed"
            continue
        text = " ".join([errors[0].get("ename", ""), errors[0].get("evalue", "")])
        if errors[0].get("ename") != "AssertionError":
            state = "crashed"
        elif NOT_ANSWERED_MARK in " ".join(text.split()):
            state = "unanswered"
        else:
            state = "wrong"
        out[cell.metadata["nbgrader"]["grade_id"]] = state
    return out


def grade_one(course: Path, assignment: str, student: str, path: Path, env) -> Graded:
    target = course / "submitted" / student / assignment
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    shutil.copyfile(path, target / f"{assignment}.ipynb")
    for done in ("autograded", "feedback"):                 # regrade a student who resubmits
        shutil.rmtree(course / done / student / assignment, ignore_errors=True)
    try:
        nbgrader("autograde", assignment, "--force", f"--student={student}", course=course, env=env)
        nbgrader("generate_feedback", assignment, "--force", f"--student={student}", course=course)
    except RuntimeError as err:
        shutil.rmtree(target, ignore_errors=True)           # it must not block the next run
        last = [line for line in str(err).splitlines() if line.strip()][-1][:120]
        return Graded(student, "not graded", note=f"nbgrader could not grade it: {last}")
    score, most = totals(course, assignment, student)
    found = outcomes(course / "autograded" / student / assignment / f"{assignment}.ipynb")
    return Graded(student, "graded", score, most, found)


def grade_class(course: Path, assignment: str, folder: Path, *, env: dict | None = None) -> list[Graded]:
    """Check, autograde and give feedback to every submission in ``folder``, one at a time."""
    if not (course / "release" / assignment).is_dir():
        raise ValueError(f"{course}: no released assignment {assignment!r}; run `make assignments` "
                         f"(or python -m tools.book.make_assignments --out {course}) first")
    released = released_ids(course)
    results = []
    for student, path in collect(folder).items():
        why = refusal(path, assignment, released)
        if why:
            status = "another assignment" if why.startswith("a notebook of") else "unreadable"
            results.append(Graded(student, status, note=why))
            continue
        results.append(grade_one(course, assignment, student, path, env))
    return results


def totals(course: Path, assignment: str, student: str) -> tuple[float, float]:
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        submitted = gradebook.find_submission(assignment, student)
        return submitted.score, submitted.max_score


def table(results: list[Graded]) -> str:
    """The printed table: one row per student."""
    head = ("student", "score", "passed", "wrong", "unanswered", "crashed", "note")
    rows = []
    for r in results:
        counts = [sum(v == k for v in r.exercises.values())
                  for k in ("passed", "wrong", "unanswered", "crashed")]
        score = f"{r.score:g} / {r.max_score:g}" if r.ok else r.status.upper()
        rows.append((r.student, score, *(map(str, counts) if r.ok else ("-",) * 4), r.note))
    widths = [max(len(str(row[i])) for row in (head, *rows)) for i in range(len(head) - 1)]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(row, widths)) + "  " + row[-1]
                     for row in (head, *rows)).rstrip()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", required=True, help="the section, e.g. 12_1_self_attention")
    parser.add_argument("--submissions", required=True, type=Path, help="the folder of submissions")
    parser.add_argument("--course", type=Path, default=ROOT / "assignments",
                        help="the course folder of make assignments (default: assignments/)")
    parser.add_argument("--profile", default="smoke",
                        help="LABSUPPORT_PROFILE of the kernels (default: smoke)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    older = [p.name for p in (args.course / "submitted").glob("*") if (p / args.assignment).is_dir()]
    results = grade_class(args.course, args.assignment, args.submissions,
                          env={"LABSUPPORT_PROFILE": args.profile})
    seconds = time.perf_counter() - start
    print(table(results))
    others = sorted(set(older) - {r.student for r in results})
    if others:
        print(f"{len(others)} earlier submission(s) of other students in {args.course / 'submitted'} "
              "were left as they were and not graded again")
    failed = [r for r in results if not r.ok]
    print(f"{len(results) - len(failed)} of {len(results)} submissions of {args.assignment} graded in "
          f"{seconds:.0f} s; feedback in {args.course / 'feedback'}"
          + (f"; {len(failed)} could not be graded (see their notes)" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
