"""What a comparison holds, and the rule that reads it: `Entry` (one model's runs),
`Comparison` (every model's, with `outcome`, `verdict`, `interval`), `TrainingRecord`
(how one training run went) and `RunFailure` (a run that raised).

The rule (`Comparison.outcome`), in this order: a model with a failed run, or a non-finite
forecast or score on any test window, is ``"failed"``; a trained model with fewer than two
successful runs gives ``"unknown"``. Then, whether the two are separated:

- two trained models: when the gap of their means exceeds the larger of their seed
  spreads (max - min over seeds) AND the paired 95% interval of the mean per-window
  difference (`labsupport.compare.paired`) excludes zero;
- a trained model against a baseline without seeds (the ridge, the seasonal naive: one
  deterministic run): when every seed falls on the same side of the baseline AND the
  paired interval excludes zero on that side. The model's own seed spread is no reason
  for "not separated" here: the baseline has no spread to overlap it;
- two baselines: when the paired interval excludes zero.

A model is budget-limited when a run stopped at its epoch or time budget or was
interrupted: separated, the winner is named unless the loser was budget-limited
(``"unsettled"``: more training could reverse it); not separated, the pair is
``"unsettled"`` when either was budget-limited, else ``"within"``. Lower is better for
every metric. `Comparison.judgement` says which case it was, in words, with the numbers.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import torch

from . import present
from .labels import BUDGET_STOPS, METRICS, NAIVE, RIDGE, STOP_LABELS
from .paired import PairedTest, diebold_mariano

__all__ = ["NAIVE", "RIDGE", "METRICS", "TrainingRecord", "RunFailure", "Entry", "Comparison"]


def check_metric(metric: str) -> str:
    """``metric`` if it names one of `METRICS`, else raise listing them."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {sorted(METRICS)}, got {metric!r}")
    return metric


@dataclass(frozen=True)
class TrainingRecord:
    """How one training run went: why it stopped, the epoch kept, and its times."""

    stop_reason: str          # converged, epochs, time, interrupted or diverged (fit's History)
    epochs_run: int
    best_epoch: int           # 1-based: the epoch whose weights were restored
    best_val_loss: float
    seconds_per_epoch: float  # median over epochs, validation excluded
    total_seconds: float

    @property
    def converged(self) -> bool:
        return self.stop_reason == "converged"

    @property
    def budget_limited(self) -> bool:
        """True when a budget (epochs, time) or the Stop button ended training first."""
        return self.stop_reason in BUDGET_STOPS

    @classmethod
    def of(cls, history) -> TrainingRecord:
        """The record of a `labsupport.train.History` with at least one finished epoch."""
        if not history.val_loss:
            raise ValueError(f"a History with no finished epoch has no record (stop_reason "
                             f"{history.stop_reason!r}); score only runs that kept an epoch")
        if history.stop_reason not in STOP_LABELS:
            raise ValueError(f"history.stop_reason must be one of {list(STOP_LABELS)}, got "
                             f"{history.stop_reason!r}")
        return cls(history.stop_reason, len(history.val_loss), history.best_epoch + 1,
                   history.val_loss[history.best_epoch], statistics.median(history.epoch_seconds),
                   float(history.total_seconds))


@dataclass(frozen=True)
class RunFailure:
    """A run that raised: its seed (None for a baseline), the error's type and first line."""

    seed: int | None
    error: str
    message: str

    @classmethod
    def of(cls, seed, err: BaseException) -> RunFailure:
        lines = str(err).strip().splitlines()
        return cls(seed, type(err).__name__, lines[0] if lines else "")

    def __str__(self) -> str:
        return f"{self.error}: {self.message}" if self.message else self.error


@dataclass
class Entry:
    """One row of the table: a trained model's runs (one per seed) or a baseline's one run.
    ``metrics``, ``records``, ``histories``, ``seeds``, ``models`` and ``window_losses``
    hold one item per successful run; ``failures`` one `RunFailure` per run that raised."""

    name: str
    trained: bool
    params: int
    metrics: list = field(default_factory=list)        # labsupport.train.Metrics per run
    records: list = field(default_factory=list)        # TrainingRecord per run (trained only)
    histories: list = field(default_factory=list)      # fit's History per run (learning curves)
    seeds: list = field(default_factory=list)
    models: list = field(default_factory=list)         # the trained modules (or the baseline)
    fit_seconds: float | None = None                   # the ridge's closed-form solve
    window_losses: list = field(default_factory=list)  # per run: {metric: float64 tensor (n,)}
    failures: list = field(default_factory=list)       # RunFailure per run that raised

    @property
    def attempted(self) -> int:
        """Runs started and finished: successful ones and those that raised."""
        return len(self.metrics) + len(self.failures)

    def values(self, metric: str = "mse") -> list:
        """``metric`` of each successful run."""
        check_metric(metric)
        return [getattr(m, metric) for m in self.metrics]

    def mean(self, metric: str = "mse") -> float:
        """Mean over the successful runs (NaN without one)."""
        values = self.values(metric)
        return statistics.fmean(values) if values and None not in values else math.nan

    def spread(self, metric: str = "mse") -> float | None:
        """max - min over runs; 0 for a baseline; None for a trained model with < 2 runs."""
        if not self.trained:
            return 0.0
        values = self.values(metric)
        return max(values) - min(values) if len(values) > 1 else None

    def window_loss(self, metric: str = "mse") -> torch.Tensor | None:
        """The per-window loss, mean over runs (n,), or None when the runs hold none."""
        check_metric(metric)
        runs = [w[metric] for w in self.window_losses if metric in w]
        if not runs or len(runs) != len(self.metrics):
            return None
        return torch.stack(runs).mean(dim=0)                       # (runs, n) -> (n,)

    @property
    def budget_limited(self) -> bool:
        """True when any run stopped at its epoch or time budget or was interrupted."""
        return any(r.budget_limited for r in self.records)

    def failure(self, short: bool = False) -> str | None:
        """Why the model failed (None when it did not): runs that raised, non-finite
        forecasts or scores; ``short`` names the error type only (for a verdict line)."""
        parts = []
        if self.failures:
            first = self.failures[0]
            parts.append(f"{len(self.failures)} of {self.attempted} runs "
                         + (f"raised {first.error}" if short else f"failed: {first}"))
        parts += [p for p in (self._non_finite_windows() or self._non_finite_scores(),) if p]
        return "; ".join(parts) if parts else None

    def _non_finite_windows(self) -> str | None:
        """'NaN forecast on 3 of 183 test windows' when any run's window losses are not finite."""
        runs = [torch.stack([w[k] for k in METRICS if k in w]) for w in self.window_losses if w]
        bad = [~torch.isfinite(run).all(dim=0) for run in runs]           # (metrics, n) -> (n,) per run
        bad = [windows for windows in bad if windows.any()]
        if not bad:
            return None
        windows = torch.stack(bad).any(dim=0)                                                      # (n,)
        runs_note = f" in {len(bad)} of {len(runs)} runs" if len(bad) < len(runs) else ""
        return f"{self._non_finite_kind()} on {int(windows.sum())} of {len(windows)} test windows{runs_note}"

    def _non_finite_kind(self) -> str:
        """What was not finite: the forecast (its absolute error is NaN or inf) or a score
        (a finite forecast whose squared error overflows)."""
        absolute = [w[k] for w in self.window_losses for k in ("mae", "mae_orig") if k in w]
        nan = any(bool(e.isnan().any()) for e in absolute)
        inf = any(bool(e.isinf().any()) for e in absolute)
        if nan and inf:
            return "NaN or infinite forecast"
        if nan or inf:
            return "NaN forecast" if nan else "infinite forecast"
        for key, label in METRICS.items():
            if any(key in w and not torch.isfinite(w[key]).all() for w in self.window_losses):
                return f"non-finite {_plain(label)}"
        return "non-finite score"

    def _non_finite_scores(self) -> str | None:
        """'NaN test MSE in 2 of 2 runs' for runs without window losses whose score is not finite."""
        for key, label in METRICS.items():
            bad = [v for v in self.values(key) if v is not None and not math.isfinite(v)]
            if bad:
                kind = "NaN" if any(math.isnan(v) for v in bad) else "infinite"
                return f"{kind} {_plain(label)} in {len(bad)} of {len(self.metrics)} runs"
        return None


def _plain(label: str) -> str:
    """A metric's label without the unit placeholder: 'test MAE in the series' unit'."""
    return label.replace(" (unit)", " in the series' unit")


@dataclass
class Comparison:
    """Every model's runs on one task, with how they were compared (see the module doc).

    ``windows``: train / val / test counts; ``unit``: the series' unit (None: no column in
    it); ``overlap``: the number of test windows whose targets overlap a given one's,
    ``ceil(horizon / eval_stride)`` (the paired test's h); ``interrupted``: Stop ended the
    comparison before every run was made; ``steps``: (lookback, horizon) of the task's
    windows, which the table's legend names (None: not recorded).
    """

    entries: dict
    revin: bool
    windows: dict
    unit: str | None = "MW"
    overlap: int = field(kw_only=True)
    interrupted: bool = field(default=False, kw_only=True)
    steps: tuple | None = field(default=None, kw_only=True)

    def resolve(self, name: str) -> str:
        """``name`` as the comparison knows it: `NAIVE` names whichever seasonal naive it has
        (weekly, daily or of N steps)."""
        if name == NAIVE and NAIVE not in self.entries:
            naive = [n for n in self.entries if n.startswith("seasonal naive (")]
            if len(naive) == 1:
                return naive[0]
        return name

    def __getitem__(self, name: str) -> Entry:
        name = self.resolve(name)
        if name not in self.entries:
            raise KeyError(f"no model {name!r} in this comparison; it has {list(self.entries)}")
        return self.entries[name]

    def label(self, metric: str = "mse") -> str:
        """The metric's name as the table and the verdicts print it ("test MAE (MW)")."""
        return METRICS[check_metric(metric)].replace("(unit)", f"({self.unit})")

    def mean(self, name: str, metric: str = "mse") -> float:
        """The model's mean of ``metric`` over its successful runs."""
        return self[name].mean(metric)

    def spread(self, name: str, metric: str = "mse") -> float | None:
        """The model's seed spread (max - min over runs); 0 for a baseline; None for a trained
        model with fewer than two successful runs (there is no spread to borrow)."""
        return self[name].spread(metric)

    def failed(self, name: str) -> bool:
        """True when a run raised or a forecast or score is not finite on some test window."""
        return self[name].failure() is not None

    def failure(self, name: str) -> str | None:
        """Why the model failed, for a sentence or the table; None when it did not."""
        return self[name].failure()

    def budget_limited(self, name: str) -> bool:
        """True when a run of the model stopped at its epoch or time budget, or was interrupted."""
        return self[name].budget_limited

    def settled(self, name: str) -> bool:
        """True when the model did not fail and no budget ended its training (diverged runs that
        kept an epoch count as settled: more training cannot continue them)."""
        return not self.failed(name) and not self.budget_limited(name)

    def interval(self, a: str, b: str, metric: str = "mse") -> PairedTest:
        """The paired test of ``a - b`` over the test windows: the mean difference of the
        per-window ``metric`` (each model's mean over seeds), its 95% interval, the statistic
        and p-value (Diebold-Mariano with the HLN correction, h = ``overlap``)."""
        losses = self._window_losses(a, b, metric)
        for name, loss in zip((a, b), losses):
            if self.failed(name):
                raise ValueError(f"no paired interval: {name} failed ({self.failure(name)})")
            if loss is None:
                raise ValueError(f"no paired interval: {name} has no per-window test losses")
        return diebold_mariano(losses[0] - losses[1], overlap=self.overlap)

    def _window_losses(self, a: str, b: str, metric: str) -> tuple:
        losses = self[a].window_loss(metric), self[b].window_loss(metric)
        if None not in losses and len(losses[0]) != len(losses[1]):
            raise ValueError(f"{a} and {b} were scored on different test windows ({len(losses[0])} and "
                             f"{len(losses[1])}); compare models on one task's test windows")
        return losses

    def outcome(self, a: str, b: str, metric: str = "mse") -> str:
        """``"a"`` or ``"b"`` (the winner), ``"within"``, ``"unsettled"``, ``"unknown"`` or
        ``"failed"``, by the rule of the module doc."""
        return self._judge(a, b, metric)[0]

    def _judge(self, a: str, b: str, metric: str) -> tuple:
        """(outcome, the words that explain it) for the verdict line."""
        if a == b:
            raise ValueError(f"compare two different models, got {a!r} twice")
        check_metric(metric)
        failed = [(name, self[name].failure(short=True)) for name in (a, b) if self.failed(name)]
        if failed:
            return "failed", " and ".join(f"{name} failed ({why})" for name, why in failed)
        single = [name for name in (a, b) if self[name].trained and len(self[name].metrics) < 2]
        if single:
            who = f"{single[0]} has one run" if len(single) == 1 else f"{a} and {b} have one run each"
            return "unknown", f"{who}; a verdict needs at least 2 seeds"
        missing = [name for name, loss in zip((a, b), self._window_losses(a, b, metric)) if loss is None]
        if missing:
            return "unknown", f"{missing[0]} has no per-window test losses for the paired test"
        gap = self.mean(b, metric) - self.mean(a, metric)
        if self._separated(a, b, metric):
            loser = b if gap > 0 else a
            if self.budget_limited(loser):
                return "unsettled", self._limit(loser)
            return ("a" if gap > 0 else "b"), ""
        limited = [name for name in (a, b) if self.budget_limited(name)]
        if limited:
            return "unsettled", " and ".join(self._limit(name) for name in limited)
        return "within", ""

    def _separated(self, a: str, b: str, metric: str) -> bool:
        """Whether ``a`` and ``b`` are separated, by the case of the module doc that applies."""
        paired = self.interval(a, b, metric)                        # a - b over the test windows
        if not paired.excludes_zero:
            return False
        if self[a].trained == self[b].trained:                      # two models, or two baselines
            spread = max(self.spread(a, metric), self.spread(b, metric))
            return abs(self.mean(a, metric) - self.mean(b, metric)) > spread
        model, baseline = (a, b) if self[a].trained else (b, a)
        level, sign = self.mean(baseline, metric), (1 if paired.mean > 0 else -1) * (1 if model == a else -1)
        return all(sign * (value - level) > 0 for value in self[model].values(metric))

    def _against_baseline(self, a: str, b: str) -> bool:
        """True when exactly one of the two is a baseline without seeds."""
        return self[a].trained != self[b].trained

    def _limit(self, name: str) -> str:
        """'B stopped at its epoch budget' (or time budget, or was interrupted)."""
        reasons = {r.stop_reason for r in self[name].records if r.budget_limited}
        budgets = " or ".join(word for key, word in (("epochs", "epoch"), ("time", "time")) if key in reasons)
        stopped = [f"stopped at its {budgets} budget"] if budgets else []
        return f"{name} " + " or ".join(stopped + (["was interrupted"] if "interrupted" in reasons else []))

    def verdict_text(self, a: str, b: str, metric: str = "mse") -> str:
        """The verdict line `verdict` prints; without numbers wherever a verdict is given."""
        a, b = self.resolve(a), self.resolve(b)
        result, why = self._judge(a, b, metric)
        label = self.label(metric)
        if self._against_baseline(a, b):
            rule, apart = "every seed and the paired test", "by its seeds and the paired test"
        elif not self[a].trained:                                   # two baselines: no seeds at all
            rule = "the paired test; no seed spread, both are deterministic"
            apart = "by the paired test (no seed spread: both are deterministic)"
        else:
            rule = "beyond the seed spread and the paired test"
            apart = "by the seed spread and the paired test"
        return {"a": f"{a} beats {b} ({label}: {rule})",
                "b": f"{b} beats {a} ({label}: {rule})",
                "within": f"{a} and {b}: not separated {apart} ({label})",
                "unsettled": f"{a} vs {b}: not settled at this budget ({why}; more training could "
                             f"reverse it) ({label})",
                "unknown": f"{a} vs {b}: no verdict, {why} ({label})",
                "failed": f"{a} vs {b}: no verdict, {why}"}[result]

    def judgement(self, name: str, reference: str, metric: str = "mse") -> str:
        """``name`` against ``reference`` in words, with the paired interval: the table's
        verdict column. "worse: every seed; paired +0.019 to +0.044", "better: beyond the seed
        spread; paired ...", "not separated: seeds on both sides; paired ...", "not settled at
        this budget; paired ...", "too few seeds", "failed"."""
        result, why = self._judge(name, reference, metric)
        if result == "failed":
            return "failed"
        if result == "unknown":
            return "too few seeds" if "seeds" in why else "no per-window losses"
        paired = self.interval(name, reference, metric)
        numbers = f"paired {paired.low:+.3f} to {paired.high:+.3f}"
        if result in ("a", "b"):
            how = ("every seed" if self._against_baseline(name, reference)
                   else "beyond the seed spread" if self[name].trained else "paired test")
            return f"{'better' if result == 'a' else 'worse'}: {how}; {numbers}"
        if result == "unsettled":
            return f"not settled at this budget; {numbers}"
        if not paired.excludes_zero:
            return f"not separated; {numbers}"
        why = ("seeds on both sides" if self._against_baseline(name, reference) else
               "within the seed spread" if self[name].trained else "by the paired test")
        return f"not separated: {why}; {numbers}"

    def beats(self, a: str, b: str, metric: str = "mse") -> bool:
        """True when the rule names ``a`` the winner over ``b`` (`outcome` is ``"a"``)."""
        return self.outcome(a, b, metric) == "a"

    def verdict(self, a: str, b: str, metric: str = "mse") -> str:
        """Print the verdict line of ``a`` against ``b`` on ``metric`` (`verdict_text`);
        returns the `outcome`."""
        print(self.verdict_text(a, b, metric))
        return self.outcome(a, b, metric)

    def verdicts(self, metric: str = "mse", against=(RIDGE, NAIVE)) -> dict:
        """`verdict` of every trained model against each baseline in ``against``."""
        return {(name, base): self.verdict(name, base, metric)
                for name, entry in self.entries.items() if entry.trained
                for base in against if self.resolve(base) in self.entries}

    def rows(self, metric: str = "mse", reference: str | None = None) -> list:
        """The table as dicts (one per model), for a notebook that lays it out itself."""
        return present.rows(self, metric, reference)

    def table(self, metric: str = "mse", reference: str | None = None, *,
              caption: str | None = None) -> None:
        """Show one row per model and a legend (a Markdown table in a notebook, with
        ``caption`` above it); ``reference`` (default: the ridge) is the row every paired
        difference is taken against. Numbers depend on the machine."""
        present.table(self, metric, reference, caption=caption)

    def plot(self, ax=None, metric: str = "mse"):
        """Seeds as dots (one row per trained model, the mean as a bar), baselines as
        vertical lines. Returns the axes."""
        return present.plot(self, ax, metric)
