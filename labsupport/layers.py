"""Transformer building blocks written from scratch, with a swappable attention kernel.

Modules are batch-first: ``x (B, L, d_model)``. Masks follow the SDPA convention,
``True`` = may attend. ``nn.MultiheadAttention`` reads boolean masks the other way
round (``True`` = blocked): pass it ``~mask``.
"""
from __future__ import annotations

import inspect

import torch
from torch import nn

from .attention import get_kernel, naive_attention
from .validation import check_positive_int, check_rank


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate q/k/v/out projections and any kernel.

    Math: ``MHA(X, C) = concat_h attn(X Wq_h, C Wk_h, C Wv_h) Wo``, one kernel call for all heads.
    Cost: that of the kernel, times B * H, plus four d_model x d_model projections.
    Shapes: x (B, L, d_model), context (B, S, d_model) (default: x) -> (B, L, d_model).

    ``kernel`` is a name in `labsupport.attention.KERNELS` (``"sdpa"``, ``"naive"``, ...)
    or a callable with the kernel signature. ``return_weights=True`` computes the
    weights (B, H, L, S) explicitly with `naive_attention`, whatever the kernel.

    >>> mha = MultiHeadAttention(d_model=8, n_heads=2)
    >>> mha(torch.zeros(3, 5, 8)).shape
    torch.Size([3, 5, 8])
    """

    def __init__(self, d_model: int, n_heads: int, *, kernel="sdpa", dropout: float = 0.0,
                 bias: bool = True):
        super().__init__()
        check_positive_int("d_model", d_model)
        check_positive_int("n_heads", n_heads)
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.kernel = get_kernel(kernel)
        self.dropout = dropout
        self._kernel_takes_dropout = "dropout_p" in inspect.signature(self.kernel).parameters
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, L, d_model) -> (B, H, L, head_dim)."""
        B, L, _ = x.shape
        return x.view(B, L, self.n_heads, self.head_dim).transpose(1, 2)   # (B, H, L, hd)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, H, L, head_dim) -> (B, L, d_model)."""
        B, H, L, hd = x.shape
        return x.transpose(1, 2).reshape(B, L, H * hd)                       # (B, L, d_model)

    def forward(self, x, context=None, *, mask=None, is_causal=False, return_weights=False):
        check_rank("x", x, 3, "(B, L, d_model)")
        context = x if context is None else context
        check_rank("context", context, 3, "(B, S, d_model)")
        if x.shape[-1] != self.d_model or context.shape[-1] != self.d_model:
            raise ValueError(f"expected x (B, L, {self.d_model}) and context (B, S, {self.d_model}), "
                             f"got {tuple(x.shape)} and {tuple(context.shape)}")
        q = self.split_heads(self.q_proj(x))                                 # (B, H, L, hd)
        k = self.split_heads(self.k_proj(context))                           # (B, H, S, hd)
        v = self.split_heads(self.v_proj(context))                           # (B, H, S, hd)
        p = self.dropout if self.training else 0.0
        if return_weights:
            out, weights = naive_attention(q, k, v, mask=mask, is_causal=is_causal,
                                           dropout_p=p, return_weights=True)
            return self.out_proj(self.merge_heads(out)), weights
        extra = {"dropout_p": p} if self._kernel_takes_dropout else {}
        out = self.kernel(q, k, v, mask=mask, is_causal=is_causal, **extra)  # (B, H, L, hd)
        return self.out_proj(self.merge_heads(out))                          # (B, L, d_model)

    @torch.no_grad()
    def load_torch_weights(self, mha: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Copy the weights of an ``nn.MultiheadAttention`` (same d_model, heads, bias)."""
        if mha.embed_dim != self.d_model or mha.num_heads != self.n_heads:
            raise ValueError(f"nn.MultiheadAttention has embed_dim {mha.embed_dim}, heads "
                             f"{mha.num_heads}; expected {self.d_model}, {self.n_heads}")
        if mha.in_proj_weight is None:
            raise ValueError("nn.MultiheadAttention with separate kdim/vdim is not supported")
        if (mha.in_proj_bias is None) != (self.q_proj.bias is None):
            raise ValueError(f"bias differs: nn.MultiheadAttention bias={mha.in_proj_bias is not None}, "
                             f"this module bias={self.q_proj.bias is not None}")
        for proj, w in zip((self.q_proj, self.k_proj, self.v_proj), mha.in_proj_weight.chunk(3)):
            proj.weight.copy_(w)
        self.out_proj.weight.copy_(mha.out_proj.weight)
        if mha.in_proj_bias is not None:
            for proj, b in zip((self.q_proj, self.k_proj, self.v_proj), mha.in_proj_bias.chunk(3)):
                proj.bias.copy_(b)
            self.out_proj.bias.copy_(mha.out_proj.bias)
        return self
