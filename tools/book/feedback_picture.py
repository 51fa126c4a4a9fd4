"""Regenerate the picture of nbgrader's feedback on the instructor page from a real feedback file.

    python -m tools.book.feedback_picture          # -> _static/nbgrader_feedback.png

It writes a course of 12.1 in a temporary folder (tools/book/make_assignments.py), submits
the book's solutions with three answers replaced (exercise 1 without the 1 / sqrt(d)
scaling, exercise 3 calling the book's reference, exercise 5 forgetting the heads),
autogrades it with ``LABSUPPORT_PROFILE=smoke`` and writes its feedback. The picture is
that feedback page, rendered by headless Chromium (tools/ci/install_browser.sh installs
it), from the top (the score and one line per graded cell) to the end of exercise 12.1.3,
with the reading part of the notebook and the last two exercises cut out of a copy of the
page (a dashed line marks each cut). Needs nbgrader (requirements-instructor.txt), Chromium and Pillow.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from tools.book.make_assignments import ROOT, answered, exercises, nbgrader, solution_code, write_course

SECTION = ROOT / "chapters" / "12_1_self_attention.ipynb"
OUT = ROOT / "_static" / "nbgrader_feedback.png"
WIDTH = 1100
ANSWERS = {    # exercise number: the student's code instead of the book's solution
    1: "scores = q @ k.transpose(-2, -1)          # not scaled by 1 / sqrt(d)\n"
       "return scores.softmax(dim=-1)",
    3: "from labsupport.checks import reference\n"
       "return reference.score_matrix_bytes(batch, heads, length, dtype)",
    5: "return (2 * batch * length * length + batch * length * head_dim) * 4   # the heads forgotten",
}
CUT = ('<div style="border-top: 3px dashed #888; margin: 24px 0; text-align: center; color: #888; '
       'font: 14px sans-serif">{}, cut out of this picture</div>')
HIDE = "<style>.celltag_reading { display: none; }</style>"


def submission(course: Path):
    """The release of 12.1 answered: the book's solutions, but ``ANSWERS`` where given."""
    book = nbformat.read(SECTION, as_version=4)
    release = nbformat.read(course / "release" / SECTION.stem / SECTION.name, as_version=4)
    codes = {}
    for number, (solution, _, _) in enumerate(exercises(book, SECTION.name), start=1):
        cell = book.cells[solution]
        codes[cell.metadata["nbgrader"]["grade_id"]] = ANSWERS.get(number, solution_code(cell.source))
    for cell in release.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in codes:
            cell.source = answered(cell.source, codes[grade_id])
    return release


def feedback(course: Path) -> Path:
    """Autograde the submission of student ``student`` and return its feedback page."""
    folder = course / "submitted" / "student" / SECTION.stem
    folder.mkdir(parents=True)
    nbformat.write(submission(course), folder / SECTION.name)
    nbgrader("autograde", SECTION.stem, course=course, env={"LABSUPPORT_PROFILE": "smoke"})
    nbgrader("generate_feedback", SECTION.stem, course=course)
    return course / "feedback" / "student" / SECTION.stem / f"{SECTION.stem}.html"


def trimmed(page: str) -> str:
    """The page from its top to the end of exercise 12.1.3: the cells before the Exercises
    heading and those from exercise 12.1.4 on cut out, each cut marked."""
    page = page.replace("</head>", HIDE + "</head>", 1)
    starts = [m.start() for m in re.finditer(r'<div class="cell border-box-sizing', page)]
    first_kept = max(s for s in starts if s < page.index('id="Exercises"'))
    first_cut = max(s for s in starts if s < page.index('id="Exercise-12.1.4'))
    return (page[:starts[0]] + CUT.format("the reading part of the notebook") + page[first_kept:first_cut]
            + CUT.format("exercises 12.1.4 and 12.1.5") + '<div style="display: none">' + page[first_cut:])


def browser() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(name):
            return shutil.which(name)
    raise RuntimeError("no Chromium on the PATH: run tools/ci/install_browser.sh")


def screenshot(html: Path, png: Path, height: int) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([browser(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={profile}", f"--window-size={WIDTH},{height}",
                        f"--screenshot={png}", html.as_uri()], check=True, capture_output=True, timeout=120)


def crop(png: Path) -> None:
    """Cut the blank space below the page's content; 64 colours keep the text sharp and the
    file small."""
    from PIL import Image, ImageChops
    image = Image.open(png).convert("RGB")
    blank = Image.new("RGB", image.size, image.getpixel((image.width - 1, image.height - 1)))
    box = ImageChops.difference(image, blank).getbbox()
    if box:
        image = image.crop((0, 0, image.width, min(image.height, box[3] + 24)))
    image.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(png, optimize=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT,
                        help=f"the picture (default: {OUT.relative_to(ROOT)})")
    parser.add_argument("--height", type=int, default=3000, help="the browser window's height in pixels")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        course = Path(tmp) / "course"
        write_course(course, [SECTION])
        page = feedback(course)
        cut = page.with_name("picture.html")
        cut.write_text(trimmed(page.read_text()))
        screenshot(cut, args.out, args.height)
    crop(args.out)
    print(f"{args.out}: the feedback of a 12.1 submission, from a real nbgrader feedback page")
    return 0


if __name__ == "__main__":
    sys.exit(main())
