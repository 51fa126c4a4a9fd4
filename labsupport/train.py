"""Training and evaluation: one loop for every forecaster in the book.

`fit` trains on (inputs, targets) tensors with Adam and an MSE loss, stops early on
the validation loss, restores the best weights, shows a progress bar and records
the wall time of each epoch. `evaluate` scores forecasts with MSE and MAE, on the
scaled values and in the series' original unit.
"""
from __future__ import annotations

import copy
import random
import statistics
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and PyTorch (CPU and every GPU)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def pick_device(device=None) -> torch.device:
    """``device`` if given, else CUDA when available, else the CPU."""
    if device is not None:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _is_inputs(inputs) -> bool:
    """A tensor, or a tuple of tensors (or None) passed to the model positionally."""
    if isinstance(inputs, torch.Tensor):
        return True
    return (isinstance(inputs, tuple) and isinstance(inputs[0], torch.Tensor)
            and all(t is None or isinstance(t, torch.Tensor) for t in inputs))


def _count(inputs) -> int:
    return len(inputs if isinstance(inputs, torch.Tensor) else inputs[0])


def _take(inputs, idx, device) -> tuple:
    """The rows ``idx`` of every input, on ``device``, as the model's positional arguments."""
    if isinstance(inputs, torch.Tensor):
        return (inputs[idx].to(device),)
    return tuple(None if t is None else t[idx].to(device) for t in inputs)


def _check_pair(name: str, pair):
    if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and _is_inputs(pair[0])
            and isinstance(pair[1], torch.Tensor)):
        raise TypeError(f"{name} must be an (inputs, targets) pair of tensors, got {type(pair).__name__}")
    inputs, targets = pair
    if _count(inputs) != len(targets) or len(targets) == 0:
        raise ValueError(f"{name}: {_count(inputs)} inputs and {len(targets)} targets; "
                         "expected the same, non-zero number of windows")
    return inputs, targets


@dataclass
class History:
    """What `fit` saw: losses per epoch, seconds per epoch, the epoch kept."""

    train_loss: list = field(default_factory=list)
    val_loss: list = field(default_factory=list)
    epoch_seconds: list = field(default_factory=list)
    best_epoch: int = -1
    stopped_early: bool = False

    @property
    def best_val_loss(self) -> float:
        return self.val_loss[self.best_epoch]

    @property
    def seconds_per_epoch(self) -> float:
        """Median wall time of one training epoch (validation excluded)."""
        return statistics.median(self.epoch_seconds)

    def __str__(self) -> str:
        stop = ", stopped early" if self.stopped_early else ""
        return (f"{len(self.train_loss)} epochs{stop}; best val MSE {self.best_val_loss:.4f} "
                f"(epoch {self.best_epoch + 1}); {self.seconds_per_epoch:.2f} s/epoch")


def _batches(n: int, batch_size: int, generator=None):
    order = torch.randperm(n, generator=generator) if generator is not None else torch.arange(n)
    return order.split(batch_size)


@torch.no_grad()
def predict(model, inputs, *, batch_size: int = 1024, device=None) -> torch.Tensor:
    """Forecasts for ``inputs (N, L, C)`` in batches, returned on the CPU. ``inputs``
    may also be a tuple of tensors, passed to the model positionally (for example
    ``(x, time)``). ``model`` may be any callable; modules are put in eval mode and
    on ``device``."""
    device = pick_device(device)
    if isinstance(model, nn.Module):
        model.eval().to(device)
    outs = [model(*_take(inputs, idx, device)).cpu() for idx in _batches(_count(inputs), batch_size)]
    return torch.cat(outs)


def fit(model: nn.Module, train, val, *, epochs: int = 20, lr: float = 1e-3, batch_size: int = 256,
        patience: int = 3, weight_decay: float = 0.0, clip: float | None = 1.0, device=None,
        seed: int = 0, max_seconds: float | None = None, progress: bool = True,
        desc: str | None = None) -> History:
    """Train ``model`` with Adam on the MSE; early stopping on the validation MSE.

    ``train`` and ``val`` are ``(inputs (N, L, C), targets (N, T, C))`` tensor pairs;
    ``inputs`` may be a tuple of tensors passed to the model positionally.
    Stops after ``patience`` epochs without improvement, or when ``max_seconds`` of
    training have passed; the weights of the best validation epoch are restored.
    """
    x_train, y_train = _check_pair("train", train)
    _check_pair("val", val)
    device = pick_device(device)
    set_seed(seed)
    model.to(device)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(seed)
    history, best_state, waited, started = History(), None, 0, time.perf_counter()
    bar = tqdm(range(epochs), desc=desc or type(model).__name__, leave=False, disable=not progress)
    for epoch in bar:
        model.train()
        t0, total = time.perf_counter(), 0.0
        for idx in _batches(len(y_train), batch_size, generator):
            loss = F.mse_loss(model(*_take(x_train, idx, device)), y_train[idx].to(device))
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            if clip is not None:
                nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimiser.step()
            total += loss.item() * len(idx)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        history.epoch_seconds.append(time.perf_counter() - t0)
        history.train_loss.append(total / len(y_train))
        history.val_loss.append(F.mse_loss(predict(model, val[0], device=device), val[1]).item())
        bar.set_postfix(train=f"{history.train_loss[-1]:.4f}", val=f"{history.val_loss[-1]:.4f}")
        if best_state is None or history.val_loss[-1] < history.best_val_loss:
            history.best_epoch, waited = epoch, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            waited += 1
        out_of_time = max_seconds is not None and time.perf_counter() - started > max_seconds
        if waited >= patience or out_of_time:
            history.stopped_early = epoch < epochs - 1
            break
    model.load_state_dict(best_state)
    return history


@dataclass(frozen=True)
class Metrics:
    """Forecast errors on the scaled values and in the original unit."""

    mse: float
    mae: float
    mse_orig: float | None = None
    mae_orig: float | None = None
    unit: str = ""

    def __str__(self) -> str:
        text = f"MSE {self.mse:.4f}, MAE {self.mae:.4f} (scaled)"
        if self.mse_orig is not None:
            text += f"; MSE {self.mse_orig:,.0f} {self.unit}^2, MAE {self.mae_orig:,.1f} {self.unit}"
        return text


def evaluate(model, data, *, scaler=None, channels=None, unit: str = "MW", batch_size: int = 1024,
             device=None) -> Metrics:
    """Score a forecaster (a module or any callable) on ``data = (inputs, targets)``.

    MSE and MAE are computed on the scaled values (as the forecasting literature
    reports them) and, given the fitted ``scaler``, in the original unit; ``channels``
    picks the scaler's statistics for the target channels (e.g. ``[0]`` for demand).
    """
    inputs, targets = _check_pair("data", data)
    forecast = predict(model, inputs, batch_size=batch_size, device=device)
    if forecast.shape != targets.shape:
        raise ValueError(f"forecast shape {tuple(forecast.shape)} != target shape {tuple(targets.shape)}")
    error = forecast - targets
    metrics = {"mse": error.pow(2).mean().item(), "mae": error.abs().mean().item()}
    if scaler is not None:
        orig = scaler.inverse_transform(forecast, channels) - scaler.inverse_transform(targets, channels)
        metrics.update(mse_orig=orig.pow(2).mean().item(), mae_orig=orig.abs().mean().item(), unit=unit)
    return Metrics(**metrics)
