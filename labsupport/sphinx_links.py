"""A Sphinx extension: links to this repository's own documents become links to the book's pages.

Notebooks are read in Colab and JupyterLab as well as in the book, so a link from one
document to another is absolute (`labsupport.links`): a section's Colab address, a page's
GitHub address. In the HTML book such a link should stay inside the book, offline too:
after Sphinx resolves a page, every reference whose address is the Colab or GitHub address
of a document the book holds is pointed at that document's page (its anchor kept). A link
to a file the book does not hold is left as it is. Listed in _config.yml
(``sphinx.extra_extensions``).
"""
from __future__ import annotations

import re
from pathlib import PurePosixPath

from docutils import nodes

from .links import BRANCH, COLAB, REPOSITORY

_PATH = REPOSITORY.removeprefix("https://github.com/")
ADDRESS = re.compile(rf"^(?:{re.escape(COLAB + _PATH)}|{re.escape(REPOSITORY)})/blob/{re.escape(BRANCH)}/"
                     r"(?P<path>[^#?]+)(?P<anchor>#.*)?$")


def docname_of(address: str, found_docs) -> tuple[str, str] | None:
    """(docname, anchor) of a repository address whose file is a document of the book, else None."""
    match = ADDRESS.match(address)
    if match is None:
        return None
    path = PurePosixPath(match["path"])
    docname = str(path.with_suffix("")) if path.suffix in (".ipynb", ".md") else None
    if docname not in found_docs:
        return None
    return docname, match["anchor"] or ""


def _point_inside(app, doctree, fromdocname) -> None:
    if app.builder.format != "html":
        return
    for ref in doctree.findall(nodes.reference):
        target = docname_of(ref.get("refuri", ""), app.env.found_docs)
        if target is not None:
            docname, anchor = target
            ref["refuri"] = app.builder.get_relative_uri(fromdocname, docname) + anchor
            ref["internal"] = True


def setup(app):
    app.connect("doctree-resolved", _point_inside)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
