"""The HTML book builds with warnings as errors (-W -n), from the committed outputs.

nbval has just re-executed every notebook and compared it with those outputs, so this
build renders them without executing a second time. The build is conftest.py's
``book_html``, made once per session and shared with tests/test_browser.py.
"""
import re

import pytest

from helpers import ROOT, toc_files

pytestmark = pytest.mark.slow


def visible(html: str) -> str:
    """The page without <script> and <style> blocks (widget views live in scripts)."""
    return re.sub(r"<(script|style)\b.*?</\1>", "", html, flags=re.S)


def test_every_page_is_rendered_without_errors(book_html):
    for name in toc_files():
        page = book_html / f"{name}.html"
        assert page.is_file(), f"{page} missing"
        text = visible(page.read_text())
        assert "Traceback (most recent call last)" not in text, f"{name}: a traceback is visible"
        assert "model_id" not in text, f"{name}: raw widget JSON is visible"


def test_notebook_pages_have_colab_and_download_buttons(book_html):
    for name in toc_files():
        if not name.startswith("chapters/"):
            continue
        html = (book_html / f"{name}.html").read_text()
        assert "colab.research.google.com/github/" in html and f"{name}.ipynb" in html, name
        assert f"_sources/{name}.ipynb" in html, f"{name}: no download link"


def test_bibliography_is_rendered(book_html):
    html = (book_html / "chapters" / "12_1_self_attention.html").read_text().lower()
    assert "attention is all you need" in html and "a time series is worth 64 words" in html


def test_the_provenance_page_has_a_row_per_notebook(book_html):
    """provenance.md: one row per notebook, in the book's order, each with its record
    or "not recorded" (labsupport.sphinx_provenance); the build above had -W."""
    from labsupport.sphinx_provenance import COLUMNS

    html = (book_html / "provenance.html").read_text()
    cells = r"<t[hd][^>]*>(.*?)</t[hd]>"
    rows = [[" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in re.findall(cells, r, re.S)]
            for r in re.findall(r"<tr[^>]*>(.*?)</tr>", html, re.S)]
    assert rows[0] == list(COLUMNS)
    notebooks = [name for name in toc_files() if name.startswith("chapters/")]
    [table] = re.findall(r"<table.*?</table>", html, re.S)
    assert re.findall(r'href="([^"#]+)\.html"', table) == notebooks
    assert len(rows) == 1 + len(notebooks)
    for row in rows[1:]:
        assert len(row) == len(COLUMNS) and (row[1] == "not recorded" or row[4] in ("cpu", "gpu")), row


def test_the_setup_cell_is_hidden_in_the_html(book_html):
    """Boilerplate to a reader (tag remove-input); the notebook keeps it (test_notebooks.py)."""
    for name in toc_files():
        if name.startswith("chapters/"):
            html = visible((book_html / f"{name}.html").read_text())
            assert "Setup: on Colab" not in html and "google.colab" not in html, name


def _outside_code(html: str) -> str:
    """The page's visible text outside code listings (<pre> blocks), tags removed."""
    text = re.sub(r"<pre\b.*?</pre>", " ", visible(html), flags=re.S)
    return re.sub(r"<[^>]+>", " ", text)


def test_markdown_outputs_are_rendered_as_myst(book_html):
    """say() and display.table() write Markdown outputs with tables and $math$; the book
    renders them (nb_render_markdown_format: myst in _config.yml), so no pipe table or
    dollar sign of theirs is left as raw text on a page."""
    import nbformat

    for name in toc_files():
        if not name.startswith("chapters/"):
            continue
        nb = nbformat.read(ROOT / f"{name}.ipynb", as_version=4)
        said = [o["data"]["text/markdown"] for c in nb.cells if c.cell_type == "code"
                for o in c.get("outputs", []) if "text/markdown" in o.get("data", {})]
        text = _outside_code((book_html / f"{name}.html").read_text())
        tables = [s for s in said if re.search(r"^\|[\s:|-]*---", s, re.M)]
        assert not re.search(r"\|\s*:?-{3,}", text), f"{name}: a Markdown table is shown as raw text"
        assert not re.search(r"\$[^$\s][^$\n]*\$", text), f"{name}: $math$ is shown as raw text"
        assert (book_html / f"{name}.html").read_text().count("<table") >= len(tables), name


def test_links_to_the_books_own_documents_stay_in_the_book(book_html):
    """A notebook links another section by its Colab address and a page by its GitHub address
    (labsupport.links), which work in every client; in the HTML book labsupport.sphinx_links
    points them at the book's own pages. The launch buttons in the page header stay on Colab."""
    from labsupport.links import COLAB, REPOSITORY
    from labsupport.sphinx_links import docname_of

    docs = set(toc_files())
    inside = 0
    for name in toc_files():
        html = (book_html / f"{name}.html").read_text()
        article = re.search(r"<article\b.*?</article>", html, re.S)
        assert article, f"{name}: no <article> in the page"
        for href in re.findall(r'<a [^>]*href="([^"]+)"', article.group(0)):
            assert docname_of(href, docs) is None, f"{name}: {href} should point at the book's own page"
            inside += not href.startswith(("http", "#", "mailto"))
        for href in re.findall(r'href="((?:%s|%s)[^"]*)"' % (re.escape(REPOSITORY), re.escape(COLAB)),
                               article.group(0)):
            assert docname_of(href, docs) is None, href
    page = (book_html / "chapters" / "12_4_long_sequences.html").read_text()
    assert 'href="12_1_self_attention.html"' in page, "12.4's link to 12.1 is not a link inside the book"
    assert inside > 0
