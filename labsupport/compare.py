"""One comparison protocol for every accuracy table in the book.

`compare` trains every model on the same windows and split, with the same input
normalisation (instance normalisation on for all or off for all), each until its
validation error stops improving (best weights restored), over several seeds, and
scores them beside two baselines that need no training: the weekly seasonal naive
forecast and a closed-form ridge regression on the lookback (`RidgeForecaster`,
penalty chosen on validation, with the same ``revin`` setting). It returns a
`Comparison`, which prints

- ``table()``: parameters, runs, test MSE mean and range over seeds, test MAE (scaled
  and in the series' unit), epochs, seconds per epoch, total training seconds and why
  training stopped (``converged``, or ``epoch budget`` / ``time budget`` when a budget
  ended it first). Its numbers depend on the machine: show it in a cell that the
  regression tests ignore;
- ``verdict(a, b)``: one line that says whether ``a`` beats ``b``, ``b`` beats ``a``, or
  the two are within the seed spread, without numbers, so that a checked cell can
  print it where the outcome holds on every device;

and ``glue(...)``s the means under names the notebook picks, and ``plot()``s the seeds.

The rule (``Comparison.outcome``): A beats B on a metric when the gap between their
means over seeds exceeds the larger of their two spreads. A model's spread is the range
(max - min) of the metric over its seeds: with three seeds a standard deviation is
itself too uncertain to lean on, and the range is what a reader sees in the table. A
baseline is deterministic (spread 0). A trained model with a single run has no spread
of its own and borrows the widest one measured among this comparison's trained models
with several runs (the table says so); when there is none, no verdict is given.

In a notebook::

    result = compare(task, {"DLinear": Trainable(
        lambda revin: LinearForecaster(lookback=336, horizon=24, revin=revin), lr=1e-2)},
        revin=True, seeds=3, epochs=30, patience=3)
    result.table()                         # a cell that nbval ignores
    result.verdict("DLinear", NAIVE)       # a checked cell, where the outcome is robust
    result.glue({"DLinear": "lab_mse_dlinear", RIDGE: "lab_mse_ridge"})
"""
from __future__ import annotations

import inspect
import math
import random
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from .models import RidgeForecaster, seasonal_naive
from .report import table as print_table
from .train import STOP_REASONS as FIT_STOP_REASONS
from .train import evaluate, fit, set_seed
from .validation import check_nonnegative_int, check_positive_int

__all__ = ["NAIVE", "RIDGE", "METRICS", "Trainable", "TrainingRecord", "training_record",
           "Entry", "Comparison", "compare", "warmup_cosine"]

NAIVE = "seasonal naive (weekly)"
RIDGE = "ridge (closed form)"
METRICS = {"mse": "test MSE", "mae": "test MAE", "mae_orig": "test MAE (unit)"}
STOP_REASONS = tuple(FIT_STOP_REASONS)      # converged, epochs, time, interrupted, diverged
STOP_LABELS = {"converged": "converged", "epochs": "epoch budget", "time": "time budget",
               "interrupted": "interrupted", "diverged": "diverged"}


def _check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {sorted(METRICS)}, got {metric!r}")
    return metric


def warmup_cosine(epochs: int, *, warmup: int = 1, floor: float = 0.05):
    """A learning-rate multiplier per epoch for `fit(schedule=...)`: a linear warm-up over
    ``warmup`` epochs, then a cosine from 1 down to ``floor`` at the last of ``epochs``
    (so a short budget ends annealed rather than mid-stride).

    Math: ``m(e) = (e + 1) / (warmup + 1)`` for e < warmup, else
    ``floor + (1 - floor) (1 + cos(pi (e - warmup) / (epochs - 1 - warmup))) / 2``.

    >>> [round(warmup_cosine(4)(e), 3) for e in range(4)]
    [0.5, 1.0, 0.525, 0.05]
    """
    epochs = check_positive_int("epochs", epochs)
    warmup = check_nonnegative_int("warmup", warmup)
    if warmup >= epochs or not 0.0 <= floor <= 1.0:
        raise ValueError(f"need warmup < epochs and 0 <= floor <= 1, got warmup {warmup}, "
                         f"epochs {epochs}, floor {floor}")

    def multiplier(epoch: int) -> float:
        if epoch < warmup:
            return (epoch + 1) / (warmup + 1)
        done = min(1.0, (epoch - warmup) / max(1, epochs - 1 - warmup))
        return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * done))

    return multiplier


# --- reading what `fit` returns -----------------------------------------------------------

@dataclass(frozen=True)
class TrainingRecord:
    """How one training run went: why it stopped, the epoch kept, and its times."""

    stop_reason: str          # one of STOP_REASONS
    epochs_run: int
    best_epoch: int           # 1-based: the epoch whose weights were restored
    best_val_loss: float
    seconds_per_epoch: float  # median over epochs, validation excluded
    total_seconds: float

    @property
    def converged(self) -> bool:
        return self.stop_reason == "converged"


def training_record(history, *, epochs: int, patience: int,
                    wall_seconds: float | None = None) -> TrainingRecord:
    """Read a `labsupport.train.History` into a `TrainingRecord`.

    ``stop_reason`` and ``total_seconds`` are taken at their word when set. A history
    without them (an older `fit`, or one built by hand) is read as: ``converged`` when the
    last ``patience`` epochs did not improve on the best, else ``time`` when it stopped
    before ``epochs``, else ``epochs``; its total is ``wall_seconds`` if given, else the
    sum of its epochs.
    """
    n = len(history.val_loss)
    if n == 0:
        raise ValueError("history holds no epoch; expected a History from labsupport.train.fit")
    reason = getattr(history, "stop_reason", None) or None      # "" on a hand-made History
    if reason is None:
        if n - 1 - history.best_epoch >= patience:
            reason = "converged"
        else:
            reason = "time" if history.stopped_early else "epochs"
    if reason not in STOP_REASONS:
        raise ValueError(f"history.stop_reason must be one of {STOP_REASONS}, got {reason!r}")
    total = getattr(history, "total_seconds", None) or None      # 0.0 on a hand-made History
    if total is None:
        total = wall_seconds if wall_seconds is not None else sum(history.epoch_seconds)
    return TrainingRecord(reason, n, history.best_epoch + 1, history.val_loss[history.best_epoch],
                          statistics.median(history.epoch_seconds), float(total))


# --- what to compare ------------------------------------------------------------------------

class Trainable:
    """A model to train in a comparison: ``build(revin=...)`` returns a fresh model (the
    comparison passes its own ``revin`` so that every model gets the same input
    normalisation); ``seeds`` (a count or a list) and ``fit_options`` for
    `labsupport.train.fit` (``lr``, ``batch_size``, ``schedule``, ...) override the
    comparison's for this model.

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
        self.build = build
        self.seeds = None if seeds is None else _seed_list(seeds)
        self.fit_options = fit_options

    def __repr__(self) -> str:
        return f"Trainable(seeds={self.seeds}, {self.fit_options})"


def _seed_list(seeds) -> list:
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ValueError(f"seeds must be a count >= 1 or a list of ints, got {seeds}")
        return list(range(seeds))
    seeds = list(seeds) if isinstance(seeds, (list, tuple, range)) else None
    if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds) \
            or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be a count >= 1 or a list of distinct ints, got {seeds!r}")
    return seeds


def _uses_revin(model) -> bool:
    """True when ``model`` normalises each window (an `InstanceNorm`, or ridge's flag)."""
    revin = getattr(model, "revin", None)
    return revin is True or isinstance(revin, nn.Module)


@contextmanager
def _kept_random_state():
    """Seeding for the runs must not change the caller's random streams."""
    py, np_state = random.getstate(), np.random.get_state()
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices):
        yield
    random.setstate(py)
    np.random.set_state(np_state)


# --- results --------------------------------------------------------------------------------

@dataclass
class Entry:
    """One row of the table: a trained model's runs (one per seed) or a baseline's one run."""

    name: str
    trained: bool
    params: int
    metrics: list = field(default_factory=list)      # labsupport.train.Metrics per run
    records: list = field(default_factory=list)      # TrainingRecord per run (trained only)
    histories: list = field(default_factory=list)    # fit's History per run (learning curves)
    seeds: list = field(default_factory=list)
    models: list = field(default_factory=list)       # the trained modules (or the baseline)
    fit_seconds: float | None = None                 # the ridge's closed-form solve

    def values(self, metric: str = "mse") -> list:
        _check_metric(metric)
        return [getattr(m, metric) for m in self.metrics]

    def mean(self, metric: str = "mse") -> float:
        return statistics.fmean(self.values(metric))

    def own_spread(self, metric: str = "mse") -> float | None:
        """max - min over runs; 0 for a baseline; None for a trained model with one run."""
        values = self.values(metric)
        if not self.trained:
            return 0.0
        return max(values) - min(values) if len(values) > 1 else None


@dataclass
class Comparison:
    """Every model's runs on one task, with how they were compared (see the module doc)."""

    entries: dict
    revin: bool
    windows: dict                 # train / val / test: number of windows
    unit: str | None = "MW"       # None: no column in the series' own unit

    def __getitem__(self, name: str) -> Entry:
        if name not in self.entries:
            raise KeyError(f"no model {name!r} in this comparison; it has {list(self.entries)}")
        return self.entries[name]

    def mean(self, name: str, metric: str = "mse") -> float:
        return self[name].mean(metric)

    def spread(self, name: str, metric: str = "mse") -> tuple[float | None, bool]:
        """(spread, borrowed): the model's own range over seeds, or for a trained model with
        one run the widest range among the trained models with several (borrowed=True);
        (None, True) when no trained model has several runs."""
        own = self[name].own_spread(metric)
        if own is not None:
            return own, False
        measured = [e.own_spread(metric) for e in self.entries.values()
                    if e.trained and len(e.metrics) > 1]
        return (max(measured) if measured else None), True

    def outcome(self, a: str, b: str, metric: str = "mse") -> str:
        """``"a"`` if a beats b, ``"b"`` if b beats a, ``"within"`` when the gap between the
        means does not exceed the larger of the two spreads, ``"unknown"`` when a spread
        cannot be measured (single runs only). Lower is better for every metric."""
        if a == b:
            raise ValueError(f"compare two different models, got {a!r} twice")
        spreads = [self.spread(name, metric)[0] for name in (a, b)]
        if None in spreads:
            return "unknown"
        gap = self.mean(b, metric) - self.mean(a, metric)
        if abs(gap) <= max(spreads):
            return "within"
        return "a" if gap > 0 else "b"

    def beats(self, a: str, b: str, metric: str = "mse") -> bool:
        """True when ``a`` beats ``b`` by more than the seed spread (`outcome`)."""
        return self.outcome(a, b, metric) == "a"

    def verdict(self, a: str, b: str, metric: str = "mse") -> str:
        """Print, without numbers, which of ``a`` and ``b`` is better on ``metric`` by more
        than the seed spread, or that they are within it; returns the `outcome`."""
        result = self.outcome(a, b, metric)
        label = METRICS[metric].replace("(unit)", f"({self.unit})")
        text = {"a": f"{a} beats {b}", "b": f"{b} beats {a}",
                "within": f"{a} and {b} are within the seed spread",
                "unknown": f"{a} vs {b}: no verdict (single runs, spread unknown)"}[result]
        print(f"{text} ({label})")
        return result

    def verdicts(self, metric: str = "mse", against=(RIDGE, NAIVE)) -> dict:
        """`verdict` of every trained model against each baseline in ``against``."""
        return {(name, base): self.verdict(name, base, metric)
                for name, entry in self.entries.items() if entry.trained
                for base in against if base in self.entries}

    def glue(self, names: dict, metric: str = "mse") -> dict:
        """``myst_nb.glue(glue_name, mean, display=False)`` for each ``{model: glue_name}``:
        the mean of ``metric`` over the model's runs, as a float (through
        `labsupport.report.glue`: nothing without myst-nb, as on Colab). Returns what was
        glued."""
        from .report import glue

        values = {glue_name: float(self.mean(model, metric)) for model, glue_name in names.items()}
        for glue_name, value in values.items():
            glue(glue_name, value, display=False)
        return values

    def rows(self, metric: str = "mse") -> list:
        """The table as dicts (one per model), for a notebook that lays it out itself."""
        out = []
        for name, e in self.entries.items():
            spread, borrowed = self.spread(name, metric)
            rec = e.records
            out.append(dict(
                model=name, trained=e.trained, params=e.params, runs=len(e.metrics),
                mean=e.mean(metric), min=min(e.values(metric)), max=max(e.values(metric)),
                spread=spread, spread_borrowed=borrowed,
                mae=e.mean("mae"),
                mae_orig=e.mean("mae_orig") if e.metrics[0].mae_orig is not None else None,
                epochs=[r.epochs_run for r in rec], best_epochs=[r.best_epoch for r in rec],
                seconds_per_epoch=statistics.median(r.seconds_per_epoch for r in rec) if rec else None,
                train_seconds=(statistics.fmean(r.total_seconds for r in rec) if rec
                               else e.fit_seconds),
                stopped=_stopped(rec) if rec else ("closed form" if e.fit_seconds is not None else "-")))
        return out

    def table(self, metric: str = "mse") -> None:
        """Print the setup and one row per model (numbers depend on the machine and run)."""
        tr, va, te = (self.windows[k] for k in ("train", "val", "test"))
        norm = ("instance normalisation (RevIN) on for every trained model and the ridge"
                if self.revin else "no instance normalisation for any model (revin=False)")
        print(f"windows: train {tr:,}, validation {va:,}, test {te:,}, the same for every model")
        print(f"input: {norm}")
        label = METRICS[metric].replace("(unit)", f"({self.unit})")
        rows = self.rows(metric)
        in_unit = [] if self.unit is None else [f"MAE ({self.unit})"]
        print_table(["model", "params", "runs", f"{label}: mean (min-max)", "MAE", *in_unit,
                     "epochs (best)", "s/epoch", "train s", "stopped"],
                    [(r["model"], f"{r['params']:,}", r["runs"] if r["trained"] else "-",
                      _mean_range(r), f"{r['mae']:.3f}",
                      *([] if self.unit is None else [f"{r['mae_orig']:.0f}"]),
                      _epochs(r), "-" if r["seconds_per_epoch"] is None else f"{r['seconds_per_epoch']:.2f}",
                      "-" if r["train_seconds"] is None else f"{r['train_seconds']:.1f}",
                      r["stopped"]) for r in rows])
        borrowed = [r for r in rows if r["trained"] and r["spread_borrowed"]]
        print("spread: min-max over seeds. 'A beats B' needs a gap of means larger than the "
              "larger of the two spreads")
        if borrowed:
            value = borrowed[0]["spread"]
            widest = "unknown: no model has several runs" if value is None else f"{value:.3f}"
            print(f"single-run models ({', '.join(r['model'] for r in borrowed)}) borrow the "
                  f"widest spread measured here: {widest}")

    def plot(self, ax=None, metric: str = "mse"):
        """Seeds as dots (one row per trained model, the mean as a bar), baselines as
        vertical lines. Returns the axes."""
        import matplotlib.pyplot as plt

        from .plots import PALETTE

        if ax is None:
            _, ax = plt.subplots(figsize=(6.4, 0.45 * len(self.entries) + 1.2))
        trained = [e for e in self.entries.values() if e.trained]
        for row, e in enumerate(trained):
            values = e.values(metric)
            ax.plot(values, [row] * len(values), "o", color=PALETTE[0], alpha=0.7,
                    label="one seed" if row == 0 else None)
            ax.plot([e.mean(metric)] * 2, [row - 0.3, row + 0.3], color="black", lw=2,
                    label="mean over seeds" if row == 0 else None)
        styles = iter([("--", PALETTE[1]), (":", PALETTE[3]), ("-.", PALETTE[2])])
        for e in self.entries.values():
            if not e.trained:
                style, colour = next(styles, ("--", "grey"))
                ax.axvline(e.mean(metric), ls=style, color=colour, label=e.name)
        ax.set_yticks(range(len(trained)), [e.name for e in trained])
        ax.invert_yaxis()
        label = METRICS[metric].replace("(unit)", f"({self.unit})")
        ax.set_xlabel(f"{label}{' (scaled)' if metric != 'mae_orig' else ''}, lower is better")
        ax.legend(loc="best", fontsize=8)
        return ax


def _mean_range(r) -> str:
    if r["runs"] == 1:
        return f"{r['mean']:.3f}" + (" (1 run)" if r["trained"] else "")
    return f"{r['mean']:.3f} ({r['min']:.3f}-{r['max']:.3f})"


def _span(values) -> str:
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _epochs(r) -> str:
    if not r["epochs"]:
        return "-"
    return f"{_span(r['epochs'])} ({_span(r['best_epochs'])})"


def _stopped(records) -> str:
    counts = {}
    for r in records:
        counts[STOP_LABELS[r.stop_reason]] = counts.get(STOP_LABELS[r.stop_reason], 0) + 1
    if len(counts) == 1 and len(records) == 1:
        return next(iter(counts))
    return ", ".join(f"{label} {n}/{len(records)}" for label, n in counts.items())


# --- the protocol ---------------------------------------------------------------------------

def _takes(fn, name: str) -> bool:
    """Whether ``fn`` accepts the keyword argument ``name``."""
    params = inspect.signature(fn).parameters
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _inputs_only(inputs):
    """The window x (N, L, C) of inputs that may be a tuple such as (x, time)."""
    return inputs[0] if isinstance(inputs, tuple) else inputs


class _OnWindow(nn.Module):
    """A baseline that reads only the window x, whatever else the task's inputs carry."""

    def __init__(self, forecast):
        super().__init__()
        self.forecast = forecast

    def forward(self, x, *rest):
        return self.forecast(x)


def _check_task(task) -> None:
    missing = [a for a in ("train", "val", "test", "scaler", "horizon", "lookback")
               if not hasattr(task, a)]
    if missing:
        raise TypeError(f"task must be a labsupport.data.ForecastTask (book_task(...)), "
                        f"got {type(task).__name__} without {missing}")


def compare(task, models: dict, *, revin: bool, seeds=3, naive_period: int | None = 168,
            device=None, unit: str | None = "MW", progress: bool = True, **fit_options) -> Comparison:
    """Train each of ``models`` (name -> `Trainable`) on ``task`` over its seeds and score
    it on the test windows beside the weekly seasonal naive forecast and the ridge.

    ``task``: a `labsupport.data.ForecastTask`; every model gets its train, validation and
    test windows unchanged. ``revin``: instance normalisation for every trained model and
    for the ridge (each model's ``build`` receives it, and a model built otherwise is
    refused). ``seeds``: a count or a list, used where a `Trainable` gives none; run k
    seeds Python, NumPy and PyTorch with its seed before building and training, inside a
    fork of the random state, so the caller's random streams are left as they were.
    ``naive_period``: the seasonal naive's period in steps (168: weekly); None leaves it
    out, only for windows shorter than a week (12.4's short contexts), whose table then
    takes the naive from a task with longer windows. ``unit``: the series' unit for the
    MAE in original values (None for a series without one: no such column).
    ``fit_options`` go to `labsupport.train.fit` (``epochs``, ``lr``, ``batch_size``,
    ``patience``, ``schedule``, ``max_seconds``, ...), each `Trainable`'s own on top.
    """
    _check_task(task)
    if not isinstance(revin, bool):
        raise TypeError(f"revin must be True or False (one setting for every model), got {revin!r}")
    if not isinstance(models, dict) or not all(isinstance(m, Trainable) for m in models.values()):
        raise TypeError("models must be a dict of name -> Trainable(build, seeds=..., **fit_options)")
    clash = {NAIVE, RIDGE} & set(models)
    if clash:
        raise ValueError(f"model names {sorted(clash)} are taken by the baselines; rename them")
    default_seeds = _seed_list(seeds)
    lookback = _inputs_only(task.train[0]).shape[1]
    if naive_period is not None and naive_period > lookback:
        raise ValueError(f"the seasonal naive forecast needs {naive_period} steps of history, but "
                         f"the windows hold {lookback}; pass naive_period <= {lookback}, or "
                         "naive_period=None and show the naive of a task with longer windows "
                         "(book_task's test targets do not depend on the lookback)")
    channels = list(range(task.train[1].shape[-1]))
    scaler = task.scaler if unit is not None else None
    score = lambda model: evaluate(model, task.test, scaler=scaler, channels=channels,  # noqa: E731
                                   unit=unit, device=device)
    entries = {}
    jobs = [(name, seed) for name, spec in models.items() for seed in (spec.seeds or default_seeds)]
    bar = tqdm(jobs, desc="comparison", leave=False, disable=not progress)
    for name, seed in bar:
        bar.set_postfix_str(f"{name}, seed {seed}")
        options = _fit_options(name, {**fit_options, **models[name].fit_options})
        model, history, record = _train_one(name, models[name], seed, task, revin, device, options)
        entry = entries.setdefault(name, Entry(name, True, sum(p.numel() for p in model.parameters())))
        entry.seeds.append(seed)
        entry.records.append(record)
        entry.histories.append(history)
        entry.models.append(model)
        entry.metrics.append(score(model))
        if record.stop_reason == "interrupted":     # Stop pressed: no further runs, same table
            break
    for entry in _baselines(task, revin, naive_period, channels):
        entry.metrics.append(score(entry.models[0]))
        entries[entry.name] = entry
    windows = {k: len(getattr(task, k)[1]) for k in ("train", "val", "test")}
    return Comparison(entries, revin, windows, unit)


def _fit_options(name: str, options: dict) -> dict:
    """``options`` for `fit`, with ``epochs`` and ``patience`` filled from its defaults."""
    defaults = inspect.signature(fit).parameters
    for key in ("epochs", "patience"):
        if key not in options and key in defaults:
            options[key] = defaults[key].default
    if options.get("schedule") is None:
        options.pop("schedule", None)          # so that a `fit` without schedules runs too
    elif not _takes(fit, "schedule"):
        raise TypeError(f"{name}: schedule given, but this labsupport.train.fit takes none; "
                        "update labsupport or leave schedule out")
    return options


def _train_one(name, spec, seed, task, revin, device, options):
    """Build and train one model with one seed: (model, history, TrainingRecord)."""
    with _kept_random_state():
        set_seed(seed)
        model = spec.build(revin=revin)
        if not isinstance(model, nn.Module):
            raise TypeError(f"{name}: build(revin=...) must return an nn.Module, "
                            f"got {type(model).__name__}")
        if _uses_revin(model) != revin:
            raise ValueError(f"{name} was built with revin={_uses_revin(model)}, but this "
                             f"comparison uses revin={revin} for every model; pass it "
                             f"through: lambda revin: Model(..., revin=revin)")
        started = time.perf_counter()
        try:
            history = fit(model, task.train, task.val, seed=seed, progress=False, device=device, **options)
        except FloatingPointError as err:       # a diverged seed is a result, if an epoch was kept
            history = getattr(err, "history", None)
            if history is None or not history.val_loss:
                raise FloatingPointError(f"{name}, seed {seed}: {err}") from err
        wall = time.perf_counter() - started
    record = training_record(history, epochs=options["epochs"], patience=options["patience"],
                             wall_seconds=wall)
    return model, history, record


def _baselines(task, revin, naive_period, channels) -> list:
    """The ridge (fitted here, penalty on validation) and the seasonal naive, unscored."""
    x_train, x_val = _inputs_only(task.train[0]), _inputs_only(task.val[0])
    started = time.perf_counter()
    ridge = RidgeForecaster(lookback=x_train.shape[1], horizon=task.horizon, channels=len(channels),
                            revin=revin).fit((x_train, task.train[1]), (x_val, task.val[1]))
    entries = [Entry(RIDGE, False, sum(p.numel() for p in ridge.parameters()), models=[_OnWindow(ridge)],
                     fit_seconds=time.perf_counter() - started)]
    if naive_period is not None:
        name = NAIVE if naive_period == 168 else f"seasonal naive ({naive_period} steps)"
        naive = _OnWindow(lambda x: seasonal_naive(x, naive_period, task.horizon))
        entries.append(Entry(name, False, 0, models=[naive]))
    return entries
