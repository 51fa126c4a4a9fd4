"""One comparison protocol for every accuracy table in the book.

`compare` trains every model on the same windows and split, with the same input
normalisation (instance normalisation on for all or off for all), each until its
validation error stops improving (best weights restored) or its budget ends (marked),
over several seeds, and scores them beside two baselines that need no training: the
weekly seasonal naive forecast and a closed-form ridge regression on the lookback
(`RidgeForecaster`, penalty chosen on validation, with the same ``revin`` setting). A run
that raises, or a non-finite forecast on any test window, is a failure: recorded, shown,
never ranked. It returns a `Comparison`, which prints

- ``table()``: parameters, seeds, test MSE mean and range over seeds, MAE (scaled and in
  the series' unit), epochs, seconds per epoch, training seconds, why each run stopped,
  and the paired difference against the ridge with its 95% interval. Its numbers depend
  on the machine: show it in a cell that the regression tests ignore;
- ``verdict(a, b)``: one line, without numbers, that says whether ``a`` beats ``b``,
  ``b`` beats ``a``, the two are not separated, the ranking is not settled at this
  budget, or there is no verdict (a failure, a single run), so that a checked cell can
  print it where the outcome holds on every device.

The rule (``Comparison.outcome``, `labsupport.compare.results`): A beats B when the gap
between their means over seeds exceeds the larger of their seed spreads (max - min) AND
the paired test over the test windows (Diebold-Mariano with the Harvey-Leybourne-Newbold
correction, `labsupport.compare.paired`) puts the mean difference's 95% interval away
from zero; a ranking whose loser stopped at its epoch or time budget is not settled.

The package: `protocol` (compare, Trainable, and rescore: the trained runs
scored on another task's test windows, such as longer ones), `results` (Entry,
Comparison, the rule), `present` (table, rows, plot), `paired` (the paired test),
`tables` (a comparison with one verdict column per reference, its legend),
`labels` (the baselines' names, the metrics, the stop reasons: what `results` and
`present` share, so that neither imports the other's module for them).

In a notebook::

    result = compare(task, {"DLinear": Trainable(
        lambda revin: LinearForecaster(lookback=336, horizon=24, revin=revin), lr=1e-2)},
        revin=True, seeds=3, epochs=30, patience=3)
    result.table()                         # a cell that nbval ignores
    result.verdict("DLinear", NAIVE)       # a checked cell, where the outcome is robust
"""
from .paired import PairedTest, diebold_mariano
from .protocol import Trainable, compare, rescore
from .results import METRICS, NAIVE, RIDGE, Comparison, Entry, RunFailure, TrainingRecord
from .tables import legend, mean_range, verdict_table

__all__ = ["NAIVE", "RIDGE", "METRICS", "Trainable", "TrainingRecord", "RunFailure", "Entry",
           "Comparison", "PairedTest", "compare", "diebold_mariano", "rescore", "legend", "mean_range",
           "verdict_table"]
