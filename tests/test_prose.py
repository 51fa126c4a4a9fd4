"""Prose never types a figure or a ranking of one run (the evidence rules).

The book is rebuilt from whichever execution produced it (a laptop, the GPU runner,
Colab), so a sentence that copies a number from one run can contradict the table
beside it. A run-dependent statement comes from the notebook's own values: a code
cell's Markdown output (``labsupport.display.say``) or print. This test reads every piece of
text a reader sees that an author typed (markdown cells, and the captions and alt
text in code cells' ``mystnb`` metadata) and flags two things:

1. **A typed figure of the run**: a decimal (``0.42``), a percentage (``12%``), a
   ratio (``x1.74``, ``7x``) or a number with a unit (``268 MB``, ``180 ms``) that
   equals, at the precision it is written with, a number in an output that nbval does
   not compare: a cell tagged ``nbval-ignore-output`` or ``nbval-skip``, or a part of a
   checked output that tests/nbval_sanitize.cfg masks (durations, progress bars).
   Those outputs are the ones allowed to differ between devices and profiles; a number
   nbval does compare is equal on every device (the GPU runner checks it), so typing
   it is safe. Integers without a unit, percent sign or ``x`` are not figures here:
   they are sizes of the task (336 hours, 27 tokens), dates and counts.
2. **A phrase that describes one run** (``in the run shown``, ``this run's``): wording
   that is only true of the execution the author looked at; write "the table above".
   And an **outcome typed as a fact** (``came out ahead``, ``was the most accurate``)
   unless its clause glues whom it is about (a ``{glue:text}`` role, which the
   notebooks no longer use: tests/test_clients.py forbids MyST roles; such a sentence
   is a say() cell now).

What is not read: ``{glue:...}`` roles (glued values are the point), every other role
(citations, cross-references: keys, not prose), inline code, fenced code, directive
options other than ``:alt:``, HTML comments, link targets, and the chapter's own
section and exercise numbers (12.1-12.5, 12.4.2), which are references, not figures.
Math is read: an exponent or an error typed as ``$1.97$`` is still a typed figure,
and the formulas' own constants do not collide with unchecked outputs in practice
(the allow-list holds the exceptions).

A number that truly holds on every device but also appears among unchecked outputs
(a formula's value, a constant of the data set) goes into ALLOWED with its reason.

    python tests/test_prose.py chapters/*.ipynb      # list what a notebook would fail on
"""
from __future__ import annotations

import configparser
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))
SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"
UNCHECKED_TAGS = {"nbval-ignore-output", "nbval-skip"}
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

# Wording that is only true of one execution. Lower case; matched on word boundaries.
RUN_PHRASES = ("in the run shown", "run shown here", "this run's", "in this run", "in our run")
# An outcome stated as a fact: flagged unless the clause glues who it is about
# ("{glue:text}`lab_best` was the most accurate" reads true after any run).
OUTCOME_PHRASES = ("came out ahead", "come out ahead", "comes out ahead", "was the most accurate",
                   "were the most accurate", "came first", "came second", "came last")
GLUED = "\u27e8glued\u27e9"           # what a {glue:...} role reads as here

# (notebook stem, text as flagged) -> why it holds on every device. Keep it short; a
# test fails when an entry is no longer needed.
ALLOWED: dict[tuple[str, str], str] = {}

NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
UNITS = {"ms": "ms", "µs": "us", "us": "us", "ns": "ns", "s": "s", "seconds": "s",
         "second": "s", "min": "min", "minutes": "min", "B": "B", "kB": "kB", "KB": "kB",
         "MB": "MB", "GB": "GB", "TB": "TB", "MW": "MW", "GFLOP/s": "GFLOP/s",
         "TFLOP/s": "TFLOP/s"}
UNIT = "|".join(sorted(map(re.escape, UNITS), key=len, reverse=True))
# 12.1 ... 12.5 and 12.4.2 name sections and exercises; "12.3%" or "12.4 ms" are figures.
SECTION_NUMBER = re.compile(rf"(?<![\d.])12\.[1-5](?:\.\d+)?(?!\.?\d|\s?(?:%|[x×]\b|(?:{UNIT})\b))")
# A figure in prose: a ratio before (x1.74) or after (1.74x), a percentage, a number
# with a unit, or a decimal. Group "value" holds the number.
FIGURE = re.compile(
    rf"(?<![\w.,])(?:[x×]\s?(?P<pre>{NUMBER})(?![\w.])"
    rf"|(?P<value>{NUMBER})(?:\s?(?P<ratio>[x×])(?!\w)|\s?(?P<pct>%|percent\b)"
    rf"|\s?(?P<unit>{UNIT})(?![\w/])|(?![\w.,]\d)))")
OUTPUT_NUMBER = re.compile(rf"(?<![\w.])(?:{NUMBER})(?:[eE][+-]?\d+)?(?!\.\d)"
                           rf"(?:\s?(?P<unit>{UNIT}|%|[x×])(?![\w/]))?")


@dataclass(frozen=True)
class Finding:
    cell: int          # index in nb.cells
    where: str         # "markdown", "caption", "alt text"
    text: str          # what was flagged, as written
    why: str

    def __str__(self) -> str:
        return f"cell {self.cell} ({self.where}): {self.text!r}: {self.why}"


# --- what an author typed ---------------------------------------------------------------

def typed_text(nb) -> list[tuple[int, str, str]]:
    """(cell index, where, text) for every piece of typed text a reader sees."""
    pieces = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            pieces.append((i, "markdown", readable(cell.source)))
        elif cell.cell_type == "code":
            meta = cell.metadata.get("mystnb", {})
            caption = meta.get("figure", {}).get("caption")
            alt = meta.get("image", {}).get("alt")
            pieces += [(i, where, readable(text)) for where, text in
                       (("caption", caption), ("alt text", alt)) if text]
    return pieces


def readable(markdown: str) -> str:
    """The words of a markdown cell: without code, roles, comments, link targets,
    directive options (but ``:alt:``) and the chapter's section numbers."""
    text = re.sub(r"<!--.*?-->", " ", markdown, flags=re.S)
    text = re.sub(r"^(`{3,}|~{3,})(?!\{)[^\n]*\n.*?^\1[ \t]*$", " ", text, flags=re.S | re.M)
    text = re.sub(r"^(`{3,}|~{3,})\{[^}\n]*\}[^\n]*$", " ", text, flags=re.M)   # directive line
    text = re.sub(r"^[`~]{3,}[ \t]*$", " ", text, flags=re.M)                   # closing fence
    text = re.sub(r"^:(?!alt:)[\w-]+:.*$", " ", text, flags=re.M)                 # options
    text = re.sub(r"^:alt:", " ", text, flags=re.M)
    text = re.sub(r"\{glue(?::\w*)?\}`[^`]*`", f" {GLUED} ", text)                 # glued values
    text = re.sub(r"\{[\w:+-]+\}`[^`]*`", " ", text)                            # other roles
    text = re.sub(r"(`+)(?!\{).+?\1", " ", text, flags=re.S)                     # inline code
    text = re.sub(r"(!?\[[^\]]*\])\([^)]*\)", r"\1", text)                       # link targets
    return SECTION_NUMBER.sub(" ", text)


# --- what the run printed and nbval does not compare -----------------------------------

def sanitizer_patterns(path: Path = SANITIZE) -> list[re.Pattern]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(path)
    return [re.compile(parser[s]["regex"]) for s in parser.sections()]


def unchecked_outputs(nb, patterns=None) -> list[str]:
    """Output texts that may differ between runs: those of ignored cells, and the
    parts of checked outputs that the nbval sanitizer masks."""
    patterns = sanitizer_patterns() if patterns is None else patterns
    texts = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        ignored = bool(UNCHECKED_TAGS & set(cell.metadata.get("tags", [])))
        for text in _output_texts(cell):
            if ignored:
                texts.append(text)
            else:
                texts += [m.group(0) for p in patterns for m in p.finditer(text)]
    return texts


def _output_texts(cell) -> list[str]:
    """What a cell's outputs say in text. A figure's or a widget's text/plain
    (``<Figure size 640x480 with 2 Axes>``) is not what a reader sees: skipped."""
    texts = []
    for out in cell.get("outputs", []):
        if "text" in out:
            texts.append(out.text)
        data = out.get("data", {})
        if any(m.startswith("image/") or m == WIDGET_VIEW for m in data):
            continue
        for mime, value in data.items():
            if mime.startswith(("text/", "application/papermill.record/text/")):
                texts.append(value if isinstance(value, str) else "".join(value))
    return texts


def output_numbers(texts: list[str]) -> list[tuple[float, str]]:
    """(value, unit) for every number in ``texts``; unit "" when none follows."""
    found = []
    for text in texts:
        for m in OUTPUT_NUMBER.finditer(text):
            number = m.group(0)[: m.start("unit") - m.start()] if m.group("unit") else m.group(0)
            found.append((float(number.strip().replace(",", "")), _unit(m.group("unit"))))
    return found


def _unit(symbol: str | None) -> str:
    if symbol in ("x", "×"):
        return "x"
    return UNITS.get(symbol, symbol or "")


# --- the check ------------------------------------------------------------------------------

def prose_findings(nb, *, allowed: dict | None = None, stem: str = "") -> list[Finding]:
    """Every typed figure of the run and every one-run phrase in ``nb``'s prose."""
    allowed = ALLOWED if allowed is None else allowed
    numbers = output_numbers(unchecked_outputs(nb))
    findings = []
    for cell, where, text in typed_text(nb):
        for m in FIGURE.finditer(text):
            why = _figure_of_the_run(m, numbers)
            if why:
                findings.append(Finding(cell, where, m.group(0).strip(), why))
        lowered = " ".join(text.lower().split())
        for phrase in RUN_PHRASES + OUTCOME_PHRASES:
            for m in re.finditer(rf"(?<!\w){re.escape(phrase)}(?![\w'’])", lowered):
                clause = re.split(r"[.;:,!?]", lowered[:m.start()])[-1]
                if phrase in RUN_PHRASES:
                    findings.append(Finding(cell, where, phrase, "describes one run"))
                elif GLUED not in clause:
                    findings.append(Finding(cell, where, phrase, "one run's outcome: say() it"))
    return [f for f in findings if (stem, f.text) not in allowed]


def _figure_of_the_run(m: re.Match, numbers) -> str | None:
    """Why the figure matched by FIGURE is one of the run's, or None.

    At the precision written: ``0.42`` matches 0.4213, ``12%`` matches 12.3 %. A
    whole-number ratio, percentage or quantity (``4x``, ``30%``, ``268 MB``) matches
    only an output printed with the same symbol or unit; a decimal matches any number
    (a percentage with decimals also a fraction, 0.1234 for ``12.3%``)."""
    written = m.group("pre") or m.group("value")
    decimals = len(written.partition(".")[2])
    if m.group("pre") or m.group("ratio"):
        kind, symbols = "ratio", ("x",) if decimals == 0 else ("x", "")
    elif m.group("pct"):
        kind, symbols = "percentage", ("%",)
    elif m.group("unit"):
        kind, symbols = f"number in {UNITS[m.group('unit')]}", (UNITS[m.group("unit")],)
    elif decimals:
        kind, symbols = "decimal", None
    else:
        return None                              # a bare integer: a size, a date, a count
    candidates = [u for u, unit in numbers if symbols is None or unit in symbols]
    if kind == "percentage" and decimals:
        candidates += [100 * u for u, unit in numbers if unit == "" and abs(u) <= 1]
    target = f"{float(written.replace(',', '')):.{decimals}f}"
    for u in candidates:
        if f"{u:.{decimals}f}" == target:
            return f"a {kind} that an unchecked output prints ({u:g}): say() it or print it"
    return None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_prose_types_no_figure_of_the_run(path):
    findings = prose_findings(nbformat.read(path, as_version=4), stem=path.stem)
    assert not findings, "run-dependent prose (say() it, print it, or reword):\n" + \
        "\n".join(map(str, findings))


def main(paths: list[str]) -> int:
    failed = 0
    for path in map(Path, paths):
        findings = prose_findings(nbformat.read(path, as_version=4), stem=path.stem)
        failed += bool(findings)
        print(f"{path.name}: {len(findings)} finding(s)")
        for f in findings:
            print(f"  {f}")
    return int(failed > 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or [str(p) for p in NOTEBOOKS]))


# --- the check itself can fail: synthetic notebooks -----------------------------------------

def synthetic(tmp_path, markdown, output, *, tags=("nbval-ignore-output",), metadata=None):
    """A two-cell notebook, written and read back: ``markdown``, then a code cell that
    printed ``output`` (tagged ``tags``, with extra cell ``metadata``)."""
    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell("print(result)", execution_count=1,
                                     metadata={"tags": list(tags), **(metadata or {})})
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text=output)]
    nb.cells = [nbformat.v4.new_markdown_cell(markdown), code]
    path = tmp_path / "synthetic.ipynb"
    nbformat.write(nb, path)
    return nbformat.read(path, as_version=4)


def flagged(nb, allowed=None) -> list[str]:
    return [f.text for f in prose_findings(nb, allowed=allowed or {}, stem="synthetic")]


def test_a_typed_figure_of_an_ignored_output_is_caught(tmp_path):
    nb = synthetic(tmp_path, "The forecaster reached a test MSE of 0.42.", "test MSE 0.4213\n")
    [finding] = prose_findings(nb, allowed={})
    assert (finding.cell, finding.where, finding.text) == (0, "markdown", "0.42")
    assert "0.4213" in finding.why
    with pytest.raises(AssertionError, match="0.42"):
        assert not [str(f) for f in prose_findings(nb, allowed={})], "; ".join(map(str, [finding]))


def test_the_same_figure_glued_passes(tmp_path):
    nb = synthetic(tmp_path, "The forecaster reached a test MSE of {glue:text}`lab_mse:.2f`.",
                   "test MSE 0.4213\n")
    assert flagged(nb) == []


def test_a_figure_that_nbval_checks_is_equal_on_every_device(tmp_path):
    nb = synthetic(tmp_path, "The error stays below 0.42.", "max error 0.4213\n", tags=())
    assert flagged(nb) == []


def test_what_the_sanitizer_masks_in_a_checked_output_counts_as_unchecked(tmp_path):
    nb = synthetic(tmp_path, "Training took 1.74 s here.", "trained in 1.74 s\n", tags=())
    assert flagged(nb) == ["1.74 s"]


@pytest.mark.parametrize("prose, output, expected", [
    ("linear attention loses 12% of the accuracy", "loss +12.3 %", ["12%"]),
    ("it loses 12.3% of the accuracy", "relative loss 0.1234", ["12.3%"]),
    ("fused attention is x1.74 faster", "speed-up 1.7412", ["x1.74"]),
    ("and needs 7x less memory", "memory 7.2x smaller", ["7x"]),
    ("the naive kernel peaks at 268 MB", "268.4 MB", ["268 MB"]),
    ("a time exponent of 1.97", "time exponent 1.9713", ["1.97"]),
    ("drop 30% of the hours", "fraction kept 0.30", []),     # a whole percentage: only '%' outputs
    ("the encoder reads 27 tokens", "tokens 27", []),        # bare integers are sizes
    ("an MSE of 0.42", "MSE 0.4251", []),                    # 0.43 at the precision written
], ids=["percent", "percent-of-fraction", "ratio-before", "ratio-after", "unit", "decimal",
        "whole-percent-vs-fraction", "integer", "other-rounding"])
def test_figures_are_compared_at_the_precision_written(tmp_path, prose, output, expected):
    assert flagged(synthetic(tmp_path, prose, output)) == expected


def test_phrases_that_describe_one_run(tmp_path):
    prose = ("In the run shown here the linear model came out ahead; this run's table "
             "agrees. Read the table above: it comes from whichever run built the page.")
    assert sorted(flagged(synthetic(tmp_path, prose, "nothing\n"))) == \
        ["came out ahead", "in the run shown", "run shown here", "this run's"]


def test_an_outcome_reads_true_when_its_subject_is_glued(tmp_path):
    glued = ("The {glue:text}`lab_best` model was the most accurate, and the patch "
             "Transformer came out {glue:text}`lab_patch_vs_linear` of the linear one.")
    assert flagged(synthetic(tmp_path, glued, "nothing\n")) == []
    typed = "The {glue:text}`lab_best` model led; DLinear was the most accurate."
    assert flagged(synthetic(tmp_path, typed, "nothing\n")) == ["was the most accurate"]


def test_code_roles_links_comments_and_section_numbers_are_not_prose(tmp_path):
    prose = ("Call `fit(lr=0.42)`; see {cite:p}`s1-x2020` and {numref}`fig-0.42`, "
             "[the notes](notes-0.42.md), Section 12.4 and Exercise 12.4.2.\n"
             "<!-- measured 0.42 on my laptop -->\n\n```python\nloss = 0.42\n```\n")
    assert flagged(synthetic(tmp_path, prose, "0.42 12.4 12.4.2\n")) == []


def test_math_captions_and_alt_text_are_read(tmp_path):
    meta = {"mystnb": {"figure": {"caption": "Error 0.42 at the longest length."},
                       "image": {"alt": "A curve that ends at 0.42."}}}
    nb = synthetic(tmp_path, "The fitted slope is $p = 1.97$.", "slope 1.9713, error 0.4213",
                   metadata=meta)
    assert [(f.where, f.text) for f in prose_findings(nb, allowed={})] == \
        [("markdown", "1.97"), ("caption", "0.42"), ("alt text", "0.42")]


def test_the_allow_list_takes_a_constant_that_holds_everywhere(tmp_path):
    nb = synthetic(tmp_path, "One matrix at L = 8192 takes 268 MB.", "model 268.4 MB")
    assert flagged(nb) == ["268 MB"]
    assert flagged(nb, allowed={("synthetic", "268 MB"): "8192^2 x 4 bytes"}) == []


@pytest.mark.parametrize("key", sorted(ALLOWED), ids=lambda k: f"{k[0]}:{k[1]}")
def test_every_allowed_entry_is_needed_and_says_why(key):
    stem, text = key
    assert len(ALLOWED[key].split()) >= 4, "give the reason the number holds on every device"
    nb = nbformat.read(ROOT / "chapters" / f"{stem}.ipynb", as_version=4)
    assert text in [f.text for f in prose_findings(nb, allowed={})], \
        f"{stem} no longer types {text!r}: remove it from ALLOWED"
