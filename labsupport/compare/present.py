"""How a `Comparison` is shown: `rows` (one dict per model), `table` (printed through
`labsupport.display.table`, with a legend under it) and `plot` (seeds as dots).

Each takes the comparison as its first argument and reads it through its methods; it does
not import `results` (which calls these as `Comparison.rows`, `.table` and `.plot`)."""
from __future__ import annotations

import math
import statistics

from ..display import table as print_table
from ..links import PROTOCOL
from ..markdown import Markdown
from .labels import RIDGE, STOP_LABELS

__all__ = ["rows", "table", "plot"]

DETAIL = 110            # the longest error line printed under the table


def _reference(comparison, reference):
    """The row every paired difference is taken against: ``reference``, else the ridge, else none."""
    if reference is not None:
        comparison[reference]                                   # raises naming the models it has
        return reference
    return RIDGE if RIDGE in comparison.entries else None


def _versus(comparison, name, reference, metric):
    """The paired test of ``name - reference``, or None where there is none to make."""
    if reference is None or name == reference:
        return None
    try:
        return comparison.interval(name, reference, metric)
    except ValueError:                    # a failed model, or one without per-window losses
        return None


def _row(comparison, name, metric, reference) -> dict:
    e = comparison[name]
    values = [v for v in e.values(metric) if v is not None]
    records = e.records
    has_unit = bool(e.metrics) and e.metrics[0].mae_orig is not None
    return dict(
        model=name, trained=e.trained, params=e.params, runs=len(e.metrics), failed_runs=len(e.failures),
        failure=e.failure(), mean=e.mean(metric), min=min(values) if values else None,
        max=max(values) if values else None, spread=e.spread(metric) if values else None,
        mae=e.mean("mae"), mae_orig=e.mean("mae_orig") if has_unit else None,
        epochs=[r.epochs_run for r in records], best_epochs=[r.best_epoch for r in records],
        seconds_per_epoch=statistics.median(r.seconds_per_epoch for r in records) if records else None,
        train_seconds=statistics.fmean(r.total_seconds for r in records) if records else e.fit_seconds,
        stopped=_stopped(e), budget_limited=e.budget_limited,
        settled=e.failure() is None and not e.budget_limited,
        versus=_versus(comparison, name, reference, metric), reference=reference,
        verdict=_verdict(comparison, name, reference, metric))


def _verdict(comparison, name, reference, metric) -> str | None:
    """The row's verdict against the reference in words (`Comparison.judgement`), or None."""
    if reference is None or name == reference:
        return None
    return comparison.judgement(name, reference, metric)


def rows(comparison, metric: str = "mse", reference: str | None = None) -> list:
    """One dict per model: ``model, trained, params, runs`` (successful), ``failed_runs``,
    ``failure`` (why it failed, or None), ``mean, min, max, spread`` of ``metric`` over its
    runs, ``mae, mae_orig``, ``epochs, best_epochs`` (per run), ``seconds_per_epoch``
    (median), ``train_seconds`` (mean per run; the ridge's solve), ``stopped`` (stop reasons
    per run), ``budget_limited, settled``, ``versus`` (the `PairedTest` of model minus
    ``reference``, or None), ``reference`` (default: the ridge) and ``verdict`` (the row
    against the reference in words, `Comparison.judgement`; None for the reference)."""
    comparison.label(metric)                                    # refuses an unknown metric
    reference = _reference(comparison, reference)
    return [_row(comparison, name, metric, reference) for name in comparison.entries]


def _stopped(entry) -> str:
    """Why each run stopped: 'converged 2/2', 'epoch budget 1/2, converged 1/2', 'failed 1/3'."""
    if not entry.trained:
        return "closed form" if entry.fit_seconds is not None else "-"
    counts = {}
    for r in entry.records:
        counts[STOP_LABELS[r.stop_reason]] = counts.get(STOP_LABELS[r.stop_reason], 0) + 1
    if entry.failures:
        counts["failed"] = len(entry.failures)
    total = entry.attempted
    return ", ".join(f"{label} {n}/{total}" for label, n in counts.items()) or "-"


def _span(values) -> str:
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _metric_cell(r, entry) -> str:
    if r["failure"] is not None:
        return f"failed: {entry.failure(short=True)}"
    if r["runs"] == 0:
        return "-"
    if r["runs"] == 1:
        return f"{r['mean']:.3f}" + (" (1 run)" if r["trained"] else "")
    return f"{r['mean']:.3f} ({r['min']:.3f}-{r['max']:.3f})"


def _seeds_cell(r) -> str:
    if not r["trained"]:
        return "-"
    return f"{r['runs']}" + (f" (+{r['failed_runs']} failed)" if r["failed_runs"] else "")


def _verdict_cell(r) -> str:
    return "reference" if r["model"] == r["reference"] else (r["verdict"] or "-")


def _number(value, spec: str, failed: bool) -> str:
    return "-" if value is None or failed else format(value, spec)


def _three_digits(value) -> str:
    """A format that shows ``value`` with three significant digits, never fewer than its whole
    part (1.26 stays 1.26 degrees, 245.3 MW is 245)."""
    if value is None or not math.isfinite(value) or value == 0:
        return ".3g"
    return f",.{max(0, 2 - math.floor(math.log10(abs(value))))}f"


def _cells(r, entry, unit) -> tuple:
    failed = r["failure"] is not None
    in_unit = [] if unit is None else [_number(r["mae_orig"], _three_digits(r["mae_orig"]), failed)]
    epochs = f"{_span(r['epochs'])} ({_span(r['best_epochs'])})" if r["epochs"] else "-"
    return (r["model"], f"{r['params']:,}", _seeds_cell(r), _metric_cell(r, entry),
            _number(r["mae"], ".3f", failed), *in_unit, epochs,
            _number(r["seconds_per_epoch"], ".2f", False), _number(r["train_seconds"], ".1f", False),
            r["stopped"], _verdict_cell(r))


def _legend(comparison, metric, reference) -> list:
    """The line under the table: the task, the windows, the normalisation, and a link to the
    protocol page, where every column and the verdict rule are explained."""
    tr, va, te = (comparison.windows[k] for k in ("train", "val", "test"))
    norm = "instance normalisation (RevIN) for every model" if comparison.revin else "no RevIN"
    versus = f"; verdicts against {reference}" if reference is not None else ""
    line = (f"{comparison.label(metric)} on the standardised series, mean (min-max) over seeds; windows"
            f"{_steps_text(comparison)} (train {tr:,}, validation {va:,}, test {te:,}), the same for "
            f"every model and baseline; {norm}{versus}, by [the book's comparison protocol]({PROTOCOL}).")
    lines = [Markdown(line)]
    if comparison.interrupted:
        lines.append("interrupted: Stop ended the comparison; the rows hold the runs that finished.")
    return lines


def _steps_text(comparison) -> str:
    """' of 336 steps in, 24 out' from the comparison's (lookback, horizon), or an empty string."""
    if comparison.steps is None:
        return ""
    lookback, horizon = comparison.steps
    return f" of {lookback:,} steps in, {horizon:,} out"


def _failures(comparison) -> list:
    out = []
    for name, e in comparison.entries.items():
        why = e.failure()
        if why is not None:
            line = f"{name}: {why}"
            out.append(line if len(line) <= DETAIL else line[:DETAIL - 3] + "...")
    return out


def table(comparison, metric: str = "mse", reference: str | None = None, *,
          caption: str | None = None) -> None:
    """Show one row per model (`rows`), then the failures in full and the legend, through
    `labsupport.display.table`: a Markdown table in a notebook, plain text in a script."""
    found = rows(comparison, metric, reference)
    reference = found[0]["reference"] if found else _reference(comparison, reference)
    unit = comparison.unit
    headers = ["model", "params", "seeds", f"{comparison.label(metric)}: mean (min-max)", "MAE",
               *([] if unit is None else [f"MAE ({unit})"]), "epochs (best)", "s/epoch", "train s",
               "stopped", "verdict" if reference is None else f"vs {reference}"]
    failures = _failures(comparison)
    notes = (["failed (never ranked): " + "; ".join(failures)] if failures else [])
    print_table(headers, [_cells(r, comparison[r["model"]], unit) for r in found], caption=caption,
                notes=notes + _legend(comparison, metric, reference))


def plot(comparison, ax=None, metric: str = "mse"):
    """Seeds as dots (one row per trained model, the mean as a bar; failed models marked),
    baselines as vertical lines. Returns the axes."""
    import math

    import matplotlib.pyplot as plt

    from ..plots import PALETTE

    entries = comparison.entries
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 0.45 * len(entries) + 1.2))
    trained = [e for e in entries.values() if e.trained]
    for row, e in enumerate(trained):
        values = [v for v in e.values(metric) if v is not None and math.isfinite(v)]
        ax.plot(values, [row] * len(values), "o", color=PALETTE[0], alpha=0.7,
                label="one seed" if row == 0 else None)
        if values and e.failure() is None:
            ax.plot([e.mean(metric)] * 2, [row - 0.3, row + 0.3], color="black", lw=2,
                    label="mean over seeds" if row == 0 else None)
    styles = iter([("--", PALETTE[1]), (":", PALETTE[3]), ("-.", PALETTE[2])])
    for e in entries.values():
        if not e.trained and e.failure() is None:
            style, colour = next(styles, ("--", "grey"))
            ax.axvline(e.mean(metric), ls=style, color=colour, label=e.name)
    ax.set_yticks(range(len(trained)), [e.name + (" (failed)" if e.failure() else "") for e in trained])
    ax.invert_yaxis()
    ax.set_xlabel(f"{comparison.label(metric)}{' (scaled)' if metric != 'mae_orig' else ''}, lower is better")
    ax.legend(loc="best", fontsize=8)
    return ax
