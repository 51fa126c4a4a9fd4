"""Where the book lives, as links that work in every client.

A notebook is read in the HTML book, JupyterLab, VS Code and Colab. A relative link to
another notebook works in the book, JupyterLab and VS Code, not in Colab (which resolves it
against its own address), so a section links another as its sibling notebook with the Colab
address beside it: ``[12.2](12_2_transformer.ipynb) ([Colab](<section_url("12_2_transformer")>))``.
A page of the book is linked by its GitHub address (`page_url`). The book's build turns every
such link into a link to its own page (labsupport.sphinx_links), so the HTML book
stays whole offline. ``REPOSITORY`` and ``BRANCH`` are _config.yml's ``repository``
settings (a test keeps them equal).

>>> section_url("12_2_transformer")
'https://colab.research.google.com/github/temporal-ai-book/ch12-attention/blob/main/chapters/12_2_transformer.ipynb'
>>> page_url("protocol.md")
'https://github.com/temporal-ai-book/ch12-attention/blob/main/protocol.md'
"""
from __future__ import annotations

REPOSITORY = "https://github.com/temporal-ai-book/ch12-attention"
BRANCH = "main"
COLAB = "https://colab.research.google.com/github/"


def section_url(name: str, *, anchor: str | None = None) -> str:
    """The Colab address of the notebook ``chapters/<name>.ipynb`` (``anchor``: a heading's id)."""
    path = REPOSITORY.removeprefix("https://github.com/")
    return f"{COLAB}{path}/blob/{BRANCH}/chapters/{name}.ipynb" + (f"#{anchor}" if anchor else "")


def page_url(path: str, *, anchor: str | None = None) -> str:
    """The GitHub address of the repository file ``path`` (a page of the book, such as ``protocol.md``)."""
    return f"{REPOSITORY}/blob/{BRANCH}/{path}" + (f"#{anchor}" if anchor else "")


PROTOCOL = page_url("protocol.md")      # how every accuracy table in the book was made
