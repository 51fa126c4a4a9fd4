"""Autograde a folder of submissions of one section, write their feedback, print the scores.

    make assignments                                   # once: the course in assignments/
    python -m tools.book.grade_class --assignment 12_1_self_attention --submissions DIR

``DIR`` holds one notebook per student, either ``DIR/<student>.ipynb`` or
``DIR/<student>/<anything>.ipynb``. Each is copied to
``<course>/submitted/<student>/<assignment>/<assignment>.ipynb`` (replacing an earlier
submission of that student), autograded (the cells no exercise needs are skipped:
tools/book/book_autograde.py), given feedback in ``<course>/feedback/<student>/<assignment>/``,
and its score read from the course's gradebook (``gradebook.db``). The kernels run with
``LABSUPPORT_PROFILE=smoke`` unless ``--profile`` says otherwise: no check depends on
training, and the reading cells that train are skipped anyway. It prints one line per
student and the time per submission.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from tools.book.make_assignments import ROOT, nbgrader


def collect(folder: Path) -> dict:
    """``{student: notebook path}`` from ``folder`` (see the module docstring)."""
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


def grade_class(course: Path, assignment: str, folder: Path, *, env: dict | None = None) -> dict:
    """Autograde and give feedback to every submission in ``folder``; return
    ``{student: (score, max score)}`` from the gradebook."""
    if not (course / "release" / assignment).is_dir():
        raise ValueError(f"{course}: no released assignment {assignment!r}; run `make assignments` "
                         f"(or python -m tools.book.make_assignments --out {course}) first")
    students = collect(folder)
    for student, path in students.items():
        target = course / "submitted" / student / assignment
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target / f"{assignment}.ipynb")
        for done in ("autograded", "feedback"):             # regrade a student who resubmits
            shutil.rmtree(course / done / student / assignment, ignore_errors=True)
    nbgrader("autograde", assignment, course=course, env=env)
    nbgrader("generate_feedback", assignment, course=course)
    return {student: totals(course, assignment, student) for student in students}


def totals(course: Path, assignment: str, student: str) -> tuple[float, float]:
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        submitted = gradebook.find_submission(assignment, student)
        return submitted.score, submitted.max_score


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
    scores = grade_class(args.course, args.assignment, args.submissions,
                         env={"LABSUPPORT_PROFILE": args.profile})
    seconds = time.perf_counter() - start
    for student, (score, most) in scores.items():
        print(f"{student}: {score:g} / {most:g}")
    print(f"{len(scores)} submissions of {args.assignment} graded in {seconds:.0f} s "
          f"({seconds / len(scores):.1f} s each); feedback in {args.course / 'feedback'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
