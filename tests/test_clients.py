"""The notebooks as students see them: converted by nbconvert, and opened in a real JupyterLab.

Students read the notebooks in JupyterLab, VS Code and Colab, not only in the HTML book:
markdown cells hold only CommonMark, LaTeX and plain HTML, run-dependent sentences are
Markdown outputs of code cells (`labsupport.display.say`), and solutions are folded by cell
metadata. Two checks:

- every chapter notebook, and every student version (`make student`), converted to HTML
  by nbconvert shows no MyST role or directive in its rendered text;
- a notebook opened in JupyterLab (installed from requirements-instructor.txt, started here
  on a loopback port) and driven in headless Chromium (tests/cdp.py) shows an exercise's
  title as a heading, Markdown output rendered, every cell the book hides folded, no raw
  role; a citation followed lands on its reference entry, and its title carries the entry
  (JupyterLab 4 draws a long notebook's markdown lazily: in its default windowing mode the
  list may not be drawn yet when the reader clicks, and the title is what they see then);
- a section's closing line of claims (`labsupport.report.claims_checked`) shows its claims
  folded in a <details> block that opens on a click.

A screenshot goes to $BROWSER_SCREENSHOTS when it is set.

Without Chromium or JupyterLab the second test skips, or fails when REQUIRE_BROWSER=1.
"""
from __future__ import annotations

import html
import json
import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from tools.book.make_student import student_version

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))
REQUIRED = os.environ.get("REQUIRE_BROWSER") == "1"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# What MyST writes and only Jupyter Book renders: a role, a directive fence, a directive option
MYST = re.compile(r"\{[a-z][a-z0-9:-]*\}`|(?:```+|:::+)\s*\{[a-z-]+\}|^\s*:(?:label|nonumber|class|filter|"
                  r"keyprefix|name):", re.M)


def visible_text(page: str) -> str:
    """The text a reader sees in an HTML page: tags, scripts and styles removed."""
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S | re.I)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


@pytest.fixture(scope="module")
def exporter():
    from nbconvert import HTMLExporter

    return HTMLExporter()


@pytest.mark.parametrize("version", ["chapter", "student"])
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_nbconvert_shows_no_myst_markup(path, version, exporter):
    nb = nbformat.read(path, as_version=4)
    if version == "student":
        nb = student_version(nb, path.name)
    body, _ = exporter.from_notebook_node(nb)
    found = sorted({m.group(0).strip() for m in MYST.finditer(visible_text(body))})
    assert not found, f"{path.name} ({version}) shows raw MyST markup in nbconvert's HTML: {found}"


def _unavailable(why: str):
    if REQUIRED:
        pytest.fail(f"REQUIRE_BROWSER=1 but {why}")
    pytest.skip(why)


CLAIMS_NOTEBOOK = "claims.ipynb"      # a closing line of claims_checked, as a notebook shows it


def _claims_notebook(path: Path) -> None:
    """A notebook whose one output is `labsupport.report.claims_checked`'s closing line."""
    from unittest import mock

    from labsupport import display, report

    shown = []
    with mock.patch.object(display, "in_notebook", lambda: True), \
            mock.patch("IPython.display.display", lambda data, raw=False: shown.append(data)):
        saved = dict(report._CLAIMS)
        report.forget_claims()
        try:
            report.claim("every row of weights sums to one", True)
            report.claim("the holiday Monday reads like a weekend", True)
            report.claims_checked(machine="cpu, torch 2.13.0")
        finally:
            report._CLAIMS.clear()
            report._CLAIMS.update(saved)
    cell = nbformat.v4.new_code_cell("claims_checked()", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("display_data", data=shown[0])]
    nb = nbformat.v4.new_notebook(cells=[cell], metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}})
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """A JupyterLab server on a loopback port over a folder holding 12.1 and a notebook with a
    claims block; its URL."""
    if importlib_missing("jupyterlab"):
        _unavailable("JupyterLab is not installed (pip install -r requirements-instructor.txt)")
    home = tmp_path_factory.mktemp("jupyterlab")
    root, settings = home / "root", home / "settings" / "@jupyterlab" / "notebook-extension"
    root.mkdir()
    settings.mkdir(parents=True)
    shutil.copy(NOTEBOOKS[0], root / NOTEBOOKS[0].name)
    _claims_notebook(root / CLAIMS_NOTEBOOK)
    # render every cell, not only those in view (JupyterLab 4 windows long notebooks)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    from labserver import jupyterlab_server

    with jupyterlab_server(root, home) as url:
        yield url


def importlib_missing(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is None


def _browser_path() -> str:
    browser = os.environ.get("CHROMIUM") or next(filter(None, map(shutil.which, BROWSERS)), None)
    if browser is None:
        _unavailable("no Chromium found (tools/ci/install_browser.sh installs it; or set CHROMIUM=path)")
    if importlib_missing("websocket"):
        _unavailable("websocket-client is not installed (requirements-dev.txt)")
    return browser


RENDERED = "document.querySelectorAll('.jp-MarkdownCell .jp-RenderedMarkdown').length > 3"


def _open(page, jupyterlab: str, name: str, ready: str = RENDERED) -> None:
    """Open ``name`` in JupyterLab with a fresh workspace (no tab of an earlier page restored)."""
    page.goto(f"{jupyterlab}/lab/tree/{name}?reset", ready=ready, seconds=90)
    page.pump(2)


def test_a_notebook_reads_in_jupyterlab_as_in_the_book(jupyterlab):
    from cdp import Browser

    book = nbformat.read(NOTEBOOKS[0], as_version=4)
    with Browser(_browser_path(), height=1800) as page:
        _open(page, jupyterlab, NOTEBOOKS[0].name)
        dom = page.evaluate("document.documentElement.outerHTML")
        assert "jp-Notebook" in dom, "JupyterLab did not render the notebook (no jp-Notebook in the DOM)"
        # an exercise's title is a heading of rendered markdown
        title = next(m.group(1) for c in book.cells if c.cell_type == "markdown"
                     for m in [re.search(r"^### (Exercise 12\.1\.1: [^\n]+)", c.source, re.M)] if m)
        headings = [visible_text(h).strip() for h in re.findall(r"<h3\b[^>]*>(.*?)</h3>", dom, re.S)]
        assert any(h.startswith(title) for h in headings), f"no heading {title!r} in JupyterLab's rendering"
        # a run-dependent sentence, if the section has one, is rendered Markdown output
        sentences = [o["data"]["text/markdown"] for c in book.cells if c.cell_type == "code"
                     for o in c.outputs if "text/markdown" in o.get("data", {}) and "|" not in
                     o["data"]["text/markdown"]]
        outputs = re.findall(r'data-mime-type="text/markdown"[^>]*>(.*?)</div>', dom, re.S)
        for sentence in sentences[:1]:
            assert any(sentence[:40] in visible_text(o) for o in outputs), \
                "a Markdown output is not rendered as Markdown"
        # every cell the book hides is folded: a placeholder for each collapsed input
        hidden = sum(bool(c.metadata.get("jupyter", {}).get("source_hidden")) for c in book.cells)
        solutions = sum("### BEGIN SOLUTION" in c.source for c in book.cells)
        assert page.evaluate("document.querySelectorAll('.jp-InputPlaceholder').length") >= hidden \
            >= solutions >= 2, "the cells the book hides are not folded"
        found = sorted({m.group(0).strip() for m in MYST.finditer(visible_text(dom))})
        assert not found, f"raw MyST markup visible in JupyterLab: {found}"
        _follow_a_citation(page, book)
        shots = os.environ.get("BROWSER_SCREENSHOTS")
        if shots:
            Path(shots).mkdir(parents=True, exist_ok=True)
            page.screenshot(Path(shots) / "jupyterlab_12_1_citation.png")


def _follow_a_citation(page, book) -> None:
    """Follow the first citation as a reader's click does; its reference entry must be there to
    land on and come into view, and the citation's title must carry the entry."""
    key = re.search(r'<a href="#ref-([^"]+)"', next(c.source for c in book.cells if c.cell_type == "markdown"
                                                   and '<a href="#ref-' in c.source))[1]
    title = page.evaluate(f"document.querySelector('.jp-RenderedMarkdown a[href=\"#ref-{key}\"]').title")
    entry = next(line for c in book.cells if c.cell_type == "markdown"
                 for line in c.source.splitlines() if line.startswith(f'<a id="ref-{key}"></a>'))
    assert title and title.split(" (")[0] in entry, f"citation {key}: its title does not carry the entry"
    target = f"document.querySelector('[data-jupyter-id=\"ref-{key}\"]')"
    assert page.evaluate(f"{target} !== null"), f"no reference entry ref-{key} for the citation to land on"
    in_view = (f"(() => {{ const r = {target}.getBoundingClientRect(); "
               "return r.top >= 0 && r.top < window.innerHeight; })()")
    assert not page.evaluate(in_view), "the entry was in view before the citation was followed"
    page.evaluate(f"document.querySelector('.jp-RenderedMarkdown a[href=\"#ref-{key}\"]').click()")
    page.wait_for(in_view, seconds=10)


def test_the_claims_block_is_folded_in_jupyterlab(jupyterlab):
    from cdp import Browser

    with Browser(_browser_path()) as page:
        _open(page, jupyterlab, CLAIMS_NOTEBOOK,
              ready="document.querySelector('.jp-OutputArea-output') !== null")
        page.wait_for("document.querySelector('.jp-OutputArea-output details summary') !== null")
        line = page.evaluate("document.querySelector('.jp-OutputArea-output strong').innerText")
        assert line.startswith("2 claims of this section checked on this machine"), line
        assert page.evaluate("document.querySelector('.jp-OutputArea-output details').open") is False
        assert page.evaluate("document.querySelectorAll('.jp-OutputArea-output details li').length") == 2
        listed = "document.querySelector('.jp-OutputArea-output details li').checkVisibility()"
        assert page.evaluate(listed) is False, "the claims are not folded"
        page.evaluate("document.querySelector('.jp-OutputArea-output details summary').click()")
        assert page.wait_for(listed), "the claims do not unfold"
