"""The protocol's words, shared by the rule (`results`) and the tables (`present`): the two
baselines' names, the metrics and how each reads, and why a training run stopped.

It imports nothing, so that `present` can read them without importing `results`.
"""
from __future__ import annotations

__all__ = ["NAIVE", "RIDGE", "METRICS", "STOP_LABELS", "BUDGET_STOPS"]

NAIVE = "seasonal naive (weekly)"
RIDGE = "ridge (closed form)"
METRICS = {"mse": "test MSE", "mae": "test MAE", "mae_orig": "test MAE (unit)"}
STOP_LABELS = {"converged": "converged", "epochs": "epoch budget", "time": "time budget",
               "interrupted": "interrupted", "diverged": "diverged"}
BUDGET_STOPS = ("epochs", "time", "interrupted")     # more training could change the result
