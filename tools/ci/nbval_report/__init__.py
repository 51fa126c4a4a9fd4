"""What tools/ci/gpu_check.sh runs around ``pytest --nbval``: a pytest plugin that keeps
what nbval executed and keeps to a time budget, and a command line for the steps before
and after it.

    python -m pytest -p tools.ci.nbval_report.plugin --report-dir OUT chapters/*.ipynb
    python -m pytest -p tools.ci.nbval_report.plugin --report-dir OUT --budget-start EPOCH \\
        --budget-seconds 600 [--budget-previous OLD/report.json] chapters/*.ipynb
    python -m tools.ci.nbval_report {check-previous,html-plan,finish} ...

One job per module:

- `plugin`: the pytest plugin. nbval runs each notebook's code cells in one kernel, one
  test per cell; the plugin keeps that execution (``OUT/notebooks/NAME.ipynb``), each
  cell's outcome and time, and what the kernel ran on, and writes ``report.json`` and
  ``report.md`` as it goes;
- `kernel`: the code the plugin runs inside the notebook's kernel (the peak GPU memory
  kept across the notebook's own resets; device, versions, profile, widget state);
- `budget`: the estimates (an earlier run's times plus a margin, else defaults) and the
  rule that decides whether a step may start;
- `render`: ``report.md`` from the summary (``report.json``);
- `cli`: ``check-previous``, ``html-plan`` and ``finish`` (the install and the HTML build
  into the report, and gpu_check.sh's exit status).
"""
