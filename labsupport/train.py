"""Training and evaluation: one loop for every forecaster in the book.

`fit` trains on (inputs, targets) tensors with Adam and an MSE loss, with an optional
learning-rate schedule (`labsupport.schedules`: the official PatchTST and DLinear ones), stops early
on the validation loss, restores the best weights (also when interrupted or when the loss
turns non-finite), shows a progress bar, records the wall time of each epoch and says why
it stopped. It seeds its own forked generators and leaves the caller's alone, and refuses
an option outside its range by name, with the fix (`check_fit_options`), before training.
`evaluate` scores forecasts with MSE and MAE, on the scaled values and in the series'
original unit; `window_errors` gives the same errors per test window (for paired tests).
`set_seed` and `pick_device`, which the notebooks call beside `fit`, are public here too.
"""
from __future__ import annotations

import copy
import inspect
import math
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import LambdaLR, ReduceLROnPlateau
from tqdm.auto import tqdm

from .devices import pick_device
from .randomstate import seeded_torch, set_seed
from .schedules import Plateau, multiplier_at, rate, resolve
from .validation import (
    NonFiniteError,
    check_batch_size,
    check_bool,
    check_count,
    check_real,
    check_text,
    check_windows,
    count_windows,
)

__all__ = ["fit", "evaluate", "predict", "window_errors", "check_fit_options", "History", "Metrics",
           "set_seed", "pick_device"]

_FIT_CHECKS = {   # fit's keyword options -> the check of one value
    "epochs": lambda v: check_count("epochs", v, least=1, what="the epoch budget"),
    "lr": lambda v: check_real("lr", v, positive=True, what="Adam's learning rate", fix="pass e.g. lr=1e-3"),
    "batch_size": check_batch_size,
    "patience": lambda v: check_count(
        "patience", v, least=1, what="epochs without a better validation loss before stopping",
        why="patience=0 would stop after one epoch and call it converged; pass e.g. patience=3, or "
            "patience=epochs for a fixed budget"),
    "weight_decay": lambda v: check_real("weight_decay", v, positive=False, what="Adam's L2 penalty",
                                          fix="pass weight_decay=0.0 for none"),
    "clip": lambda v: check_real(
        "clip", v, positive=True, optional=True, what="the largest gradient norm",
        fix="a negative clip would ascend the gradient and 0 would freeze training: pass e.g. clip=1.0, "
            "or clip=None for no clipping"),
    "device": lambda v: v,                               # pick_device names a bad one
    "seed": lambda v: check_count("seed", v, least=0, optional=True,
                                   what="the seed of batch order and dropout"),
    "max_seconds": lambda v: check_real(
        "max_seconds", v, positive=True, optional=True, what="a time budget in seconds",
        fix="NaN or 0 would never or always stop: pass e.g. max_seconds=600, or max_seconds=None for no "
            "limit"),
    "progress": lambda v: check_bool("progress", v),
    "desc": lambda v: check_text("desc", v, optional=True),
    "schedule": lambda v: resolve(v),
}


def check_fit_options(**options) -> dict:
    """Check keyword options of `fit` (any subset) before any training: each name is one of
    fit's, each value in its range (the message names the option, what arrived and the fix).
    Given ``epochs``, a ``schedule`` is also asked for every epoch's multiplier. Returns the
    options as fit reads them (ints as int, numbers as float)."""
    unknown = sorted(set(options) - set(_FIT_CHECKS))
    if unknown:
        raise TypeError(f"fit takes no option {', '.join(map(repr, unknown))}; its options are "
                        f"{', '.join(_FIT_CHECKS)}")
    checked = {name: _FIT_CHECKS[name](value) for name, value in options.items()}
    if "schedule" in options and "epochs" in options:
        lr = checked.get("lr", _FIT_DEFAULTS["lr"])
        for epoch in range(checked["epochs"]):
            rate(lr, checked["schedule"], epoch)
    if "schedule" in options:
        checked["schedule"] = options["schedule"]          # as given: None, a name or the callable
    return checked


def _take(inputs, idx, device) -> tuple:
    """The rows ``idx`` of every input, on ``device``, as the model's positional arguments."""
    if isinstance(inputs, torch.Tensor):
        return (inputs[idx].to(device),)
    return tuple(None if t is None else t[idx].to(device) for t in inputs)


STOP_REASONS = {
    "converged": "converged: patience ran out",
    "epochs": "the epoch budget ran out",
    "time": "stopped by max_seconds",
    "interrupted": "interrupted",
    "diverged": "diverged: non-finite loss",
}


@dataclass
class History:
    """What `fit` saw: losses, seconds and learning rate per epoch, the epoch kept, why it stopped.

    ``stop_reason``: ``"converged"`` (``patience`` epochs without a better validation loss),
    ``"epochs"`` (the epoch budget ended first), ``"time"`` (``max_seconds``),
    ``"interrupted"`` (KeyboardInterrupt, e.g. the notebook's Stop button) or, on the
    history attached to `fit`'s FloatingPointError, ``"diverged"``.
    """

    train_loss: list = field(default_factory=list)
    val_loss: list = field(default_factory=list)
    epoch_seconds: list = field(default_factory=list)
    learning_rates: list = field(default_factory=list)
    best_epoch: int = -1
    stopped_early: bool = False
    stop_reason: str = ""
    total_seconds: float = 0.0          # training wall time, validation included

    @property
    def converged(self) -> bool:
        """True when validation stopped improving (patience ran out), not the budget."""
        return self.stop_reason == "converged"

    @property
    def best_val_loss(self) -> float:
        return self.val_loss[self.best_epoch] if self.val_loss else float("nan")

    @property
    def seconds_per_epoch(self) -> float:
        """Median wall time of one training epoch (validation excluded); NaN before the first."""
        return statistics.median(self.epoch_seconds) if self.epoch_seconds else float("nan")

    def __str__(self) -> str:
        reason = STOP_REASONS.get(self.stop_reason, self.stop_reason)
        if not self.val_loss:
            return f"no epoch finished ({reason})"
        return (f"{len(self.val_loss)} epochs ({reason}); best val MSE {self.best_val_loss:.4f} "
                f"(epoch {self.best_epoch + 1}); {self.seconds_per_epoch:.2f} s/epoch")


def _shuffled(n: int, batch_size: int, generator=None):
    """Batches of a random order; ``generator=None`` draws from torch's global generator."""
    return torch.randperm(n, generator=generator).split(batch_size)


def _batches(n: int, batch_size: int):
    return torch.arange(n).split(batch_size)


@torch.no_grad()
def predict(model, inputs, *, batch_size: int = 1024, device=None) -> torch.Tensor:
    """Forecasts for ``inputs (N, L, C)`` in batches, returned on the CPU. ``inputs``
    may also be a tuple of tensors, passed to the model positionally (for example
    ``(x, time)``). ``model`` may be any callable; modules are put in eval mode and
    on ``device``."""
    batch_size = check_batch_size(batch_size)
    device = pick_device(device)
    if isinstance(model, nn.Module):
        model.eval().to(device)
    outs = [model(*_take(inputs, idx, device)).cpu() for idx in _batches(count_windows(inputs), batch_size)]
    return torch.cat(outs)


def _train_epoch(model, optimiser, train, batches, device, clip, epoch: int) -> float:
    """One pass over ``batches``; the mean training loss. A non-finite loss raises
    before it reaches the weights; the first batch's shapes are compared."""
    model.train()
    x_train, y_train = train
    total = 0.0
    for i, idx in enumerate(batches):
        with _diverged_inside(f"epoch {epoch + 1}, batch {i + 1} of {len(batches)}"):
            forecast = model(*_take(x_train, idx, device))
        target = y_train[idx].to(device)
        if i == 0 and forecast.shape != target.shape:
            raise ValueError(f"forecast shape {tuple(forecast.shape)} != target shape {tuple(target.shape)}: "
                             "the model must forecast exactly the targets (B, T, C); check its horizon "
                             "and channels against the windows'")
        loss = F.mse_loss(forecast, target)
        value = loss.item()
        if not math.isfinite(value):
            raise FloatingPointError(f"training loss is {value} at epoch {epoch + 1}, batch {i + 1} of "
                                     f"{len(batches)}")
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimiser.step()
        total += value * len(idx)
    return total / len(y_train)


@contextmanager
def _diverged_inside(when: str):
    """A kernel's `NonFiniteError` met inside the model, as a diverged run's FloatingPointError:
    the data were checked finite, so NaN or inf activations come from the weights."""
    try:
        yield
    except NonFiniteError as err:
        raise FloatingPointError(f"the model's forward pass met {err.value} in {err.name} at {err.where} "
                                 f"({when})") from err


def _stop_reason(waited: int, patience: int, started: float, max_seconds) -> str:
    if waited >= patience:
        return "converged"
    if max_seconds is not None and time.perf_counter() - started > max_seconds:
        return "time"
    return ""


def _scheduler(optimiser, multiplier):
    """PyTorch's scheduler for ``multiplier``: `Plateau` as ``ReduceLROnPlateau`` (a cut after
    every epoch that does not beat the best), anything else as ``LambdaLR`` (each epoch's
    multiplier checked by `multiplier_at`)."""
    if isinstance(multiplier, Plateau):
        return ReduceLROnPlateau(optimiser, mode="min", factor=multiplier.factor, patience=0,
                                 threshold=0.0, threshold_mode="abs", eps=0.0)
    return LambdaLR(optimiser, lambda epoch: multiplier_at(multiplier, epoch))


def fit(model: nn.Module, train, val, *, epochs: int = 20, lr: float = 1e-3, batch_size: int = 256,
        patience: int = 3, weight_decay: float = 0.0, clip: float | None = 1.0, device=None,
        seed: int | None = 0, max_seconds: float | None = None, progress: bool = True,
        desc: str | None = None, schedule=None) -> History:
    """Train ``model`` with Adam on the MSE; early stopping on the validation MSE.

    ``train`` and ``val`` are ``(inputs (N, L, C), targets (N, T, C))`` tensor pairs;
    ``inputs`` may be a tuple of tensors passed to the model positionally. They must be
    finite (the first window holding NaN or inf is named), and the model's forecast must
    have the targets' shape.
    Stops after ``patience`` epochs without improvement, after ``epochs``, when
    ``max_seconds`` of training have passed, or on KeyboardInterrupt (the notebook's Stop
    button: the history so far is returned); the weights of the best validation epoch are
    restored in every case. A non-finite loss raises ``FloatingPointError`` naming the
    epoch and batch, with the best weights so far restored and the history as ``.history``.

    ``schedule``: the learning rate of epoch e (from 0) is ``lr * schedule(e)``, set at the
    start of each epoch; None or ``"constant"``, ``"type1"`` (DLinear's official schedule:
    ``0.5 ** max(0, e - 1)``), ``"type3"`` (PatchTST's: ``0.9 ** max(0, e - 3)``),
    ``"plateau"`` or a `Plateau` (the rate cut after each epoch that does not improve on the
    best validation loss: a run ends annealed and by early stopping) or a callable.

    ``seed``: an int makes the batch order and dropout reproducible; torch's generators are
    seeded inside `torch.random.fork_rng`, so the caller's torch (CPU and the CUDA device
    trained on), NumPy and ``random`` states are as they were. ``seed=None`` draws the batch
    order and dropout from torch's global generator (seed it first for reproducibility),
    which ``fit`` then advances. The model's initial weights are the caller's: seed before
    building it.

    Ranges (`check_fit_options`, before any training): ``epochs``, ``batch_size`` and
    ``patience`` ints >= 1; ``lr`` > 0 and ``weight_decay`` >= 0, finite; ``clip`` and
    ``max_seconds`` None or > 0 and finite; ``seed`` None or an int >= 0; never a bool for a
    number nor a float for an int.
    """
    checked = check_fit_options(epochs=epochs, lr=lr, batch_size=batch_size, patience=patience,
                                weight_decay=weight_decay, clip=clip, seed=seed, max_seconds=max_seconds,
                                progress=progress, desc=desc, schedule=schedule)
    epochs, lr, batch_size, patience, weight_decay, clip, seed, max_seconds = (checked[name] for name in (
        "epochs", "lr", "batch_size", "patience", "weight_decay", "clip", "seed", "max_seconds"))
    x_train, y_train = check_windows("train", train)
    x_val, y_val = check_windows("val", val)
    if y_val.shape[1:] != y_train.shape[1:]:
        raise ValueError(f"val targets are (N, {', '.join(map(str, y_val.shape[1:]))}) but train targets "
                         f"(N, {', '.join(map(str, y_train.shape[1:]))}); make both with the same horizon "
                         "and channels")
    x_shapes = [tuple(t.shape[1:]) for t in ((x_train, x_val) if isinstance(x_train, torch.Tensor)
                                                else (x_train[0], x_val[0]))]
    if x_shapes[0] != x_shapes[1]:
        raise ValueError(f"val inputs are (N, {', '.join(map(str, x_shapes[1]))}) but train inputs "
                         f"(N, {', '.join(map(str, x_shapes[0]))}); make both with the same lookback and "
                         "channels (e.g. one book_task or make_task for both)")
    multiplier = resolve(schedule)
    device = pick_device(device)
    model.to(device)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    scheduler = _scheduler(optimiser, multiplier)
    history, best_state, waited, started = History(), None, 0, time.perf_counter()
    bar = tqdm(range(epochs), desc=desc or type(model).__name__, leave=False, disable=not progress)
    try:
        with seeded_torch(seed, device) as generator:
            for epoch in bar:
                epoch_lr = optimiser.param_groups[0]["lr"]
                t0 = time.perf_counter()
                batches = _shuffled(len(y_train), batch_size, generator)
                train_loss = _train_epoch(model, optimiser, (x_train, y_train), batches, device, clip, epoch)
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                seconds = time.perf_counter() - t0
                with _diverged_inside(f"validation after epoch {epoch + 1}"):
                    val_loss = F.mse_loss(predict(model, x_val, device=device), y_val).item()
                if not math.isfinite(val_loss):
                    raise FloatingPointError(f"validation loss is {val_loss} after epoch {epoch + 1}")
                history.learning_rates.append(epoch_lr)
                history.epoch_seconds.append(seconds)
                history.train_loss.append(train_loss)
                history.val_loss.append(val_loss)
                bar.set_postfix(train=f"{train_loss:.4f}", val=f"{val_loss:.4f}")
                if best_state is None or val_loss < history.best_val_loss:
                    history.best_epoch, waited = epoch, 0
                    best_state = copy.deepcopy(model.state_dict())
                else:
                    waited += 1
                scheduler.step(val_loss) if isinstance(scheduler, ReduceLROnPlateau) else scheduler.step()
                history.stop_reason = _stop_reason(waited, patience, started, max_seconds)
                if history.stop_reason:
                    break
            else:
                history.stop_reason = "epochs"
    except KeyboardInterrupt:
        history.stop_reason = "interrupted"
        if progress:
            print(f"fit interrupted: {history}")
    except FloatingPointError as err:
        history.stop_reason = "diverged"
        kept = (f"the weights of epoch {history.best_epoch + 1} (best val MSE {history.best_val_loss:.4g}) "
                "are restored" if best_state is not None else "no epoch finished, nothing to restore")
        err.args = (f"{err.args[0]}: {kept}. Try a smaller lr (now {lr:g}), gradient clipping "
                    f"(clip={clip}), or look for a division by zero or a log of a non-positive value "
                    "in the model; the data were checked finite",)
        err.history = history
        raise
    finally:
        bar.close()
        history.total_seconds = time.perf_counter() - started
        history.stopped_early = history.stop_reason != "epochs" and len(history.val_loss) < epochs
        if best_state is not None:
            model.load_state_dict(best_state)
    return history


_FIT_DEFAULTS = {name: p.default for name, p in inspect.signature(fit).parameters.items()
                 if p.kind is p.KEYWORD_ONLY}


@dataclass(frozen=True)
class Metrics:
    """Forecast errors on the scaled values and in the original unit."""

    mse: float
    mae: float
    mse_orig: float | None = None
    mae_orig: float | None = None
    unit: str = ""
    nonfinite: str = ""       # which windows a NaN or inf forecast covers ('' when none)

    def __str__(self) -> str:
        text = f"MSE {self.mse:.4f}, MAE {self.mae:.4f} (scaled)"
        if self.mse_orig is not None:
            text += f"; MSE {self.mse_orig:,.0f} {self.unit}^2, MAE {self.mae_orig:,.1f} {self.unit}"
        return text + (f"; {self.nonfinite}" if self.nonfinite else "")


def evaluate(model, data, *, scaler=None, channels=None, unit: str = "MW", batch_size: int = 1024,
             device=None) -> Metrics:
    """Score a forecaster (a module or any callable) on ``data = (inputs, targets)``.

    MSE and MAE are computed on the scaled values (as the forecasting literature
    reports them) and, given the fitted ``scaler``, in the original unit; ``channels``
    picks the scaler's statistics for the target channels (e.g. ``[0]`` for demand).
    ``data`` must be finite (the first window with NaN or inf is named); a forecast that is
    not gives NaN or inf metrics, and ``nonfinite`` says on which windows. A module is
    scored in eval mode and left in the mode it came in.
    """
    forecast, targets = _forecast(model, data, batch_size, device)
    error = forecast - targets
    metrics = {"mse": error.pow(2).mean().item(), "mae": error.abs().mean().item(),
               "nonfinite": _nonfinite_windows(forecast)}
    if scaler is not None:
        orig = scaler.inverse_transform(forecast, channels) - scaler.inverse_transform(targets, channels)
        metrics.update(mse_orig=orig.pow(2).mean().item(), mae_orig=orig.abs().mean().item(), unit=unit)
    return Metrics(**metrics)


def _nonfinite_windows(forecast) -> str:
    """'NaN or inf forecast on 2 of 37 windows, first window 4', or '' when all is finite."""
    bad = ~torch.isfinite(forecast.reshape(len(forecast), -1)).all(dim=1)         # (N,)
    if not bool(bad.any()):
        return ""
    return (f"NaN or inf forecast on {int(bad.sum())} of {len(bad)} windows, first window "
            f"{int(bad.nonzero()[0])}")


def window_errors(model, data, *, scaler=None, channels=None, batch_size: int = 1024,
                  device=None) -> dict:
    """Each window's error on ``data = (inputs, targets (N, T, C))``: ``{"mse", "mae"}`` and,
    given the fitted ``scaler`` (``channels`` as in `evaluate`), ``"mae_orig"`` in the
    series' unit; each a float64 tensor (N,), one loss per window.

    Math: ``mse[n] = mean over t, c of (forecast - target)[n, t, c] ** 2``, ``mae[n]`` the
    mean absolute error; their means over windows are `evaluate`'s MSE and MAE.
    """
    forecast, targets = _forecast(model, data, batch_size, device)
    error = forecast.double() - targets.double()                        # (N, T, C)
    errors = {"mse": error.pow(2).flatten(1).mean(1), "mae": error.abs().flatten(1).mean(1)}
    if scaler is not None:
        orig = (scaler.inverse_transform(forecast, channels).double()
                - scaler.inverse_transform(targets, channels).double())      # (N, T, C)
        errors["mae_orig"] = orig.abs().flatten(1).mean(1)
    return errors


def _forecast(model, data, batch_size, device) -> tuple:
    """(forecast, targets) on ``data`` (finite, its windows checked by name), refused unless the
    forecast has the targets' shape. A module is scored in eval mode and given back in the
    mode it came in."""
    inputs, targets = check_windows("data", data, when="scoring")
    modes = {m: m.training for m in model.modules()} if isinstance(model, nn.Module) else {}
    try:
        forecast = predict(model, inputs, batch_size=batch_size, device=device)
    finally:
        for module, training in modes.items():
            module.training = training
    if forecast.shape != targets.shape:
        raise ValueError(f"forecast shape {tuple(forecast.shape)} != target shape {tuple(targets.shape)}: "
                         "the model must forecast exactly the targets (N, T, C); check its horizon and "
                         "channels against the windows'")
    return forecast, targets
