"""The book's answers to the lab's exercises, which later cells fall back on.

`labsupport.checks.yours_or_reference` hands these to the notebook while the student's own
version does not pass its check yet, so that a student notebook runs top to bottom; the race
trains `racers.LabForecaster` with the student's `forecast` once it passes. Letters: B batch,
L lookback (hours), P patch length, N tokens, d model width, H heads, T horizon.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = ["patch_tokens", "attention", "sinusoidal_encoding", "forecast", "predicted_step_peak",
           "causal_linear_attention"]


def patch_tokens(x, patch_len):
    """Step 1: cut windows x (B, L) into non-overlapping patches (B, N, P), N = L // P, aligned
    so that the newest hour ends the last patch (the oldest L mod P hours are dropped)."""
    N = x.shape[-1] // patch_len
    return x[..., x.shape[-1] - N * patch_len:].reshape(*x.shape[:-1], N, patch_len)


def attention(x, mha, causal=False):
    """Step 1: ``nn.MultiheadAttention(d, H, batch_first=True)``'s self-attention of x (B, N, d),
    from its weights: project, split the heads, scaled dot-product attention (token i sees only
    j <= i when ``causal``), merge the heads, project out. Returns (B, N, d)."""
    B, N, d = x.shape
    H = mha.num_heads
    q, k, v = F.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)     # (B, N, d) each
    q, k, v = (t.view(B, N, H, d // H).transpose(1, 2) for t in (q, k, v))            # (B, H, N, d/H)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d // H)                              # (B, H, N, N)
    if causal:
        future = torch.ones(N, N, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    out = scores.softmax(dim=-1) @ v                                                  # (B, H, N, d/H)
    return mha.out_proj(out.transpose(1, 2).reshape(B, N, d))                         # (B, N, d)


def sinusoidal_encoding(n_tokens, d_model):
    """Step 2: the sinusoidal table (N, d) of Vaswani et al. (2017): column 2i is
    sin(n / 10000^(2i/d)), column 2i + 1 its cosine, for positions n = 0 .. N - 1."""
    position = torch.arange(n_tokens, dtype=torch.float64)[:, None]                  # (N, 1)
    frequency = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)   # (d/2,)
    table = torch.zeros(n_tokens, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table.float()


def forecast(model, x):
    """Step 3: the forward pass of `racers.LabForecaster` on a normalised window x (B, L, 1):
    day tokens, embedded, plus the learned positions, through the causal encoder; the head
    reads the newest token. Returns (B, T, 1)."""
    tokens = model.embed(patch_tokens(x[..., 0], model.patch_len))                   # (B, N, d)
    tokens = tokens + model.pos[:tokens.shape[1]]                                    # (B, N, d)
    encoded = model.encoder(tokens, is_causal=True)                                  # (B, N, d)
    return model.head(encoded[:, -1]).unsqueeze(-1)                                   # (B, T, 1)


def predicted_step_peak(batch, heads, tokens, layers):
    """Step 4: peak bytes of one training step of a causal encoder with naive attention in
    float32, counting the (batch, heads, tokens, tokens) matrices: each layer keeps its softmax
    weights for the backward pass, and two more are alive at the worst moment."""
    return (layers + 2) * batch * heads * tokens * tokens * 4


def causal_linear_attention(q, k, v):
    """Step 5: causal linear attention with phi(x) = elu(x) + 1, by prefix sums:
    out_i = phi(q_i)^T S_i / phi(q_i)^T z_i, S_i = sum_{j <= i} phi(k_j) v_j^T,
    z_i = sum_{j <= i} phi(k_j). q, k (..., N, D), v (..., N, Dv) -> (..., N, Dv)."""
    fq, fk = F.elu(q) + 1, F.elu(k) + 1                                               # (..., N, D)
    S = (fk.unsqueeze(-1) * v.unsqueeze(-2)).cumsum(dim=-3)                           # (..., N, D, Dv)
    z = fk.cumsum(dim=-2)                                                             # (..., N, D)
    numerator = (fq.unsqueeze(-1) * S).sum(dim=-2)                                    # (..., N, Dv)
    return numerator / (fq * z).sum(dim=-1, keepdim=True)                             # (..., N, Dv)
