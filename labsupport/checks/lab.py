"""Self-checks for the lab's own steps (the other steps reuse the sections' checks)."""
from __future__ import annotations

import torch

from .core import Hint, check, close, expect_tensor


@check("Lab step 5: the feature map of linear attention")
def elu_feature_map(fn):
    x = torch.linspace(-6, 6, 25, dtype=torch.float64).view(5, 5)
    got = expect_tensor(fn(x), (5, 5), "elu_feature_map(x (5, 5))")
    want = torch.nn.functional.elu(x) + 1
    if close(got, want):
        return "phi(x) = elu(x) + 1: positive, so phi(q) . phi(k) can stand in for exp(q . k)"
    if close(got, torch.nn.functional.elu(x)):
        raise Hint("elu(x) is negative for x < 0; add 1 so every feature is positive")
    if close(got, torch.relu(x) + 1):
        raise Hint("use elu, not relu: elu(x) = exp(x) - 1 for x < 0 keeps a gradient there")
    if (got <= 0).any():
        raise Hint("the features must be positive, so that the weights phi(q) . phi(k) are")
    raise Hint("phi(x) = elu(x) + 1, element by element")
