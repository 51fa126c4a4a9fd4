"""``python -m tools.ci.nbval_report``: the steps of gpu_check.sh around the nbval run.

- ``check-previous REPORT``: is this an earlier run's report.json (status 0), or not (2)?
- ``html-plan``: print the seconds the HTML build may take (``none``: no budget) and
  return 0, or print why it cannot start and return 3;
- ``finish OUT``: the install and the HTML build into ``OUT/report.json``, ``report.md``
  rewritten; returns gpu_check.sh's exit status (`exit_status`).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from .budget import RESERVE_S, Estimates, over_budget, read_previous


def exit_status(summary: dict) -> int:
    """gpu_check.sh's exit status: 0 every notebook ran and passed and the HTML built (or was
    not asked for); 1 a notebook failed, or pytest itself did; 3 the HTML build failed; 4
    incomplete: a notebook or the HTML build was skipped or stopped for the budget."""
    notebooks, skipped = summary["notebooks"], summary.get("skipped") or []
    stopped = any(n["status"] == "stopped" for n in notebooks)
    pytest_status = summary.get("pytest_exit_status")
    if (any(n["status"] == "failed" for n in notebooks) or pytest_status not in (0, 1)
            or (pytest_status == 1 and not stopped) or not (notebooks or skipped)):
        return 1
    html = (summary.get("run") or {}).get("html", {}).get("status")
    if html == "failed":
        return 3
    return 4 if skipped or stopped or html in ("skipped", "stopped") else 0


def _html_plan(args) -> int:
    """Print the seconds the HTML build may take (or "none": no budget) and return 0, or
    print why it cannot start and return 3."""
    if args.budget == "none":
        print("none")
        return 0
    estimates = Estimates.from_report(args.previous)
    deadline, now = args.started + float(args.budget), time.time()
    reason = over_budget(estimates.html(), now=now, deadline=deadline)
    print(reason or f"{deadline - RESERVE_S - now:.0f}")
    return 3 if reason else 0


def _finish(args) -> int:
    """Add the install and the HTML build to OUT/report.json, rewrite report.md; return the
    exit status."""
    # here, not at the top: labsupport.report imports torch, which the quick commands need not wait for
    from .render import markdown

    path = Path(args.out) / "report.json"
    summary = json.loads(path.read_text())
    run = summary.setdefault("run", {})
    run.update(budget_s=None if args.budget == "none" else float(args.budget),
               started=datetime.fromtimestamp(args.started, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               seconds=round(time.time() - args.started, 1),
               install=dict(seconds=args.install_seconds, **{"from": args.install_from}),
               html=dict(status=args.html, seconds=args.html_seconds, reason=args.html_reason or None))
    status = exit_status(summary)
    summary["exit_status"] = status
    path.write_text(json.dumps(summary, indent=2) + "\n")
    (Path(args.out) / "report.md").write_text(markdown(summary))
    return status


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.ci.nbval_report",
                                     description="The budget and the report's last lines, for gpu_check.sh.")
    commands = parser.add_subparsers(dest="command", required=True)
    plan = commands.add_parser("html-plan", help="does the HTML build fit in the budget?")
    check = commands.add_parser("check-previous", help="is this an earlier run's report.json?")
    check.add_argument("previous")
    finish = commands.add_parser("finish", help="the install and HTML results into the report")
    finish.add_argument("out")
    for command in (plan, finish):
        command.add_argument("--started", type=float, required=True, help="the budget's start (Unix time)")
        command.add_argument("--budget", required=True, help="seconds, or none")
    plan.add_argument("--previous")
    finish.add_argument("--install-seconds", type=float, default=0.0)
    finish.add_argument("--install-from", default="none (the current environment)")
    finish.add_argument("--html", required=True,
                        choices=["built", "failed", "skipped", "stopped", "not requested"])
    finish.add_argument("--html-seconds", type=float)
    finish.add_argument("--html-reason", default="")
    args = parser.parse_args(argv)
    try:
        if args.command == "check-previous":
            read_previous(args.previous)
            return 0
        return _html_plan(args) if args.command == "html-plan" else _finish(args)
    except ValueError as err:
        print(f"gpu_check: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
