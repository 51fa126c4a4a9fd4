"""The protocol: `compare` trains every `Trainable` over its seeds on one task and scores
it beside the two baselines.

Order of work: every argument and the task are checked, then every model is built once
(seeded, the caller's random state kept) and run on two training windows, so that a wrong
forecast shape, a model without parameters or a bad option is refused before the first
epoch of anything. Then each run (build, fit, score) is made; one that raises is recorded
with its seed and error and the others go on; Stop (KeyboardInterrupt) ends the runs and
the comparison returns what finished, with the baselines. The caller's `random`, NumPy
and torch random states are restored on every path.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import numbers
import time

import torch
from torch import nn
from tqdm.auto import tqdm

from ..devices import pick_device
from ..models import RidgeForecaster, seasonal_naive
from ..randomstate import SEED_LIMIT, kept_random_state, set_seed
from ..train import check_fit_options, check_windows, evaluate, fit, predict, window_errors
from ..validation import check_bool, check_count, check_text
from .results import NAIVE, RIDGE, Comparison, Entry, RunFailure, TrainingRecord

__all__ = ["Trainable", "compare", "rescore"]

FIT_EPOCHS = inspect.signature(fit).parameters["epochs"].default      # fit's budget when none is given
SET_BY_COMPARE = {                      # fit options compare sets itself, and what to pass instead
    "seed": "compare seeds every run itself: pass seeds=... (a count or a list), not seed",
    "progress": "compare sets progress for every run: pass progress=... to compare",
    "device": "compare sets device for every model: pass device=... to compare",
}


# --- what to compare ------------------------------------------------------------------------------

def _check_own_options(options: dict) -> dict:
    """Options for `fit` that compare does not set itself, each in its range."""
    for name, why in SET_BY_COMPARE.items():
        if name in options:
            raise TypeError(why)
    return check_fit_options(**options)


class Trainable:
    """A model to train in a comparison: ``build(revin=...)`` returns a fresh model (the
    comparison passes its own ``revin`` so that every model gets the same input
    normalisation); ``seeds`` (a count or a list) and ``fit_options`` for
    `labsupport.train.fit` (``lr``, ``batch_size``, ``schedule``, ...) override the
    comparison's for this model. Both are checked here.

    >>> from labsupport.models import LinearForecaster
    >>> spec = Trainable(lambda revin: LinearForecaster(lookback=48, horizon=12, revin=revin),
    ...                  seeds=2, lr=1e-2)
    >>> spec.seeds, spec.fit_options
    ([0, 1], {'lr': 0.01})
    """

    def __init__(self, build, *, seeds=None, **fit_options):
        if not callable(build):
            raise TypeError(f"build must be a callable build(revin=bool) -> nn.Module, "
                            f"got {type(build).__name__}")
        _check_own_options(fit_options)
        self.build = build
        self.seeds = None if seeds is None else _seed_list(seeds)
        self.fit_options = dict(fit_options)

    def __repr__(self) -> str:
        return f"Trainable(seeds={self.seeds}, {self.fit_options})"


SEEDS_HELP = "seeds must be a count >= 1 or a list of distinct ints >= 0"


def _seed_list(seeds) -> list:
    """``seeds`` as a list: a count n gives 0..n-1; a list is kept (distinct ints in [0, 2**32)).
    ``TypeError`` for what is neither an int nor a list of ints, ``ValueError`` for a count
    below 1, a repeat, or a seed outside NumPy's range."""
    if isinstance(seeds, numbers.Integral) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ValueError(f"{SEEDS_HELP}, got {int(seeds)}")
        return list(range(int(seeds)))
    if isinstance(seeds, float) and seeds.is_integer() and seeds >= 1:
        raise TypeError(f"{SEEDS_HELP}, got {seeds!r}; pass seeds={int(seeds)}")
    listed = list(seeds) if isinstance(seeds, (list, tuple, range)) else None
    if listed is None or not all(isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in listed):
        raise TypeError(f"{SEEDS_HELP}, got {seeds!r}")
    if not listed or min(listed) < 0 or len(set(listed)) != len(listed):
        raise ValueError(f"{SEEDS_HELP}, got {seeds!r}")
    if max(listed) >= SEED_LIMIT:
        raise ValueError(f"seeds must be ints below 2**32 (NumPy's seed range), got {seeds!r}")
    return [int(s) for s in listed]


# --- checks before any training -------------------------------------------------------------------

def _inputs_only(inputs):
    """The window x (N, L, C) of inputs that may be a tuple such as (x, time)."""
    return inputs[0] if isinstance(inputs, tuple) else inputs


def _check_task(task) -> int:
    """Refuse a task the protocol cannot score fairly; return its overlap h = ceil(T / stride)."""
    missing = [a for a in ("train", "val", "test", "scaler", "horizon", "lookback", "eval_stride")
               if not hasattr(task, a)]
    if missing:
        raise TypeError(f"task must be a labsupport.data.ForecastTask (book_task(...)), "
                        f"got {type(task).__name__} without {missing}")
    targets = {part: check_windows(part, getattr(task, part))[1] for part in ("train", "val", "test")}
    for part in ("val", "test"):
        if targets[part].shape[1:] != targets["train"].shape[1:]:
            raise ValueError(f"{part} targets are (N, {', '.join(map(str, targets[part].shape[1:]))}) but "
                             f"train targets (N, {', '.join(map(str, targets['train'].shape[1:]))}); make "
                             "every part with the same horizon and channels")
    if task.horizon != targets["train"].shape[1]:
        raise ValueError(f"task.horizon {task.horizon} != the targets' {targets['train'].shape[1]} steps; "
                         "make the task with book_task(horizon=...)")
    stride = check_count("task.eval_stride", task.eval_stride, least=1, what="steps between test windows")
    overlap = math.ceil(task.horizon / stride)
    if len(targets["test"]) <= overlap:
        raise ValueError(f"{len(targets['test'])} test windows: the paired test needs more than overlap = "
                         f"{overlap} (windows whose targets overlap one window's); use a longer test part "
                         "or a larger eval_stride")
    return overlap


def _check_arguments(models, revin, naive_period, unit, progress, lookback) -> None:
    check_bool("revin", revin)
    if (not isinstance(models, dict) or not all(isinstance(m, Trainable) for m in models.values())
            or not all(isinstance(name, str) and name for name in models)):
        raise TypeError("models must be a dict of name -> Trainable(build, seeds=..., **fit_options), "
                        f"each name a non-empty str, got {models!r:.80}")
    clash = {NAIVE, RIDGE} & set(models)
    if clash:
        raise ValueError(f"model names {sorted(clash)} are taken by the baselines; rename them")
    if naive_period is not None:
        check_count("naive_period", naive_period, least=1, optional=True,
                    what="the seasonal naive's period in steps")
        if naive_period > lookback:
            raise ValueError(f"the seasonal naive forecast needs {naive_period} steps of history, but the "
                             f"windows hold {lookback}; pass naive_period <= {lookback}, or "
                             "naive_period=None and show the naive of a task with longer windows "
                             "(book_task's test targets do not depend on the lookback)")
    check_text("unit", unit, optional=True, example="'MW'")
    check_bool("progress", progress)


def _check_scaler(task, unit) -> None:
    """The MAE in the series' unit needs a scaler that maps every target channel back."""
    if unit is None:
        return
    channels = list(range(task.test[1].shape[-1]))
    try:
        task.scaler.inverse_transform(task.test[1][:1], channels)
    except (IndexError, ValueError, RuntimeError) as err:
        raise ValueError(f"task.scaler cannot map the targets' {len(channels)} channel(s) back to {unit} "
                         f"({err}); fit it on the target channels, or pass unit=None for a series "
                         "without a unit") from err


def _merged_options(name: str, compare_options: dict, spec: Trainable) -> dict:
    """The comparison's fit options with the model's on top, checked over the whole budget
    (every epoch's schedule multiplier), the model named in the message."""
    options = {**compare_options, **spec.fit_options}
    epochs = options.get("epochs", FIT_EPOCHS)
    try:
        check_fit_options(**{**options, "epochs": epochs})
    except (TypeError, ValueError) as err:
        raise type(err)(f"{name}: {err}") from err
    return options


def _uses_revin(model) -> bool:
    """True when ``model`` normalises each window (an `InstanceNorm`, or ridge's flag)."""
    revin = getattr(model, "revin", None)
    return revin is True or isinstance(revin, nn.Module)


def _check_built(name: str, model, revin: bool) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"{name}: build(revin=...) must return an nn.Module, got {type(model).__name__}")
    if _uses_revin(model) != revin:
        raise ValueError(f"{name} was built with revin={_uses_revin(model)}, but this comparison uses "
                         f"revin={revin} for every model; pass it through: "
                         "lambda revin: Model(..., revin=revin)")


def _take_two(inputs):
    """The first two windows of ``inputs`` (a tensor, or a tuple such as (x, time))."""
    if isinstance(inputs, torch.Tensor):
        return inputs[:2]
    return tuple(None if t is None else t[:2] for t in inputs)


def _check_model(name: str, spec: Trainable, seed: int, task, revin: bool, device) -> int:
    """Build the model once and forecast two training windows; return its parameter count."""
    with kept_random_state():
        set_seed(seed)
        try:
            model = spec.build(revin=revin)
        except Exception as err:
            err.add_note(f"{name}: build(revin={revin}) raised this while the models were checked, "
                         "before any training")
            raise
        _check_built(name, model, revin)
        if not any(p.requires_grad for p in model.parameters()):
            raise ValueError(f"{name} has no trainable parameters; fit needs some (a baseline without "
                             "training belongs beside the comparison, not in it)")
        inputs, targets = _take_two(task.train[0]), task.train[1][:2]
        try:
            forecast = predict(model, inputs, device=device)
        except Exception as err:
            err.add_note(f"{name}: its forecast of two training windows raised this, before any training")
            raise
    if forecast.shape != targets.shape:
        raise ValueError(f"{name} forecasts shape {tuple(forecast.shape)} on two training windows, but the "
                         f"task's targets are {tuple(targets.shape)} (N, horizon, channels); build it with "
                         f"horizon={targets.shape[1]} and {targets.shape[2]} channel(s) before training "
                         "anything")
    return sum(p.numel() for p in model.parameters())


# --- the runs ---------------------------------------------------------------------------------------

def _score(model, task, scaler, channels, unit, device) -> tuple:
    """(Metrics, window losses) of ``model`` on the test windows."""
    metrics = evaluate(model, task.test, scaler=scaler, channels=channels, unit=unit or "", device=device)
    return metrics, window_errors(model, task.test, scaler=scaler, channels=channels, device=device)


def _train_one(name, spec, seed, task, revin, device, options) -> tuple:
    """Build and train one model with one seed: (model, history). A diverged run that kept
    an epoch is a result; one that kept none raises its FloatingPointError."""
    with kept_random_state():
        set_seed(seed)
        model = spec.build(revin=revin)
        _check_built(name, model, revin)
        try:
            history = fit(model, task.train, task.val, seed=seed, progress=False, device=device, **options)
        except FloatingPointError as err:
            history = getattr(err, "history", None)
            if history is None or not history.val_loss:
                raise
    return model, history


def _run_all(jobs, models, options, params, task, revin, device, score, progress) -> tuple:
    """Every (name, seed) run: {name: Entry}, and whether Stop ended them early."""
    entries, bar = {}, tqdm(jobs, desc="comparison", leave=False, disable=not progress)
    try:
        for name, seed in bar:
            bar.set_postfix_str(f"{name}, seed {seed}")
            try:
                model, history = _train_one(name, models[name], seed, task, revin, device, options[name])
                if not history.val_loss:                # Stop before its first epoch ended
                    return entries, True
                metrics, losses = score(model)
            except KeyboardInterrupt:                   # a run Stop cut short is not recorded
                return entries, True
            except Exception as err:                    # recorded, never ranked; the others go on
                entry = entries.setdefault(name, Entry(name, True, params[name]))
                entry.failures.append(RunFailure.of(seed, err))
                continue
            entry = entries.setdefault(name, Entry(name, True, params[name]))
            _add_run(entry, seed, model, history, metrics, losses)
            if history.stop_reason == "interrupted":    # Stop pressed inside fit: this run is kept
                return entries, True
    finally:
        bar.close()
    return entries, False


def _add_run(entry, seed, model, history, metrics, losses) -> None:
    entry.seeds.append(seed)
    entry.records.append(TrainingRecord.of(history))
    entry.histories.append(history)
    entry.models.append(model)
    entry.metrics.append(metrics)
    entry.window_losses.append(losses)


class _OnWindow(nn.Module):
    """A baseline that reads only the window x, whatever else the task's inputs carry."""

    def __init__(self, forecast):
        super().__init__()
        self.forecast = forecast

    def forward(self, x, *rest):
        return self.forecast(x)


def _baselines(task, revin, naive_period, channels, score) -> list:
    """The ridge (fitted here, penalty on validation) and the seasonal naive, scored; a
    baseline that raises is recorded as failed, like a run."""
    x_train, x_val = _inputs_only(task.train[0]), _inputs_only(task.val[0])
    entries = []
    try:
        started = time.perf_counter()
        ridge = RidgeForecaster(lookback=x_train.shape[1], horizon=task.horizon, channels=len(channels),
                                revin=revin).fit((x_train, task.train[1]), (x_val, task.val[1]))
        entries.append(Entry(RIDGE, False, sum(p.numel() for p in ridge.parameters()),
                             models=[_OnWindow(ridge)], fit_seconds=time.perf_counter() - started))
    except Exception as err:
        entries.append(Entry(RIDGE, False, 0, failures=[RunFailure.of(None, err)]))
    if naive_period is not None:
        name = naive_name(naive_period, task)
        naive = _OnWindow(lambda x: seasonal_naive(x, naive_period, task.horizon))
        entries.append(Entry(name, False, 0, models=[naive]))
    for entry in entries:
        if entry.models:
            try:
                metrics, losses = score(entry.models[0])
            except Exception as err:
                entry.failures.append(RunFailure.of(None, err))
                continue
            entry.metrics.append(metrics)
            entry.window_losses.append(losses)
    return entries


FROM_TASK = "from the task"      # compare's default unit and naive period: read off the task


def naive_name(period: int, task) -> str:
    """The seasonal naive's name for ``period`` steps of ``task``: `NAIVE` for a week,
    "seasonal naive (daily)" for a day, else "seasonal naive (N steps)". A task that does not
    know its step is taken as hourly (the book's)."""
    week = task.steps_per("week") if hasattr(task, "steps_per") and task.step is not None else 168
    day = task.steps_per("day") if hasattr(task, "steps_per") and task.step is not None else 24
    if period == week:
        return NAIVE
    return "seasonal naive (daily)" if period == day else f"seasonal naive ({period} steps)"


def default_naive_period(task, lookback: int) -> int:
    """A week of the task's steps if the lookback holds it, else a day; else a clear refusal."""
    known = hasattr(task, "steps_per") and task.step is not None
    week, day = (task.steps_per("week"), task.steps_per("day")) if known else (168, 24)
    for period in (week, day):
        if period is not None and period <= lookback:
            return period
    step = f"{task.step}" if known else "hour"
    raise ValueError(f"the seasonal naive repeats the last day or week, {day} or {week} steps of one {step}, "
                     f"but the windows hold {lookback} steps; pass naive_period=<steps> (at most "
                     f"{lookback}), naive_period=None to leave the naive out, or a longer lookback")


def compare(task, models: dict, *, revin: bool, seeds=3, naive_period=FROM_TASK,
            device=None, unit=FROM_TASK, progress: bool = True, **fit_options) -> Comparison:
    """Train each of ``models`` (name -> `Trainable`) on ``task`` over its seeds and score
    it on the test windows beside the seasonal naive forecast and the ridge.

    ``task``: a `labsupport.data.ForecastTask`; every model gets its train, validation and
    test windows unchanged, and its ``eval_stride`` gives the paired test's overlap.
    ``revin``: instance normalisation for every trained model and for the ridge (each
    model's ``build`` receives it, and a model built otherwise is refused). ``seeds``: a
    count or a list of ints in [0, 2**32), used where a `Trainable` gives none; run k seeds
    Python, NumPy and PyTorch with its seed before building and training. ``naive_period``:
    the seasonal naive's period in steps; by default a week of the task's steps (168 of an
    hourly series) where the lookback holds it, else a day (`default_naive_period`); its name
    says which (`naive_name`; `NAIVE` reads whichever naive there is); None leaves it out.
    ``unit``: the unit of the series' values for the MAE in original values; by default the
    task's (``task.unit``: "MW" for the book's task, None for a series without one: no such
    column). ``fit_options`` go to
    `labsupport.train.fit` (``epochs``, ``lr``, ``batch_size``, ``patience``,
    ``schedule``, ``max_seconds``, ...), each `Trainable`'s own on top.

    Everything that can be checked is checked before the first epoch (the module doc);
    a run that raises is recorded in its model's `Entry` (``failures``) and the model is
    never ranked; Stop returns what finished, with ``interrupted=True``. The caller's
    random states are as they were on every path.
    """
    with kept_random_state():
        return _compare(task, models, revin, seeds, naive_period, device, unit, progress, fit_options)


def _compare(task, models, revin, seeds, naive_period, device, unit, progress, fit_options) -> Comparison:
    overlap = _check_task(task)
    lookback = _inputs_only(task.train[0]).shape[1]
    if unit == FROM_TASK:
        unit = getattr(task, "unit", None)
    if naive_period == FROM_TASK:
        naive_period = default_naive_period(task, lookback)
    _check_arguments(models, revin, naive_period, unit, progress, lookback)
    _check_own_options(fit_options)
    default_seeds = _seed_list(seeds)
    options = {name: _merged_options(name, fit_options, spec) for name, spec in models.items()}
    device = pick_device(device)
    _check_scaler(task, unit)
    params = {name: _check_model(name, spec, (spec.seeds or default_seeds)[0], task, revin, device)
              for name, spec in models.items()}
    channels = list(range(task.train[1].shape[-1]))
    scaler = task.scaler if unit is not None else None

    def score(model):
        return _score(model, task, scaler, channels, unit, device)

    jobs = [(name, seed) for name, spec in models.items() for seed in (spec.seeds or default_seeds)]
    entries, interrupted = _run_all(jobs, models, options, params, task, revin, device, score, progress)
    for entry in _baselines(task, revin, naive_period, channels, score):
        entries[entry.name] = entry
    windows = {k: len(getattr(task, k)[1]) for k in ("train", "val", "test")}
    return Comparison(entries, revin, windows, unit, overlap=overlap, interrupted=interrupted,
                      steps=_steps(task))


def _steps(task) -> tuple:
    """(lookback, horizon): the steps of a window's input and of its target."""
    return _inputs_only(task.test[0]).shape[1], task.test[1].shape[1]


def rescore(comparison: Comparison, task, *, naive_period=FROM_TASK, device=None) -> Comparison:
    """``comparison``'s trained runs scored on the test windows of another ``task`` (longer
    windows of the same series, say), beside the baselines fitted anew on ``task``: a
    `Comparison` whose table and verdicts use those windows.

    Every run keeps its training record (why it stopped, its epochs and times), so budget
    awareness carries over. A run that cannot forecast ``task``'s windows (a learned position
    table too short for them raises a ValueError) is recorded as failed, with the error, and
    never ranked. ``task``: a `labsupport.data.ForecastTask` whose targets have the
    comparison's horizon and channels; the ridge is refitted on its training and validation
    windows, with the comparison's ``revin``, and the seasonal naive reads its windows.
    """
    overlap = _check_task(task)
    if not isinstance(comparison, Comparison):
        raise TypeError(f"comparison must be what compare(...) returned, got {type(comparison).__name__}")
    if naive_period == FROM_TASK:
        naive_period = default_naive_period(task, _inputs_only(task.train[0]).shape[1])
    channels = list(range(task.test[1].shape[-1]))
    unit = comparison.unit
    scaler = task.scaler if unit is not None else None
    score = lambda model: _score(model, task, scaler, channels, unit, device)   # noqa: E731
    entries = {}
    for name, entry in comparison.entries.items():
        if not entry.trained:
            continue
        kept = dataclasses.replace(entry, metrics=[], window_losses=[], records=[], histories=[],
                                   seeds=[], models=[], failures=list(entry.failures))
        for i, model in enumerate(entry.models):
            try:
                metrics, losses = score(model)
            except ValueError as err:
                kept.failures.append(RunFailure.of(entry.seeds[i], err))
                continue
            kept.metrics.append(metrics)
            kept.window_losses.append(losses)
            for field_name in ("records", "histories", "seeds", "models"):
                values = getattr(entry, field_name)
                if i < len(values):
                    getattr(kept, field_name).append(values[i])
        entries[name] = kept
    for entry in _baselines(task, comparison.revin, naive_period, channels, score):
        entries[entry.name] = entry
    windows = {k: len(getattr(task, k)[1]) for k in ("train", "val", "test")}
    return dataclasses.replace(comparison, entries=entries, windows=windows, overlap=overlap,
                               steps=_steps(task))
