"""Reference versions of the exercise functions that later cells build on.

`checks.yours_or_reference` hands these to a notebook while the student's own version
does not pass its check yet, so the rest of the notebook still runs.
"""
from __future__ import annotations

import torch


def causal_block(x, layer):
    """The causal pre-norm block of an ``nn.TransformerEncoderLayer(norm_first=True,
    batch_first=True)`` from its parts: x (B, N, d) -> (B, N, d)."""
    N = x.shape[1]
    blocked = torch.ones(N, N, dtype=torch.bool, device=x.device).triu(1)   # True: blocked (nn.MHA)
    h = layer.norm1(x)
    x = x + layer.self_attn(h, h, h, attn_mask=blocked, need_weights=False)[0]
    return x + layer.linear2(layer.activation(layer.linear1(layer.norm2(x))))


def ridge_weights(X, Y, penalty):
    """The ridge solution W (L, T) = (X^T X + penalty I)^-1 X^T Y for X (N, L), Y (N, T)."""
    eye = torch.eye(X.shape[-1], dtype=X.dtype, device=X.device)
    return torch.linalg.solve(X.T @ X + penalty * eye, X.T @ Y)


def predicted_step_peak(batch, heads, tokens, layers):
    """Peak bytes of one training step of a causal encoder with naive attention in float32,
    counting the (batch, heads, tokens, tokens) matrices: each layer keeps its softmax weights
    for the backward pass, and two more are alive at the worst moment."""
    return (layers + 2) * batch * heads * tokens * tokens * 4
