"""Low-rank attention (12.5): Linformer projects the length axis of the keys and values
to k rows, then runs softmax attention against them.
"""
from __future__ import annotations

import torch
from torch import nn

from ..validation import check_attention_inputs, check_no_mask, check_positive_int
from .exact import naive_attention
from .precision import working_dtype
from .spec import attention_kernel


@attention_kernel(causal=False, dropout=True, module=True, fixed_length=True)
class LinformerAttention(nn.Module):
    """Linformer (Wang et al. 2020): learned projections ``E, F (k x seq_len)`` shorten the
    keys and values along the length axis, then softmax attention runs against k rows.

    Math: ``softmax(Q (E K)^T * scale) (F V)``; ``E, F`` start as ``N(0, 1/k)`` entries
    (the paper's Johnson-Lindenstrauss choice); ``share_kv=True`` uses one matrix for both.
    Cost: time O(L k D + S k D), memory O(L k), against O(L S) for full attention.
    Shapes: q (..., L, D), k (..., seq_len, D), v (..., seq_len, Dv) -> (..., L, Dv).
    Precision: half-precision inputs are projected and attended in float32
    (`working_dtype`), the output rounded to the input dtype.

    Not causal: every projected key mixes all ``seq_len`` positions, future ones included,
    so no mask on the k projected keys can hide the future; ``is_causal=True`` raises, as
    does a ``mask`` (it would have to act before the projection). Use it as a kernel by
    passing an instance, ``MultiHeadAttention(d, h, kernel=LinformerAttention(L, 32))``:
    it becomes a submodule and trains. Its parameters are shared by all heads, and by all
    layers given the same instance (the paper's "layerwise sharing").

    >>> lin = LinformerAttention(seq_len=10, k=4)
    >>> lin(torch.randn(2, 3, 10, 8), torch.randn(2, 3, 10, 8), torch.randn(2, 3, 10, 8)).shape
    torch.Size([2, 3, 10, 8])
    """

    def __init__(self, seq_len: int, k: int, *, share_kv: bool = False):
        super().__init__()
        self.seq_len, self.proj_len = check_positive_int("seq_len", seq_len), check_positive_int("k", k)
        self.share_kv = share_kv
        self.E = nn.Parameter(torch.randn(k, seq_len) * k ** -0.5)
        self.register_parameter("F", None if share_kv else nn.Parameter(torch.randn(k, seq_len) * k ** -0.5))

    def forward(self, q, k, v, *, mask=None, is_causal=False, scale=None, dropout_p: float = 0.0):
        check_attention_inputs(q, k, v, scale=scale, dropout_p=dropout_p, is_causal=is_causal)
        if is_causal:
            raise ValueError("LinformerAttention cannot be causal: each projected key mixes all "
                             f"{self.seq_len} positions, future ones included; use local, linear or "
                             "performer attention for causal models")
        check_no_mask("LinformerAttention", mask, "a mask over (L, S) cannot act after the "
                      "length axis is projected to k rows")
        if k.shape[-2] != self.seq_len:
            raise ValueError(f"LinformerAttention was built for seq_len {self.seq_len}, got k length "
                             f"{k.shape[-2]}; expected q (B,H,L,D), k (B,H,{self.seq_len},D), "
                             f"v (B,H,{self.seq_len},Dv), got {tuple(q.shape)}, {tuple(k.shape)}, "
                             f"{tuple(v.shape)}")
        work = working_dtype(q.dtype)
        proj_k = self.E.to(work)
        proj_v = proj_k if self.F is None else self.F.to(work)
        k_low = torch.einsum("ps,...sd->...pd", proj_k, k.to(work))        # (..., k, D)
        v_low = torch.einsum("ps,...sd->...pd", proj_v, v.to(work))        # (..., k, Dv)
        return naive_attention(q.to(work), k_low, v_low, scale=scale, dropout_p=dropout_p).to(q.dtype)

    def extra_repr(self) -> str:
        return f"seq_len={self.seq_len}, k={self.proj_len}, share_kv={self.share_kv}"
