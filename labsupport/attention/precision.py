"""The precision the kernels compute in: at least float32.

Half-precision inputs (float16, bfloat16) are computed in float32 and the output is rounded
to the input dtype, as SDPA's math backend does and as FlashAttention does in its tiles
(half-precision operands, float32 products and sums): float16 cannot hold a product
``q . k`` beyond 65504, nor a sum of L positive features, and neither keeps a long row's
softmax exact. float32 and float64 inputs run in their own dtype (``.to`` makes no copy).
`naive_attention` is the one exception: the textbook kernel holds its (L, S) scores in
the input dtype, since their memory is what it measures.

>>> working_dtype(torch.bfloat16), working_dtype(torch.float64)
(torch.float32, torch.float64)
"""
from __future__ import annotations

import torch


def working_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a kernel computes in for inputs of ``dtype``: float32 for half precision."""
    return torch.promote_types(dtype, torch.float32)
