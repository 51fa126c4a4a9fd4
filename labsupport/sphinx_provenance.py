"""Sphinx extension: the page "Where the numbers came from".

In the book's ``_config.yml``: ``sphinx: extra_extensions: [labsupport.sphinx_provenance]``;
in a page::

    ```{provenance-table}
    ```

When the page is written, after every document has been read (and, with execution on,
executed), the directive becomes a table with one row per notebook of the book, in
table-of-contents order: what executed the outputs the build rendered, from the record
that notebook's last cell glued (`labsupport.provenance.record_run`, under
`labsupport.provenance.RUN_KEY`). myst-nb keeps each notebook's glued values in its
output folder (``<docname>.glue.json``, the file its own ``{glue}`path::key``` reads);
a notebook that glued no record reads "not recorded", and the build goes on.

``provenance_nbval_report`` (a path, default empty): the ``report.json`` that
tools/ci/nbval_report wrote for the executions the book is built from (tools/ci/gpu_check.sh
sets it). Each row then also says what nbval's comparison found, and a notebook without
a record takes its device, versions, profile, time and GPU peak from the report.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

from docutils import nodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from .provenance import NOT_RECORDED, RUN_KEY, describe

logger = logging.getLogger(__name__)
COLUMNS = ("notebook", "device", "torch", "CUDA", "profile", "wall time", "peak memory",
           "recorded")


class provenance_table(nodes.General, nodes.Element):
    """Placeholder for the table; replaced when the page is written."""


class ProvenanceTable(SphinxDirective):
    """``{provenance-table}``: the table of what executed each notebook of the book."""

    has_content = False

    def run(self):
        # Re-read this page whenever a notebook (or the nbval report) changes.
        for doc in self.env.found_docs:
            if str(self.env.doc2path(doc)).endswith(".ipynb"):
                self.env.note_dependency(str(self.env.doc2path(doc)))
        if self.config.provenance_nbval_report:
            self.env.note_dependency(str(Path(self.config.provenance_nbval_report).resolve()))
        return [provenance_table()]


def toc_order(env) -> list[str]:
    """Every document reachable from the root's toctrees, depth first, in order."""
    order, stack = [], [env.config.root_doc]
    while stack:
        doc = stack.pop()
        if doc not in order:
            order.append(doc)
            stack.extend(reversed(env.toctree_includes.get(doc, [])))
    return order


def notebook_docs(env) -> list[str]:
    return [d for d in toc_order(env) if str(env.doc2path(d)).endswith(".ipynb")]


def read_record(env, docname: str) -> dict | None:
    """The record glued in ``docname`` when it was last read, or None."""
    keys = getattr(env, "nb_metadata", {}).get(docname, {}).get("glue", [])
    if RUN_KEY not in keys:                      # no glue file, or a stale one
        return None
    path = Path(env.mystnb_config.output_folder, *f"{docname}.glue.json".split("/"))
    try:
        text = json.loads(path.read_text())[RUN_KEY]["data"]["text/plain"]
        record = ast.literal_eval(text)
        if not isinstance(record, dict):
            raise ValueError(f"a {type(record).__name__}, expected a dict")
        return record
    except (OSError, KeyError, ValueError, SyntaxError) as err:
        logger.warning(f"provenance: cannot read the run record {RUN_KEY!r} of {docname} "
                       f"from {path}: {err}", location=docname)
        return None


def read_nbval_report(path: str) -> dict[str, dict]:
    """tools/ci/nbval_report's report.json as {notebook file name: its entry}."""
    try:
        report = json.loads(Path(path).read_text())
        return {entry["notebook"]: entry for entry in report["notebooks"]}
    except (OSError, ValueError, KeyError, TypeError) as err:
        logger.warning(f"provenance: provenance_nbval_report = {path!r} is not a readable "
                       f"report of tools/ci/nbval_report: {err}")
        return {}


def from_nbval(entry: dict) -> dict:
    """A record made from a report entry (what nbval's kernel reported)."""
    return dict(device=entry.get("device"), torch=entry.get("torch"), cuda=entry.get("cuda"),
                profile=entry.get("profile"), wall_s=entry.get("seconds"),
                peak_gpu_bytes=entry.get("peak_gpu_allocated_bytes"), peak_rss_bytes=None,
                finished="nbval report")


def nbval_text(entry: dict | None) -> str:
    if entry is None:
        return "not run"
    c = entry.get("cells", {})
    return (f"{entry.get('status', '?')}: {c.get('passed', 0)} cells passed, "
            f"{c.get('failed', 0)} failed, {c.get('skipped', 0)} skipped")


def row(app, fromdoc: str, docname: str, record: dict | None) -> list:
    title = app.env.titles[docname].astext() if docname in app.env.titles else docname
    link = nodes.reference("", title, internal=True,
                           refuri=app.builder.get_relative_uri(fromdoc, docname))
    if record is None:
        return [link, NOT_RECORDED] + ["-"] * (len(COLUMNS) - 2)
    shown = describe(record)
    return [link] + [shown[c] for c in COLUMNS[1:]]


def build_table(app, fromdoc: str) -> nodes.table:
    env = app.env
    report = read_nbval_report(app.config.provenance_nbval_report) \
        if app.config.provenance_nbval_report else None
    header, rows = list(COLUMNS), []
    for docname in notebook_docs(env):
        record = read_record(env, docname)
        if report is not None:
            entry = report.get(Path(str(env.doc2path(docname))).name)
            if record is None and entry is not None:
                record = from_nbval(entry)
            rows.append(row(app, fromdoc, docname, record) + [nbval_text(entry)])
        else:
            rows.append(row(app, fromdoc, docname, record))
    if report is not None:
        header.append("nbval")
    return table(header, rows)


def table(header: list[str], rows: list[list]) -> nodes.table:
    """A docutils table; a cell is a string or a node."""
    def tr(cells):
        line = nodes.row()
        for cell in cells:
            text = nodes.Text(cell) if isinstance(cell, str) else cell
            line += nodes.entry("", nodes.paragraph("", "", text))
        return line

    group = nodes.tgroup(cols=len(header))
    group += [nodes.colspec(colwidth=1) for _ in header]
    group += nodes.thead("", tr(header))
    group += nodes.tbody("", *map(tr, rows))
    return nodes.table("", group, classes=["provenance-table"])


def fill_tables(app, doctree, docname: str) -> None:
    for node in list(doctree.findall(provenance_table)):
        node.replace_self(build_table(app, docname))


def setup(app):
    app.add_config_value("provenance_nbval_report", "", "env", [str])
    app.add_node(provenance_table)
    app.add_directive("provenance-table", ProvenanceTable)
    app.connect("doctree-resolved", fill_tables)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
