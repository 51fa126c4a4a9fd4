"""Output that renders in every client: a table or a sentence shown as Markdown in a notebook
(the HTML book, JupyterLab, VS Code, Colab) and as plain text in a script. The one table
writer of the package: `table`; the Markdown it emits comes from `labsupport.markdown`.

>>> table(["L", "ms"], [(1024, 2.81), (2048, 18.0)], formats={1: "{:.1f}"})
   L    ms
1024   2.8
2048  18.0
"""
from __future__ import annotations

import numbers
import textwrap

import numpy as np
import torch

from .markdown import Markdown, escape
from .markdown import table as markdown_table
from .validation import check_instance

__all__ = ["in_notebook", "show", "say", "table", "describe_value", "NOTE_WIDTH"]

NOTE_WIDTH = 100      # a table's notes, wrapped for the plain-text rendering


def in_notebook() -> bool:
    """True inside a Jupyter kernel (JupyterLab, VS Code, Colab, nbclient), where rich
    output renders; False in a script or a plain IPython terminal."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def show(markdown: str, plain: str) -> None:
    """``markdown`` where a notebook renders it (``plain`` as its text/plain), else print ``plain``."""
    if in_notebook():
        from IPython.display import display
        display({"text/markdown": markdown, "text/plain": plain}, raw=True)
    else:
        print(plain)


def say(text: str) -> None:
    """Show a run-dependent sentence as Markdown output, so that it reads as prose with the
    reader's own numbers in the HTML book, JupyterLab, VS Code and Colab alike. Write it as
    an f-string in a short cell of its own (the book hides that cell's code: tag
    ``remove-input``; its numbers depend on the run: tag ``nbval-ignore-output``). Markdown
    inside the text (emphasis, ``$math$``, links) renders; outside a notebook it is printed.

    >>> say(f"The forecaster's test MSE is {0.08234:.3f}.")
    The forecaster's test MSE is 0.082.
    """
    check_instance("say's text", text, str, "the sentence as a str (an f-string with the numbers)")
    show(text, text)


def table(headers, rows, *, formats=None, caption: str | None = None, notes=()) -> None:
    """Show rows under their headers: in a notebook (JupyterLab, VS Code, Colab, the HTML
    book) a Markdown table, with ``caption`` above it and each of ``notes`` as a line under
    it; in a script the same as right-aligned plain text, the notes wrapped at
    `NOTE_WIDTH` (also the notebook output's text/plain). ``formats`` maps a column index
    to a format spec (``"{:.1f}"``) or a callable; a note that is a `Markdown` string keeps its
    links and emphasis (others are shown as written). Every row must have one value per header;
    every row is checked and formatted before anything is shown.

    >>> table(["L", "ms"], [(1024, 2.81), (2048, 18.0)], formats={1: "{:.1f}"})
       L    ms
    1024   2.8
    2048  18.0
    """
    headers = list(headers)
    formats = _table_formats(formats, headers)
    cells = [[_fmt(value, formats.get(j), (i, j, headers[j]))
              for j, value in enumerate(_table_row(i, row, headers))] for i, row in enumerate(rows)]
    for name, text in (("caption", caption), *((f"notes[{i}]", n) for i, n in enumerate(notes))):
        if text is not None and not isinstance(text, str):
            raise TypeError(f"table's {name} must be a str, got {describe_value(text)}")
    widths = [max(len(str(h)), *(len(r[j]) for r in cells)) for j, h in enumerate(headers)]
    plain = ["  ".join(f"{h:>{w}}" for h, w in zip(headers, widths))]
    plain += ["  ".join(f"{c:>{w}}" for c, w in zip(r, widths)) for r in cells]
    markdown = markdown_table([str(h) for h in headers], cells)
    show("\n\n".join([*(["**" + escape(caption) + "**"] if caption else []), markdown,
                        *(escape(n) for n in notes)]),
          "\n".join([*([caption] if caption else []), *plain,
                     *(textwrap.fill(n.plain if isinstance(n, Markdown) else n, NOTE_WIDTH,
                                     subsequent_indent="  ", break_on_hyphens=False)
                       for n in notes)]))


def _table_formats(formats, headers) -> dict:
    """``formats`` checked: keys are column indices of ``headers``, values specs or callables."""
    formats = {} if formats is None else formats
    check_instance("table's formats", formats, dict, "a dict {column index: format}, or None")
    columns = ", ".join(f"{j} {h!r}" for j, h in enumerate(headers))
    for key, spec in formats.items():
        if isinstance(key, bool) or not isinstance(key, numbers.Integral) or not 0 <= key < len(headers):
            raise ValueError(f"table formats name column {key!r}, but there are {len(headers)} columns "
                             f"({columns}); formats map a column index to a format")
        if not (isinstance(spec, str) or callable(spec)):
            raise TypeError(f"table formats[{key}] must be a format string such as '{{:.1f}}' or a "
                            f"callable, got {describe_value(spec)}")
    return formats


def _table_row(i: int, row, headers) -> list:
    if not isinstance(row, (tuple, list, np.ndarray)):
        raise ValueError(f"table row {i} must be a sequence of {len(headers)} values, "
                         f"got {describe_value(row)}")
    if len(row) != len(headers):
        raise ValueError(f"table row {i} has {len(row)} value{'s' * (len(row) != 1)}, but there are "
                         f"{len(headers)} headers ({headers}); give each row one value per header")
    return list(row)


def _fmt(value, spec, where) -> str:
    if spec is None:
        return str(value)
    if callable(spec):
        return spec(value)
    try:
        return spec.format(value)
    except (ValueError, TypeError, KeyError, IndexError) as err:
        i, j, header = where
        raise ValueError(f"table row {i}, column {j} ({header!r}): format {spec!r} cannot format "
                         f"{value!r} ({type(value).__name__}): {err}") from err


def describe_value(value) -> str:
    """What ``value`` is, for a message: ``str 'False'``, ``float nan``, ``a bool tensor of shape (2,)``."""
    if isinstance(value, torch.Tensor):
        dtype = "bool" if value.dtype == torch.bool else str(value.dtype)
        return f"a {dtype} tensor of shape {tuple(value.shape)}"
    if isinstance(value, str):
        return f"str {value!r}"
    if isinstance(value, numbers.Number):
        return f"{type(value).__name__} {value}"
    return type(value).__name__


