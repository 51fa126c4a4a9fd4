"""Each notebook's citations and its reference list, in plain Markdown and HTML, from references.bib.

    python -m tools.book.references            # rewrite every notebook's citations and references
    python -m tools.book.references --check    # exit 1 when a notebook is out of step (the tests)

A notebook is read in JupyterLab, Colab, VS Code and nbgrader as well as in the book, so a
citation is plain HTML that every one of them renders: an author-year link to the entry in the
notebook's own reference list,

    ... as PatchTST does (<a href="#ref-nie2023patchtst" title="Nie, Y., ...">Nie et al., 2023</a>).
    ... <a href="#ref-vaswani2017attention" title="...">Vaswani et al. (2017)</a> scale the scores ...

(the parenthetical form "Name et al., Year", the textual form "Name et al. (Year)": the tool keeps
each form's text equal to what references.bib says, and writes the whole entry into the link's
title, which every client shows when the reader hovers on the citation: JupyterLab 4 renders
the markdown cells of a long notebook lazily, so a click may find the reference list not yet
drawn). The last markdown cell, headed
"## References", lists exactly the works the notebook cites, sorted by author and year, each
with an anchor and its DOI or arXiv link where the entry has one. references.bib stays the single
source; the book's page "Bibliography" lists every entry through sphinxcontrib-bibtex.
"""
from __future__ import annotations

import argparse
import codecs
import html
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import latexcodec  # noqa: F401  (registers the "ulatex" codec)
import nbformat
from pybtex.database import parse_file

ROOT = Path(__file__).resolve().parents[2]
BIB = ROOT / "references.bib"
HEADING = "## References"
CITATION = re.compile(r'<a href="#ref-(?P<key>[A-Za-z0-9_:-]+)"(?: title="[^"]*")?>(?P<text>[^<]*)</a>')


def _plain(latex: str) -> str:
    """LaTeX as Unicode text: accents decoded, protective braces dropped."""
    return codecs.decode(latex, "ulatex").replace("{", "").replace("}", "")


@dataclass(frozen=True)
class Work:
    """One entry of references.bib, as the notebooks cite and list it."""

    key: str
    surnames: tuple[str, ...]
    authors: str          # "Vaswani, A., Shazeer, N. and Polosukhin, I."
    year: str
    title: str
    venue: str
    link: str | None      # DOI, arXiv or URL
    link_text: str | None

    @property
    def names(self) -> str:
        """"Vaswani et al.", "Gu and Dao", "Hyndman and Athanasopoulos", "Rae"."""
        if len(self.surnames) > 2:
            return f"{self.surnames[0]} et al."
        return " and ".join(self.surnames)

    def cite(self, textual: bool) -> str:
        return f"{self.names} ({self.year})" if textual else f"{self.names}, {self.year}"

    def tooltip(self) -> str:
        """The entry as plain text for a citation's title attribute (shown when the reader
        hovers on it, in every client, also where a link within the notebook cannot scroll)."""
        venue = f" {self.venue}." if self.venue else ""
        return html.escape(f"{self.authors} ({self.year}). {self.title}.{venue}", quote=True)

    def entry(self) -> str:
        venue = f" *{self.venue}*." if self.venue else ""
        link = f" [{self.link_text}]({self.link})" if self.link else ""
        return f'<a id="ref-{self.key}"></a>{self.authors} ({self.year}). {self.title}.{venue}{link}'


def _initials(person) -> str:
    given = " ".join(person.first_names + person.middle_names)
    return " ".join(f"{part[0]}." for part in _plain(given).replace("-", " ").split() if part)


def _link(fields) -> tuple[str | None, str | None]:
    if "doi" in fields:
        return f"https://doi.org/{fields['doi']}", f"doi:{fields['doi']}"
    text = " ".join(fields.get(name, "") for name in ("note", "journal", "eprint"))
    arxiv = re.search(r"(?:arXiv:\s*)?\b([0-9]{4}\.[0-9]{4,5})\b", text)
    if arxiv:
        return f"https://arxiv.org/abs/{arxiv.group(1)}", f"arXiv:{arxiv.group(1)}"
    if "url" in fields:
        return fields["url"], fields["url"]
    return None, None


def load_works(path: Path = BIB) -> dict[str, Work]:
    """Every entry of ``path`` by its key."""
    works = {}
    for key, entry in parse_file(str(path)).entries.items():
        people = entry.persons.get("author", [])
        surnames = tuple(_plain(" ".join(p.prelast_names + p.last_names)) for p in people)
        listed = [f"{_plain(' '.join(p.prelast_names + p.last_names))}, {_initials(p)}".rstrip(", ")
                  for p in people]
        authors = listed[0] if len(listed) == 1 else ", ".join(listed[:-1]) + " and " + listed[-1]
        fields = entry.fields
        venue = _plain(fields.get("journal") or fields.get("booktitle") or fields.get("publisher", ""))
        link, text = _link(fields)
        works[key] = Work(key, surnames, authors, fields["year"], _plain(fields["title"]), venue, link, text)
    return works


def _is_reference_cell(cell) -> bool:
    return cell.cell_type == "markdown" and cell.source.lstrip().startswith(HEADING)


def cited_keys(nb) -> list[str]:
    """The keys a notebook cites, in order of first citation (its reference list excluded)."""
    keys = []
    for cell in nb.cells:
        if cell.cell_type == "markdown" and not _is_reference_cell(cell):
            keys += [m["key"] for m in CITATION.finditer(cell.source) if m["key"] not in keys]
    return keys


def reference_list(keys, works) -> str:
    """The "## References" cell for ``keys``: one entry per paragraph, by author and year."""
    listed = sorted((works[k] for k in keys), key=lambda w: (w.surnames[0].lower(), w.year, w.key))
    return "\n\n".join([HEADING, *(w.entry() for w in listed)])


def _recite(source: str, works, where: str) -> str:
    def replace(match):
        key, text = match["key"], match["text"]
        if key not in works:
            raise KeyError(f"{where}: cites {key!r}, which references.bib does not hold; add the "
                           "entry to references.bib or correct the key")
        work, textual = works[key], text.rstrip().endswith(")")
        return f'<a href="#ref-{key}" title="{work.tooltip()}">{work.cite(textual=textual)}</a>'
    return CITATION.sub(replace, source)


def update(nb, works, name: str = "notebook") -> bool:
    """Rewrite the citations' text and the reference list of ``nb`` in place; True if it changed."""
    changed = False
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and not _is_reference_cell(cell):
            source = _recite(cell.source, works, f"{name}, cell {index}")
            changed |= source != cell.source
            cell.source = source
    keys = cited_keys(nb)
    listing = [i for i, cell in enumerate(nb.cells) if _is_reference_cell(cell)]
    if not keys:
        for i in reversed(listing):
            del nb.cells[i]
        return changed or bool(listing)
    text = reference_list(keys, works)
    if not listing:
        at = len(nb.cells) - (nb.cells[-1].cell_type == "code")        # before the run-record cell
        nb.cells.insert(at, nbformat.v4.new_markdown_cell(text))
        return True
    cell = nb.cells[listing[-1]]
    changed |= cell.source != text
    cell.source = text
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook in chapters/")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if out of step")
    args = parser.parse_args(argv)
    works = load_works()
    stale = []
    for path in args.notebooks or sorted((ROOT / "chapters").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        if update(nb, works, path.name):
            stale.append(path.name)
            if not args.check:
                nbformat.write(nb, path)
    if args.check and stale:
        print(f"citations or reference lists out of step with references.bib: {', '.join(stale)}; "
              "run python -m tools.book.references", file=sys.stderr)
        return 1
    print(f"{'out of step' if args.check else 'updated'}: {', '.join(stale) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
