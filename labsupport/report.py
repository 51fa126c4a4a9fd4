"""Claims checked quietly: a sentence of the text and whether this run's measurement confirms it.

`claim` is silent when the claim holds. When it does not, what happens depends on who runs
the notebook:

- a reader (the default): a visible notice in the cell's output names the sentence and this
  run's numbers, says that the book's own run confirmed it, and the notebook goes on, so that
  a student whose card decides a near tie the other way keeps the rest of the run;
- the test suite, the book build and the GPU check (``$LABSUPPORT_STRICT_CLAIMS`` set to 1,
  `STRICT_VAR`): the cell stops with `ClaimNotConfirmed`, so that nbval fails and the author
  rewrites the claim or the experiment;
- the ``smoke`` profile (one epoch, one seed, only to see that a notebook runs): counted,
  never shown or raised.

`claims_checked`, in a notebook's last cell, counts them, naming any that did not hold.
Whether a claim held is a bool (Python's or NumPy's, or a one-element bool tensor): anything
else, such as the string ``"False"`` or a NaN, which ``bool()`` would read as True, is refused.

>>> claim("rows sum to one", True)
"""
from __future__ import annotations

import numbers
import os

import numpy as np
import torch

from .display import describe_value, show
from .markdown import escape
from .profile import ENV_VAR
from .timing import dtype_name
from .validation import check_instance

__all__ = ["claim", "claims_checked", "claims_held", "claims_not_held", "forget_claims",
           "ClaimNotConfirmed", "STRICT_VAR"]

STRICT_VAR = "LABSUPPORT_STRICT_CLAIMS"    # "1": a claim that does not hold stops the cell
SMOKE = "smoke"                            # the profile whose results are not for reading
NUMBER_DIGITS = 6                          # significant digits of a float in a claim's message
_BOOL_FIX = "pass the comparison itself (e.g. error < 1e-4), or reduce a tensor with .all() or .any()"


class ClaimNotConfirmed(AssertionError):
    """A claim of the text that this run's measurement did not confirm (strict mode)."""


_CLAIMS: dict[str, dict] = {}      # this process's claims that held, in order: text -> numbers
_NOT_HELD: dict[str, dict] = {}    # claims this run did not confirm (shown to a reader)
_UNCONFIRMED: dict[str, dict] = {} # smoke profile only: claims its tiny runs did not confirm


def strict() -> bool:
    """True where a claim that does not hold must stop the cell: ``$LABSUPPORT_STRICT_CLAIMS=1``."""
    return os.environ.get(STRICT_VAR, "") not in ("", "0")


def claim(text: str, holds, **numbers) -> None:
    """Check a claim the text makes, quietly: nothing happens when it ``holds``. When it does
    not, a reader sees a notice naming the claim and the ``numbers`` it rests on (each named by
    its keyword) and the notebook goes on; in strict mode (`STRICT_VAR`: the tests, the book
    build) the cell stops with `ClaimNotConfirmed`; under the smoke profile it is only counted.
    A claim checked again replaces its record.

    Write ``text`` as the prose states it, with no number that the run may change (it is the
    same on every machine); put the measured values in ``numbers``.

    >>> claim("attention's peak is below the recurrence's", 12.0 < 40.0, attention=12.0, gru=40.0)
    """
    check_instance("claim's text", text, str, "the claim in words, as the text states it")
    held = _holds(holds, f"claim {text!r}")
    for record in (_CLAIMS, _NOT_HELD, _UNCONFIRMED):
        record.pop(text, None)
    if held:
        _CLAIMS[text] = dict(numbers)
        return
    if os.environ.get(ENV_VAR) == SMOKE:                  # one epoch, one seed: nothing to confirm
        _UNCONFIRMED[text] = dict(numbers)
        return
    measured = "; ".join(f"{name} = {_number_text(value)}" for name, value in numbers.items())
    if strict():
        raise ClaimNotConfirmed(f"This run did not confirm the text's claim \"{text}\""
                                + (f": measured {measured}." if measured else ".")
                                + f" (${STRICT_VAR} is set: the book's tests and build stop here.)")
    _NOT_HELD[text] = dict(numbers)
    measured = f" This run measured {measured}." if measured else ""
    after = (" The book's own run confirmed it. If you changed the code above, that change is the "
             "likely cause; otherwise this machine decides it differently. The notebook goes on.")
    show(f"**Not confirmed on this machine:** the text says \u201c{escape(text)}\u201d."
         f"{escape(measured)}{after}",
         f"Not confirmed on this machine: the text says \"{text}\".{measured}{after}")


def claims_held() -> list[str]:
    """The claims checked in this process that held, in the order first checked."""
    return list(_CLAIMS)


def claims_not_held() -> list[str]:
    """The claims checked in this process that did not hold (shown to the reader), in order."""
    return list(_NOT_HELD)


def forget_claims() -> None:
    """Start a new record (a notebook's first cell need not: each kernel starts empty)."""
    for record in (_CLAIMS, _NOT_HELD, _UNCONFIRMED):
        record.clear()


def claims_checked(machine: str | None = None) -> None:
    """Show one line counting the claims of this notebook checked on this machine, with the
    claims listed in a folded block (HTML ``<details>``, which the book, JupyterLab, VS Code
    and Colab render), those that did not hold marked. ``machine`` (default: the device and
    torch version) is printed in parentheses; the regression tests mask it."""
    held, missed = claims_held(), claims_not_held()
    if machine is None:
        machine = _machine()
    check_instance("machine", machine, str, "a str such as 'cpu, torch 2.13.0'")
    total = len(held) + len(missed)
    noun = "claim" if total == 1 else "claims"
    line = f"{total} {noun} of this section checked on this machine ({machine}), and all held."
    if missed:
        line = (f"{total} {noun} of this section checked on this machine ({machine}): {len(held)} held, "
                f"{len(missed)} did not (marked below).")
    if _UNCONFIRMED:
        line = (f"{len(held)} {noun} of this section held on this machine ({machine}); "
                f"{len(_UNCONFIRMED)} not confirmed at the smoke profile's sizes, whose results are "
                "not for reading.")
    items = [*held, *(f"not confirmed here: {text}" for text in missed)]
    listed = "\n".join(f"<li>{_html_text(text)}</li>" for text in items)
    markdown = (f"**{escape(line)}**\n\n<details><summary>The claims checked</summary>\n\n"
                f"<ol>\n{listed}\n</ol>\n\n</details>")
    show(markdown, "\n".join([line, *(f"{i}. {text}" for i, text in enumerate(items, 1))]))


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


def _holds(holds, where: str) -> bool:
    """``holds`` as a bool, if it is one: a bool, a NumPy bool or a one-element bool tensor."""
    if isinstance(holds, (bool, np.bool_)):
        return bool(holds)
    if isinstance(holds, torch.Tensor) and holds.dtype == torch.bool and holds.numel() == 1:
        return bool(holds.item())
    raise TypeError(f"{where}: holds must be a bool, a NumPy bool or a one-element bool tensor, "
                    f"got {describe_value(holds)}; {_BOOL_FIX}")


