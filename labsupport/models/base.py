"""What every forecaster shares: the window check, the `Forecaster` base class and RevIN."""
from __future__ import annotations

import torch
from torch import nn

from ..validation import (
    check_bool,
    check_positive_int,
    check_positive_number,
    check_rank,
)


def check_window(x, lookback: int, channels: int, name: str = "x") -> None:
    """Raise unless ``x`` is a floating-point window shaped (B, lookback, channels)."""
    legend = f"(B, {lookback}, {channels})"
    check_rank(name, x, 3, legend)
    if x.shape[1] != lookback or x.shape[2] != channels:
        raise ValueError(f"{name} must be {legend}, got {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be floating point, got dtype {x.dtype}")


class Forecaster(nn.Module):
    """What every forecaster shares: its sizes, the window check and instance normalisation.

    A subclass calls ``super().__init__(lookback=..., horizon=..., channels=..., revin=...)``
    first and writes ``_forecast(x (B, L, C)) -> (B, T, C)``; `forward` checks the window,
    normalises it when ``revin`` (an `InstanceNorm`, ``self.revin``; None without), calls
    ``_forecast`` and undoes the normalisation on the forecast. Arguments are keyword-only.
    ``revin_affine=False`` drops RevIN's learned scale and shift (as PatchTST's scripts run it).
    """

    def __init__(self, *, lookback: int, horizon: int, channels: int = 1, revin: bool = False,
                 revin_affine: bool = True):
        super().__init__()
        self.lookback = check_positive_int("lookback", lookback)
        self.horizon = check_positive_int("horizon", horizon)
        self.channels = check_positive_int("channels", channels)
        self.revin = self._instance_norm(check_bool("revin", revin), check_bool("revin_affine", revin_affine))

    def _instance_norm(self, revin: bool, affine: bool):
        """The module that normalises each window and channel, or None."""
        return InstanceNorm(self.channels, affine=affine) if revin else None

    def check_window(self, x, name: str = "x", length: int | None = None) -> None:
        """Raise unless ``x`` is a floating-point window (B, lookback or ``length``, channels)."""
        check_window(x, self.lookback if length is None else length, self.channels, name)

    def check_dtype(self, x, name: str = "x") -> None:
        """Raise unless ``x`` has the dtype of the model's weights (torch's own message, from
        deep inside a layer, names neither)."""
        weight = next((p for p in self.parameters() if p.is_floating_point()), None)
        if weight is not None and x.dtype != weight.dtype:
            kind = str(weight.dtype).removeprefix("torch.")
            raise TypeError(f"{name} is {str(x.dtype).removeprefix('torch.')} but the model's weights are "
                            f"{kind}: pass {name}.to(torch.{kind}) (data read with NumPy are often float64), "
                            f"or convert the model with .to(torch.{str(x.dtype).removeprefix('torch.')})")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.check_window(x)
        self.check_dtype(x)
        return self._with_revin(x, self._forecast)

    def _forecast(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError(f"Forecaster subclasses write _forecast(x (B, L, C)) -> (B, T, C); "
                                  f"{type(self).__name__} has none")

    def _normalise(self, x):
        """x (B, L, C) normalised per window and channel, with the statistics to undo it."""
        return (x, None) if self.revin is None else self.revin.normalise(x)

    def _denormalise(self, y, stats):
        """A forecast y (B, T, C) back in the window's level and scale."""
        return y if stats is None else self.revin.denormalise(y, stats)

    def _with_revin(self, x: torch.Tensor, forecast) -> torch.Tensor:
        """``forecast(x)``, inside the instance normalisation when there is one: (B, L, C) -> (B, T, C)."""
        z, stats = self._normalise(x)                           # (B, L, C)
        return self._denormalise(forecast(z), stats)            # (B, T, C)


def _power_of_four_above(x: torch.Tensor) -> torch.Tensor:
    """Per window and channel (B, 1, C): 1 where ``|x|`` stays below the fourth root of its
    dtype's largest number (a variance of such values cannot overflow), else the largest
    power of 4 at or below ``max |x|`` (so the scaled values stay below 4 in size). Dividing
    by it is exact, so the normalisation is unchanged where it is 1 and scale-free elsewhere
    (values near 1e30 once overflowed float32 to inf)."""
    with torch.no_grad():
        top = x.detach().abs().amax(dim=1, keepdim=True)                        # (B, 1, C)
        huge = top > torch.finfo(x.dtype).max ** 0.25
        exponent = torch.floor(torch.log2(top.where(huge, 1.0)) / 2) * 2      # even: a power of 4
        return torch.where(huge, torch.exp2(exponent), 1.0).to(x.dtype)


class InstanceNorm(nn.Module):
    """RevIN (Kim et al., 2022): normalise each window and channel by its own mean and
    standard deviation, with a learned per-channel scale and shift (``affine=True``), and
    undo it on the forecast, so the model sees shapes rather than levels.

    Math: ``z = (x - mean_t x) / std_t x * w + b``; ``y = (z_out - b) / w * std + mean``
    (w = 1, b = 0 without ``affine``, as PatchTST's scripts run it). Windows of huge values
    (beyond about 1e9 in float32, whose variance could overflow) are first divided by a
    power of 4, exactly, so z is their shape at any size.
    """

    def __init__(self, channels: int, eps: float = 1e-5, affine: bool = True):
        super().__init__()
        channels = check_positive_int("channels", channels)
        self.eps = check_positive_number("eps", eps)
        affine = check_bool("affine", affine)
        self.weight = nn.Parameter(torch.ones(channels)) if affine else None
        self.bias = nn.Parameter(torch.zeros(channels)) if affine else None

    def normalise(self, x):                                     # x (B, L, C)
        size = _power_of_four_above(x)                          # (B, 1, C): 1 unless |x| is huge
        x = x / size                                            # exact: a power of two
        mean = x.mean(dim=1, keepdim=True)                      # (B, 1, C)
        std = (x.var(dim=1, keepdim=True, unbiased=False) + self.eps / size ** 2).sqrt()
        z = (x - mean) / std
        return (z if self.weight is None else z * self.weight + self.bias), (mean * size, std * size)

    def denormalise(self, y, stats):                            # y (B, T, C)
        mean, std = stats
        if self.weight is not None:
            y = (y - self.bias) / (self.weight + self.eps)
        return y * std + mean
