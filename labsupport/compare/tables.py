"""Tables of a comparison with one verdict column per reference, for the sections that judge
one model against several others (the comparison's own ``table()`` judges against one).

Every verdict is `labsupport.compare.Comparison.judgement`: the protocol's rule in words, with
the paired interval; the legend is one line that links the protocol page.
"""
from __future__ import annotations

from ..display import table
from ..links import PROTOCOL
from ..markdown import Markdown

__all__ = ["mean_range", "legend", "verdict_table"]


def mean_range(values) -> str:
    """'0.109 (0.100-0.118)' over runs; the value alone for one run; '-' for none.

    >>> mean_range([0.1, 0.12])
    '0.110 (0.100-0.120)'
    """
    values = list(values)
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{sum(values) / len(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def legend(comparison, *, what: str = "test MSE on the standardised series", seeds: bool = True) -> Markdown:
    """The line under a table of ``comparison``: the metric, the windows, the normalisation, and
    a link to the protocol page, where the columns and the verdict rule are explained.
    ``seeds=False`` for a table of deterministic models (no seeds to summarise)."""
    w = comparison.windows
    steps = ""
    if comparison.steps is not None:
        steps = f" of {comparison.steps[0]:,} steps in, {comparison.steps[1]:,} out"
    norm = "instance normalisation (RevIN) for every model" if comparison.revin else "no RevIN"
    over = ", mean (min-max) over seeds" if seeds else ""
    return Markdown(f"{what}{over}; windows{steps} (train {w['train']:,}, "
                    f"validation {w['val']:,}, test {w['test']:,}), the same for every model and "
                    f"baseline; {norm}; verdicts by [the book's comparison protocol]({PROTOCOL}).")


def verdict_table(comparison, references, *, names=None, caption: str | None = None) -> None:
    """One row per model (``names``, default all): parameters, seeds, test MSE mean (min-max),
    how its runs stopped, and one column per reference with the row's verdict against it
    (`Comparison.judgement`; "reference" on the reference's own row). Numbers depend on the
    machine: show it in a cell that the regression tests ignore."""
    rows = {r["model"]: r for r in comparison.rows()}
    names = list(comparison.entries) if names is None else list(names)
    out = []
    for name in names:
        r, entry = rows[name], comparison[name]
        mse = "failed" if r["failure"] else mean_range(entry.values())
        verdicts = ["reference" if name == ref else comparison.judgement(name, ref) for ref in references]
        out.append((name, f"{r['params']:,}", str(r["runs"]) if r["trained"] else "-", mse,
                    r["stopped"], *verdicts))
    table(["model", "params", "seeds", "test MSE: mean (min-max)", "stopped",
           *(f"vs {ref}" for ref in references)], out, caption=caption, notes=[legend(comparison)])
