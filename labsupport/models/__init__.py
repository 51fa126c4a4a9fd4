"""Forecasters: the book's patch Transformer and the baselines it is measured against.

Every forecaster is a `Forecaster`: built with keyword arguments ``lookback``, ``horizon``,
``channels`` and ``revin`` plus its own hyperparameters, it maps a window
``x (B, lookback, C)`` to a forecast ``(B, horizon, C)``. Letters: B batch, L lookback,
C channels, T horizon, H hidden. The recurrent and convolutional models stand in for
Chapters 10 and 11.

The package holds one module per family: `base` (the window check, `Forecaster`, RevIN's
`InstanceNorm`), `recurrent` (GRU), `conv` (TCN), `linear` (DLinear), `baselines` (ridge,
seasonal naive) and `patch` (`PatchTransformer`); every name is importable from here.
"""
from .base import Forecaster, InstanceNorm, check_window
from .baselines import RidgeForecaster, seasonal_naive
from .conv import CausalConv1d, TCNForecaster, TemporalBlock
from .linear import LinearForecaster, MovingAverage
from .patch import PatchTransformer
from .recurrent import GRUForecaster, PatchGRUForecaster

__all__ = ["check_window", "Forecaster", "GRUForecaster", "PatchGRUForecaster", "CausalConv1d",
           "TemporalBlock", "TCNForecaster", "MovingAverage", "LinearForecaster", "RidgeForecaster",
           "seasonal_naive", "InstanceNorm", "PatchTransformer"]
