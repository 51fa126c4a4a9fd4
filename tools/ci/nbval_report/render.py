"""``report.md``: the summary (``report.json``) as a Markdown page, in the table style and
byte units of the book's own tables (`labsupport.report`, `labsupport.units`)."""
from __future__ import annotations

from labsupport.markdown import table as markdown_table
from labsupport.units import format_bytes

HEADERS = ("notebook", "result", "cells passed / failed / skipped", "time (s)", "device", "torch",
           "CUDA", "peak GPU memory (allocated; reserved)")


def _budget_line(run: dict) -> str:
    """The budget, what was used of it and by the install, and where the estimates came from."""
    install = run.get("install")
    used = f"; {run['seconds']:.0f} s used" if run.get("seconds") is not None else ""
    if install and install["from"].startswith("none"):
        used += " (no install: the current environment)"
    elif install:
        used += f" (install {install['seconds']:.0f} s from {install['from']})"
    if run.get("budget_s") is None:
        return f"Budget: none{used}."
    return (f"Budget: {run['budget_s']:.0f} s from the script's start{used}; "
            f"estimates: {run.get('estimates') or '-'}.")


def _html_line(html: dict) -> str:
    status, seconds, reason = html.get("status"), html.get("seconds"), html.get("reason")
    if status == "built":
        return f"HTML: built in {seconds:.0f} s."
    after = f" after {seconds:.0f} s" if seconds is not None else ""
    return f"HTML: {status}{after}{': ' + reason if reason else ''}."


def _row(n: dict) -> list[str]:
    c = n["cells"]
    peak = format_bytes(n["peak_gpu_allocated_bytes"])
    if n["peak_gpu_reserved_bytes"] is not None:
        peak += f"; {format_bytes(n['peak_gpu_reserved_bytes'])}"
    return [n["notebook"], n["status"], f"{c['passed']} / {c['failed']} / {c['skipped']}",
            f"{n['seconds']:.0f}", n["device"] or "-", n["torch"] or "-", n["cuda"] or "-", peak]


def markdown(summary: dict) -> str:
    """The report as a Markdown page: the budget, one row per notebook, what was not
    launched, the HTML build, then the slowest cells."""
    notebooks = summary["notebooks"]
    run, skipped = summary.get("run") or {}, summary.get("skipped") or []
    profiles = sorted({str(n["profile"]) for n in notebooks}) or ["-"]
    passed = sum(n["status"] == "passed" for n in notebooks)
    lines = ["# Notebook execution report", "",
             f"{len(notebooks)} notebooks, {passed} passed, in {summary['seconds']:.0f} s; "
             f"{len(skipped)} not launched; "
             f"profile {', '.join(profiles)}; created {summary['created']}.", ""]
    if run:
        lines += [_budget_line(run), ""]
    lines.append(markdown_table(HEADERS, [_row(n) for n in notebooks]))
    if skipped:
        lines += ["", "Not launched, for the budget:", ""]
        lines += [f"- {k['notebook']}: not launched: {k['reason']}" for k in skipped]
    if run.get("html"):
        lines += ["", _html_line(run["html"])]
    lines += ["", "Slowest cells (code-cell index, seconds):", ""]
    for n in notebooks:
        cells = ", ".join(f"{s['cell']} ({s['seconds']:.0f} s)" for s in n["slowest_cells"])
        lines.append(f"- {n['notebook']}: {cells or '-'}")
        lines += [f"  - note: {note}" for note in n["notes"]]
    return "\n".join(lines) + "\n"
