"""Showing measured results the same way in every notebook: claims checked quietly,
tables, and sentences that every client renders.

A claim is a sentence of the text and whether this run's measurement confirms it:
`claim` is silent when it holds and stops the cell when it does not, with the claim in
words and the numbers it rests on, so that a reader whose machine disagrees sees which
sentence, and the regression tests fail (under the ``smoke`` profile, one epoch and one
seed that only check that a notebook runs, a claim that does not hold is counted instead);
`claims_checked`, in a notebook's last cell, counts them. Whether a claim held is a bool
(Python's or NumPy's, or a one-element bool tensor): anything else, such as the string
``"False"`` or a NaN, which ``bool()`` would read as True, is refused. (`verdict` and
`checklist`, which print a claim and ``True`` on a line, remain for scripts.) The record of
what executed a notebook is `labsupport.provenance`'s.

>>> claim("rows sum to one", True)
>>> verdict("rows sum to one", True, width=20)
rows sum to one      True
"""
from __future__ import annotations

import numbers
import os
import textwrap

import numpy as np
import torch

from .markdown import Markdown as Markdown  # lives in markdown; notebooks import it from here
from .markdown import escape
from .markdown import table as markdown_table
from .profile import ENV_VAR
from .timing import add_peak_fraction, attention_inputs, dtype_error, dtype_name, sdpa_backend_used
from .units import format_bytes
from .validation import check_instance, check_nonnegative_int

WIDTH = 58
NOTE_WIDTH = 100      # a table's notes, wrapped for the plain-text rendering
_BOOL_FIX = "pass the comparison itself (e.g. error < 1e-4), or reduce a tensor with .all() or .any()"


# --- claims: checked quietly ------------------------------------------------------------------

class ClaimNotConfirmed(AssertionError):
    """A claim of the text that this run's measurement did not confirm."""


_CLAIMS: dict[str, dict] = {}      # this process's claims that held, in order: text -> numbers
_UNCONFIRMED: dict[str, dict] = {} # smoke profile only: claims its tiny runs did not confirm
SMOKE = "smoke"                    # the profile whose results are not for reading (labsupport.profile)
NUMBER_DIGITS = 6                  # significant digits of a float in a claim's message


def claim(text: str, holds, **numbers) -> None:
    """Check a claim the text makes, quietly: nothing happens when it ``holds``; when it
    does not, the cell stops with `ClaimNotConfirmed`, whose message states the claim and
    the ``numbers`` it rests on (each named by its keyword). Every claim that held is
    recorded for `claims_checked`; a claim checked again replaces its record.

    Write ``text`` as the prose states it, with no number that the run may change (it is
    the same on every machine); put the measured values in ``numbers``.

    With ``$LABSUPPORT_PROFILE`` set to ``smoke`` (the least training, which checks that a
    notebook runs and whose results are not for reading), a claim that does not hold does not
    stop the cell: `claims_checked` counts it as not confirmed at those sizes.

    >>> claim("attention's peak is below the recurrence's", 12.0 < 40.0, attention=12.0, gru=40.0)
    >>> claim("the exponent is near 2", abs(2.31 - 2) < 0.05, exponent=2.31)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    labsupport.report.ClaimNotConfirmed: ... claim "the exponent is near 2": measured exponent = 2.31. ...
    """
    check_instance("claim's text", text, str, "the claim in words, as the text states it")
    held = _holds(holds, f"claim {text!r}")
    _CLAIMS.pop(text, None)
    _UNCONFIRMED.pop(text, None)
    if not held and os.environ.get(ENV_VAR) == SMOKE:     # one epoch, one seed: nothing to confirm
        _UNCONFIRMED[text] = dict(numbers)
        return
    if not held:
        measured = "; ".join(f"{name} = {_number_text(value)}" for name, value in numbers.items())
        raise ClaimNotConfirmed(f"This run did not confirm the text's claim \"{text}\""
                                + (f": measured {measured}." if measured else ".")
                                + " If you changed the code above, that change is the likely cause; if "
                                  "not, this machine disagrees with the book: please report these numbers.")
    _CLAIMS[text] = dict(numbers)


def claims_held() -> list[str]:
    """The claims checked in this process that held, in the order first checked."""
    return list(_CLAIMS)


def forget_claims() -> None:
    """Start a new record (a notebook's first cell need not: each kernel starts empty)."""
    _CLAIMS.clear()
    _UNCONFIRMED.clear()


def claims_checked(machine: str | None = None) -> None:
    """Show one line counting the claims of this notebook that held on this machine, with
    the claims listed in a folded block (HTML ``<details>``, which the book, JupyterLab,
    VS Code and Colab render). ``machine`` (default: the device and torch version) is
    printed in parentheses after "on this machine"; the regression tests mask it."""
    held = claims_held()
    if machine is None:
        machine = _machine()
    check_instance("machine", machine, str, "a str such as 'cpu, torch 2.13.0'")
    noun = "claim" if len(held) == 1 else "claims"
    line = f"{len(held)} {noun} of this section checked on this machine ({machine}), and all held."
    if _UNCONFIRMED:
        line = (f"{len(held)} {noun} of this section held on this machine ({machine}); "
                f"{len(_UNCONFIRMED)} not confirmed at the smoke profile's sizes, whose results are "
                "not for reading.")
    items = "\n".join(f"<li>{_html_text(text)}</li>" for text in held)
    markdown = (f"**{escape(line)}**\n\n<details><summary>The claims checked</summary>\n\n"
                f"<ol>\n{items}\n</ol>\n\n</details>")
    _show(markdown, "\n".join([line, *(f"{i}. {text}" for i, text in enumerate(held, 1))]))


def _machine() -> str:
    """'cpu, torch 2.13.0' or 'cuda: NVIDIA H200, torch 2.13.0' (no parentheses inside)."""
    device = "cpu"
    if torch.cuda.is_available():
        device = "cuda: " + torch.cuda.get_device_name().replace("(", "").replace(")", "")
    return f"{device}, torch {torch.__version__.split('+')[0]}"


def _html_text(text: str) -> str:
    """``text`` safe inside HTML: the characters HTML reads escaped ($math$ kept for MathJax)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _number_text(value) -> str:
    """A measured value as a claim's message shows it: floats to `NUMBER_DIGITS`
    significant digits, tensors and arrays by their values (or shape and range when long)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.numel() > 12:
            return (f"a {dtype_name(value.dtype)} tensor of shape {tuple(value.shape)} ranging "
                    f"{_number_text(value.min().item())} to {_number_text(value.max().item())}")
        value = value.tolist()
    if isinstance(value, np.ndarray):
        value = value.tolist() if value.size <= 12 else torch.from_numpy(value)
        if isinstance(value, torch.Tensor):
            return _number_text(value)
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    if isinstance(value, numbers.Real):
        return f"{float(value):.{NUMBER_DIGITS}g}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_number_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_number_text(v) for v in value) + "]"
    return str(value)


# --- printed verdicts and checklists (scripts) ------------------------------------------------

def verdict(claim: str, holds, *, width: int = WIDTH) -> None:
    """Print ``claim`` padded to ``width`` and whether it ``holds`` (True/False). In a
    notebook, prefer `claim`, which is silent when the claim holds."""
    check_instance("verdict's claim", claim, str, "a str")
    holds = _holds(holds, f"verdict {claim!r}")
    print(f"{claim:<{check_nonnegative_int('width', width)}} {holds}")


def _holds(holds, where: str) -> bool:
    """``holds`` as a bool, if it is one: a bool, a NumPy bool or a one-element bool tensor."""
    if isinstance(holds, (bool, np.bool_)):
        return bool(holds)
    if isinstance(holds, torch.Tensor) and holds.dtype == torch.bool and holds.numel() == 1:
        return bool(holds.item())
    raise TypeError(f"{where}: holds must be a bool, a NumPy bool or a one-element bool tensor, "
                    f"got {_kind(holds)}; {_BOOL_FIX}")


def _kind(value) -> str:
    """What ``value`` is, for a message: ``str 'False'``, ``float nan``, ``a bool tensor of shape (2,)``."""
    if isinstance(value, torch.Tensor):
        dtype = "bool" if value.dtype == torch.bool else str(value.dtype)
        return f"a {dtype} tensor of shape {tuple(value.shape)}"
    if isinstance(value, str):
        return f"str {value!r}"
    if isinstance(value, numbers.Number):
        return f"{type(value).__name__} {value}"
    return type(value).__name__


def checklist(rows, *, title: str = "checks", width: int = WIDTH) -> None:
    """Print secondary checks as one compact block under a ``title``: each claim and
    whether it held, so that a section's main claims keep their own `verdict` lines.
    ``rows``: ``(claim, holds)`` pairs, ``holds`` a bool as for `verdict`; every row is
    checked before anything is printed."""
    rows = [_checklist_row(i, row) for i, row in enumerate(rows)]
    width = check_nonnegative_int("width", width)
    held = sum(holds for _, holds in rows)
    print(f"{title}: {held} of {len(rows)} hold")
    for claim, holds in rows:
        print(f"  {claim:<{max(width - 2, 0)}} {holds}")


def _checklist_row(i: int, row) -> tuple[str, bool]:
    if not isinstance(row, (tuple, list)):
        raise TypeError(f"checklist row {i} must be a (claim, holds) pair, got {_kind(row)}")
    if len(row) != 2:
        raise ValueError(f"checklist row {i} has {len(row)} item{'s' * (len(row) != 1)}, expected 2: "
                         f"(claim, holds), got {row!r}")
    claim, holds = row
    if not isinstance(claim, str):
        raise TypeError(f"checklist row {i}: the claim must be a str, got {_kind(claim)}")
    return claim, _holds(holds, f"checklist row {i} ({claim!r})")


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
            raise TypeError(f"table's {name} must be a str, got {_kind(text)}")
    widths = [max(len(str(h)), *(len(r[j]) for r in cells)) for j, h in enumerate(headers)]
    plain = ["  ".join(f"{h:>{w}}" for h, w in zip(headers, widths))]
    plain += ["  ".join(f"{c:>{w}}" for c, w in zip(r, widths)) for r in cells]
    markdown = markdown_table([str(h) for h in headers], cells)
    _show("\n\n".join([*(["**" + escape(caption) + "**"] if caption else []), markdown,
                        *(escape(n) for n in notes)]),
          "\n".join([*([caption] if caption else []), *plain,
                     *(textwrap.fill(n.plain if isinstance(n, Markdown) else n, NOTE_WIDTH,
                                     subsequent_indent="  ", break_on_hyphens=False)
                       for n in notes)]))


# --- output that renders in every client ----------------------------------------------------------

def in_notebook() -> bool:
    """True inside a Jupyter kernel (JupyterLab, VS Code, Colab, nbclient), where rich
    output renders; False in a script or a plain IPython terminal."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _show(markdown: str, plain: str) -> None:
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
    _show(text, text)


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
                            f"callable, got {_kind(spec)}")
    return formats


def _table_row(i: int, row, headers) -> list:
    if not isinstance(row, (tuple, list, np.ndarray)):
        raise ValueError(f"table row {i} must be a sequence of {len(headers)} values, got {_kind(row)}")
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


def sweep_table(rows, *, flops: bool = False, peak=None) -> None:
    """Print `labsupport.timing.cost_sweep` rows: time median (with min-max where a point
    was timed several times), measured peak, the model where there is one, and why a
    point did not run.

    ``flops`` adds the achieved TFLOP/s; ``peak`` (a `labsupport.timing.matmul_peak`
    measured in the dtype the rows ran in) adds it and the fraction of that peak, in a
    column headed with the peak's label (``% of bf16 peak``, ``% of fp32 peak``)."""

    def ranged(r):                      # several repetitions: they differ, min < max
        return r["status"] == "ok" and r["time_min"] != r["time_max"]

    def ms(r):
        if r["status"] != "ok":
            return r["status"]
        spread = f" ({r['time_min'] * 1e3:.1f}-{r['time_max'] * 1e3:.1f})" if ranged(r) else ""
        return f"{r['time_s'] * 1e3:.1f}{spread}"

    if peak is not None:
        rows, flops = add_peak_fraction(rows, peak), True
    time_header = "time ms (min-max)" if any(ranged(r) for r in rows) else "time ms"
    headers = ["kernel", "L", time_header, "peak (measured)", "model"]
    headers += ["TFLOP/s"] if flops else []
    headers += [f"% of {peak.label}"] if peak is not None else []
    out = []
    for r in rows:
        measured = format_bytes(r["peak_bytes"]) if r["status"] == "ok" else r["note"]
        model = format_bytes(r["model_bytes"]) if r["model_bytes"] is not None else "-"
        row = [r["kernel"], r["length"], ms(r), measured, model]
        if flops:
            row.append(f"{r['tflops']:.3f}" if r.get("tflops") else "-")
        if peak is not None:
            row.append(f"{100 * r['peak_fraction']:.1f}" if r["peak_fraction"] else "-")
        out.append(row)
    table(headers, out)


def precision_note(kernels, length: int, dtype, *, make_inputs=None, **kernel_kwargs) -> None:
    """Print what a sweep in ``dtype`` measured: the SDPA backend that ran on its inputs, and,
    below float32, each kernel's max error against itself in float32 at ``length``
    (`labsupport.timing.dtype_error`). ``kernels``: name -> kernel, as for `cost_sweep`;
    ``make_inputs(L)``: float32 inputs on the sweep's device (default `attention_inputs`);
    ``kernel_kwargs`` (e.g. ``is_causal=True``) go to every kernel. Its lines depend on the
    device: print them in a cell whose output is not checked."""

    make_inputs = make_inputs or attention_inputs
    q, k, v = (t.to(dtype) for t in make_inputs(length))
    backend = sdpa_backend_used(q, k, v, is_causal=kernel_kwargs.get("is_causal", False))
    print(f"inputs in {dtype_name(dtype)} on {q.device.type}; SDPA ran its {backend} backend")
    if dtype == torch.float32:
        return
    print(f"max |error| against the same kernel in float32, L = {length}:")
    table(["kernel", "max error"],
          [(name, dtype_error(kernel, length, dtype, make_inputs=make_inputs, **kernel_kwargs))
           for name, kernel in kernels.items()], formats={1: "{:.1e}"})


