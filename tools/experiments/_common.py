"""Shared pieces of the experiment scripts: learning-rate schedules, one training call, timing.

Run every script from the repository root with one thread per process on a shared
machine, e.g. ``OMP_NUM_THREADS=1 python tools/experiments/lab_step3.py --help``.
``train`` calls `labsupport.train.fit` and passes ``schedule`` to it when that `fit`
takes one; with an older `fit` it runs the same loop here (Adam, MSE, gradients
clipped at 1, early stopping on the validation MSE with the best weights restored)
with the schedule applied per epoch, so the scripts run on either.
"""
from __future__ import annotations

import copy
import inspect
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))       # this checkout's labsupport

from labsupport import train as training  # noqa: E402
from labsupport.compare import training_record, warmup_cosine  # noqa: E402


def halving(epoch: int) -> float:
    """DLinear's official schedule ('type1'): the learning rate halves every epoch."""
    return 0.5 ** epoch




def fit_takes_schedule() -> bool:
    return "schedule" in inspect.signature(training.fit).parameters


def train(model, task, *, epochs, lr, batch_size, patience, schedule=None, seed=0,
          weight_decay=0.0, clip=1.0, max_seconds=None, device="cpu"):
    """Train ``model`` on ``task.train`` with early stopping on ``task.val``; returns
    `labsupport.compare.training_record` of the history (stop reason, best epoch, times)."""
    started = time.perf_counter()
    options = dict(epochs=epochs, lr=lr, batch_size=batch_size, patience=patience, seed=seed,
                   weight_decay=weight_decay, clip=clip, max_seconds=max_seconds,
                   device=device, progress=False)
    if schedule is None or fit_takes_schedule():
        if schedule is not None:
            options["schedule"] = schedule
        history = training.fit(model, task.train, task.val, **options)
    else:
        history = _fit_with_schedule(model, task.train, task.val, schedule=schedule, **options)
    return training_record(history, epochs=epochs, patience=patience,
                           wall_seconds=time.perf_counter() - started)


def _fit_with_schedule(model, train, val, *, epochs, lr, batch_size, patience, schedule, seed,
                       weight_decay, clip, max_seconds, device, progress):
    """`labsupport.train.fit`'s loop with a per-epoch learning-rate multiplier."""
    x, y = train
    training.set_seed(seed)
    model.to(device)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(seed)
    history, best, waited, started = training.History(), None, 0, time.perf_counter()
    for epoch in range(epochs):
        for group in optimiser.param_groups:
            group["lr"] = lr * schedule(epoch)
        model.train()
        t0, total = time.perf_counter(), 0.0
        for idx in torch.randperm(len(y), generator=generator).split(batch_size):
            loss = F.mse_loss(model(*training._take(x, idx, device)), y[idx].to(device))
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimiser.step()
            total += loss.item() * len(idx)
        history.epoch_seconds.append(time.perf_counter() - t0)
        history.train_loss.append(total / len(y))
        history.val_loss.append(F.mse_loss(training.predict(model, val[0], device=device), val[1]).item())
        if best is None or history.val_loss[-1] < history.best_val_loss:
            history.best_epoch, waited, best = epoch, 0, copy.deepcopy(model.state_dict())
        else:
            waited += 1
        out_of_time = max_seconds is not None and time.perf_counter() - started > max_seconds
        if waited >= patience or out_of_time:
            history.stopped_early = epoch < epochs - 1
            break
    model.load_state_dict(best)
    return history


def make_schedule(name: str, epochs: int):
    if name == "cosine":
        return warmup_cosine(epochs)
    if name == "cosine0":
        return warmup_cosine(epochs, warmup=0)
    if name == "halving":
        return halving
    if name == "constant":
        return None
    raise ValueError(f"unknown schedule {name!r}; expected constant, cosine, cosine0 or halving")


def fit_with_schedule(model, train, val, *, schedule=None, **options):
    """`labsupport.train.fit`, with ``schedule`` handled here when that `fit` lacks it."""
    if schedule is None or fit_takes_schedule():
        if schedule is not None:
            options["schedule"] = schedule
        return training.fit(model, train, val, **options)
    defaults = dict(epochs=20, lr=1e-3, batch_size=256, patience=3, weight_decay=0.0, clip=1.0,
                    seed=0, max_seconds=None, device="cpu", progress=False)
    options = {**defaults, **options}
    options.pop("desc", None)
    return _fit_with_schedule(model, train, val, schedule=schedule, **options)


def use_schedule_fallback() -> None:
    """Let `labsupport.compare.compare` pass ``schedule`` whatever `fit` is installed."""
    import labsupport.compare as compare_module
    compare_module.fit = fit_with_schedule


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
