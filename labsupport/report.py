"""Printing measured results the same way in every notebook: verdicts and small tables.

A verdict is a claim and whether it held, on one line; the regression tests compare
these lines, so a claim must not print hardware-dependent numbers.

>>> verdict("rows sum to one", True, width=20)
rows sum to one      True
"""
from __future__ import annotations

WIDTH = 58


def verdict(claim: str, holds, *, width: int = WIDTH) -> None:
    """Print ``claim`` padded to ``width`` and whether it ``holds`` (True/False)."""
    print(f"{claim:<{width}} {bool(holds)}")


def table(headers, rows, *, formats=None) -> None:
    """Print rows under right-aligned headers; ``formats`` maps a column to a format spec
    (``"{:.1f}"``) or a callable."""
    formats = formats or {}
    cells = [[_fmt(value, formats.get(i)) for i, value in enumerate(row)] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    print("  ".join(f"{h:>{w}}" for h, w in zip(headers, widths)))
    for r in cells:
        print("  ".join(f"{c:>{w}}" for c, w in zip(r, widths)))


def _fmt(value, spec) -> str:
    if spec is None:
        return str(value)
    return spec(value) if callable(spec) else spec.format(value)
