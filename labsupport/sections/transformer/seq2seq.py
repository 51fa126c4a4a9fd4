"""Plumbing for a decoder trained with teacher forcing inside the comparison protocol.

`labsupport.train.fit` calls ``model(*inputs)`` on each batch's inputs, never on its
targets. A decoder trained with teacher forcing needs the targets as inputs while it trains
(each step reads the true previous value), and must never see them when it forecasts.
`teacher_forcing_task` gives it exactly that: its training inputs are ``(x, y)``, its
validation and test inputs ``(x, None)``, so early stopping and the test score read the
forecast made step by step. `WindowOnly` lets a forecaster that reads only the window
(the encoder-only forecaster, the baselines) sit in the same comparison.

>>> import torch
>>> from labsupport.data import ForecastTask, Standardizer
>>> x, y = torch.zeros(4, 6, 1), torch.ones(4, 2, 1)
>>> task = ForecastTask((x, y), (x, y), (x, y), Standardizer(), ("demand",), 6, 2, 1)
>>> tf = teacher_forcing_task(task)
>>> tf.train[0][1] is y, tf.test[0][1] is None
(True, True)
"""
from __future__ import annotations

import dataclasses

import torch
from torch import nn

__all__ = ["teacher_forcing_task", "WindowOnly"]


def teacher_forcing_task(task):
    """``task`` (a `labsupport.data.ForecastTask` whose inputs are the windows x) with
    training inputs ``(x, y)``: the targets, for the decoder's teacher forcing; validation
    and test inputs ``(x, None)``: nothing but the window, so the forecast that early
    stopping and the test score read is made without the targets."""
    inputs = task.train[0]
    if not isinstance(inputs, torch.Tensor):
        raise TypeError("teacher_forcing_task needs a task whose inputs are the windows x (N, L, C), "
                        f"got {type(inputs).__name__}; build it with book_task(calendar=False)")
    return dataclasses.replace(task, train=((inputs, task.train[1]), task.train[1]),
                               val=((task.val[0], None), task.val[1]),
                               test=((task.test[0], None), task.test[1]))


class WindowOnly(nn.Module):
    """A forecaster that reads only the window x, called as ``model(x, teacher)``: the
    teacher's targets are ignored. Its ``revin`` is the wrapped model's, which the
    comparison checks.

    >>> from labsupport.models import LinearForecaster
    >>> wrapped = WindowOnly(LinearForecaster(lookback=8, horizon=2))
    >>> wrapped(torch.zeros(3, 8, 1), torch.ones(3, 2, 1)).shape
    torch.Size([3, 2, 1])
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be an nn.Module forecaster, got {type(model).__name__}")
        self.model = model

    @property
    def revin(self):
        return getattr(self.model, "revin", None)

    def forward(self, x, teacher=None):
        return self.model(x)
