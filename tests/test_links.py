"""Links that work in every client: a link from one section to another is the sibling notebook
(``12_2_transformer.ipynb``: JupyterLab and VS Code open it, the book its page) with its Colab
address beside it in the same cell (Colab resolves a relative link against its own address);
a link to a page is its absolute address (labsupport.links), which the book's build points at
its own page (labsupport.sphinx_links); citations are in-notebook links to the notebook's
reference list, with the whole entry in their title."""
import json
import re

import nbformat
import pytest
import yaml

from helpers import ROOT
from labsupport import links
from labsupport.sphinx_links import docname_of

NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))
LINK = re.compile(r"\]\(([^)\s]+)\)|href=\"([^\"]+)\"")


def test_the_package_knows_the_repository_of_config_yml():
    repository = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
    assert (links.REPOSITORY, links.BRANCH) == (repository["url"], repository["branch"])


def test_a_repository_address_names_the_book_page_it_stands_for():
    docs = {"chapters/12_2_transformer", "protocol"}
    assert docname_of(links.section_url("12_2_transformer", anchor="the-causal-mask"), docs) == (
        "chapters/12_2_transformer", "#the-causal-mask")
    assert docname_of(links.page_url("protocol.md"), docs) == ("protocol", "")
    assert docname_of(links.page_url("labsupport/compare/paired.py"), docs) is None    # not a page
    assert docname_of(links.section_url("12_9_missing"), docs) is None
    assert docname_of("https://colab.research.google.com/github/other/repo/blob/main/chapters/"
                      "12_2_transformer.ipynb", docs) is None


def _markdown_texts(nb):
    """Every markdown cell's source and every Markdown output, with where it is."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            yield f"cell {i}", cell.source
        for output in cell.get("outputs", []):
            text = output.get("data", {}).get("text/markdown")
            if text:
                yield f"cell {i} output", "".join(text)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_links_between_documents_are_addresses_that_every_client_opens(path):
    nb = nbformat.read(path, as_version=4)
    anchors = {m for _, text in _markdown_texts(nb) for m in re.findall(r'<a id="([^"]+)"', text)}
    for where, text in _markdown_texts(nb):
        for match in LINK.finditer(text):
            target = match[1] or match[2]
            if target.startswith("#"):
                assert target[1:] in anchors or not target.startswith("#ref-"), \
                    f"{path.name} {where}: {target} has no entry in the reference list"
                continue
            sibling = re.fullmatch(r"(12_[\w]+)\.ipynb(#[\w-]+)?", target)
            if sibling:
                assert (ROOT / "chapters" / f"{sibling[1]}.ipynb").is_file(), f"{path.name} {where}: {target}"
                assert links.section_url(sibling[1]) in text, (
                    f"{path.name} {where}: {target} opens the sibling notebook in JupyterLab but not in "
                    f"Colab: put its Colab address, labsupport.links.section_url({sibling[1]!r}), beside it")
                continue
            assert re.match(r"^(https?|mailto):", target), (
                f"{path.name} {where}: relative link {target!r} breaks in Colab; link another section "
                f"as its sibling notebook with section_url(...) beside it, a page as page_url(...)")
            if target.startswith((links.REPOSITORY, links.COLAB)):
                relative = re.sub(r"^.*?/blob/[^/]+/", "", target).split("#")[0]
                assert (ROOT / relative).is_file(), f"{path.name} {where}: {target} names no file"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_citation_carries_its_entry_in_its_title(path):
    text = json.dumps(nbformat.read(path, as_version=4).cells)
    citations = re.findall(r'<a href=\\"#ref-[^"\\]+\\"([^>]*)>', text)
    assert all(' title=\\"' in attributes for attributes in citations), path.name
