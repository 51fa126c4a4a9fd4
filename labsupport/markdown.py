"""Markdown as every client renders it: one writer of GitHub-flavoured tables (`table`), text
escaped so that it reads as written (`escape`), and `Markdown`, a str that is already Markdown.

It imports nothing but the standard library, so every layer can write a table with it:
`labsupport.display.table` (a notebook's tables), the profile's size table, the CI's reports.

>>> print(table(["kernel", "ms"], [["naive", "2.8"], ["flash_*", "1.0"]]))
| kernel | ms |
| :--- | ---: |
| naive | 2.8 |
| flash\\_\\* | 1.0 |
"""
from __future__ import annotations

import re

__all__ = ["Markdown", "escape", "table"]


class Markdown(str):
    """A table note written in Markdown (a link, emphasis), shown as written in a notebook;
    in plain text its links read ``text (url)``.

    >>> Markdown("see [the protocol](https://example.org/p)").plain
    'see the protocol (https://example.org/p)'
    """

    @property
    def plain(self) -> str:
        return re.sub(r"\[([^\]]*)\]\(([^)]*)\)", r"\1 (\2)", self)


def escape(text: str) -> str:
    """``text`` as Markdown that reads as written: HTML, emphasis and table characters escaped
    (a `Markdown` note is kept as written)."""
    if isinstance(text, Markdown):
        return str(text)
    for char in "\\`*_|[]<>#":
        text = text.replace(char, "\\" + char)
    return text


def table(headers, cells) -> str:
    """A GitHub-flavoured Markdown table of ``cells`` (rows of str) under ``headers``, every cell
    escaped (`escape`): the first column left-aligned, the others right."""
    line = lambda values: "| " + " | ".join(escape(v) for v in values) + " |"    # noqa: E731
    rule = "| " + " | ".join([":---", *["---:"] * (len(headers) - 1)]) + " |"
    return "\n".join([line(headers), rule, *(line(r) for r in cells)])
