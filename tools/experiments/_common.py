"""Shared pieces of the experiment scripts: learning-rate schedules by name, 12.4's AR(1)
series, and ``key=value`` options from the command line.

Run every script from the repository root with one thread per process on a shared
machine, e.g. ``OMP_NUM_THREADS=1 python -m tools.experiments.lab_step3 --help``.
"""
from __future__ import annotations

import numpy as np

from labsupport.data import Series
from labsupport.schedules import warmup_cosine


def make_schedule(name: str, epochs: int):
    """A `fit(schedule=...)` by name: constant, cosine (one warm-up epoch, then cosine to 5%
    at ``epochs``), cosine0 (no warm-up), or fit's own type1 (DLinear) and type3 (PatchTST)."""
    if name == "constant":
        return None
    if name == "cosine":
        return warmup_cosine(epochs)
    if name == "cosine0":
        return warmup_cosine(epochs, warmup=0)
    if name in ("type1", "type3", "plateau"):
        return name
    if name.startswith("decay"):                   # decay0.7: a warm-up epoch, then x0.7 per epoch
        rate = float(name.removeprefix("decay"))
        return lambda epoch: 0.5 if epoch == 0 else rate ** (epoch - 1)
    raise ValueError(f"unknown schedule {name!r}; expected constant, cosine, cosine0, type1, type3 "
                     "or decayR (a warm-up epoch, then x R per epoch)")


def parse_value(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"True": True, "False": False, "None": None}.get(text, text)


def parse_options(items) -> dict:
    """['lr=0.002', 'batch_size=256'] -> {'lr': 0.002, 'batch_size': 256}."""
    out = {}
    for item in items or []:
        key, _, value = item.partition("=")
        out[key] = parse_value(value)
    return out


def ar1_like(series, phi=0.9, seed=0):
    """AR(1) values on the timestamps of ``series``, as 12.4's notebook makes them: local
    dependence only, x_t = phi x_(t-1) + noise."""
    noise = np.random.default_rng(seed).standard_normal(len(series.timestamps))
    values = np.zeros(len(noise), dtype=np.float32)
    for t in range(1, len(noise)):
        values[t] = phi * values[t - 1] + noise[t]
    return Series(series.timestamps, values[:, None], ("value",), "AR(1)")
