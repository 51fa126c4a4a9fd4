"""The time budget: how long each step should take, and whether it may start.

A step (a notebook, the HTML build) starts only when its estimate fits in what is left of
the budget, less `RESERVE_S` kept for the report. Estimates: an earlier run's time plus
`MARGIN` (that run's report.json), else `DEFAULT_NOTEBOOK_S` or `DEFAULT_HTML_S`.
"""
from __future__ import annotations

import json
from pathlib import Path

# The budget's estimates when there is no earlier run: guesses, never measured on a GPU, and
# meant to be high: a notebook three times what the gpu profile aims at (labsupport/profile.py:
# about 5 minutes for all six on a data-centre GPU); the HTML build from the executions.
DEFAULT_NOTEBOOK_S = 180.0
DEFAULT_HTML_S = 150.0
MARGIN = 1.1                            # an earlier run's time, plus 10%
RESERVE_S = 15.0                        # kept at the end of the budget for the report


def read_previous(path) -> dict:
    """An earlier run's report.json; ValueError unless it is one."""
    expected = ("expected the report.json that tools/ci/nbval_report writes "
                "(an object with 'notebooks')")
    try:
        report = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"previous report {path}: not JSON ({err}); {expected}") from None
    if not isinstance(report, dict) or not isinstance(report.get("notebooks"), list):
        got = f"an object with keys {sorted(report)}" if isinstance(report, dict) else type(report).__name__
        raise ValueError(f"previous report {path}: {expected}, got {got}")
    return report


class Estimates:
    """Seconds each step should take: an earlier run's time plus MARGIN, else the defaults."""

    def __init__(self, previous: dict | None, source: str | None = None):
        previous = previous or {}
        self.source = source
        self.times = {}
        for n in previous.get("notebooks", []):
            if n.get("seconds") and n.get("status") in ("passed", "failed"):
                self.times[n["notebook"]] = n["seconds"] * MARGIN
            elif n.get("seconds") and n.get("status") == "stopped":      # a lower bound only
                self.times[n["notebook"]] = max(n["seconds"] * MARGIN, DEFAULT_NOTEBOOK_S)
        html = previous.get("run", {}).get("html") or {}
        built = html.get("status") == "built" and html.get("seconds")
        self.html_s = html["seconds"] * MARGIN if built else None

    @classmethod
    def from_report(cls, path: str | None) -> Estimates:
        """The estimates from an earlier run's report.json at ``path``, or the defaults (None)."""
        return cls(read_previous(path), path) if path else cls(None)

    def notebook(self, name: str) -> float:
        return self.times.get(name, DEFAULT_NOTEBOOK_S)

    def html(self) -> float:
        return DEFAULT_HTML_S if self.html_s is None else self.html_s

    def describe(self) -> str:
        defaults = f"defaults (notebook {DEFAULT_NOTEBOOK_S:.0f} s, HTML {DEFAULT_HTML_S:.0f} s)"
        if self.source is None:
            return defaults
        return f"{self.source}'s times plus {MARGIN - 1:.0%}, else the {defaults}"


def over_budget(estimate: float, *, now: float, deadline: float) -> str | None:
    """Why a step of `estimate` seconds may not start at `now`, or None when it fits.

    Math: it starts only if now + estimate + RESERVE_S <= deadline.
    """
    if now + estimate + RESERVE_S <= deadline:
        return None
    return (f"needs about {estimate:.0f} s, and {deadline - now:.0f} s of the budget are left "
            f"({RESERVE_S:.0f} s kept for the report)")


class Budget:
    """`seconds` from the Unix time `start`, with the estimates that decide what may start."""

    def __init__(self, seconds: float, start: float, estimates: Estimates):
        if not seconds > 0:
            raise ValueError(f"--budget-seconds must be above 0, got {seconds}")
        self.seconds, self.start, self.estimates = seconds, start, estimates
        self.deadline = start + seconds
