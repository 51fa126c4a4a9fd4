"""What an attention kernel declares about itself: its `KernelSpec`, set with
`attention_kernel` where the kernel is defined (as fast-transformers registers each
kernel with its parameters), and read by `labsupport.layers` and `labsupport.models`
instead of inspecting signatures or special-casing classes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

Kernel = Callable[..., torch.Tensor]


@dataclass(frozen=True)
class KernelSpec:
    """What an attention kernel takes and computes, declared where the kernel is defined
    (`attention_kernel`) and read by `labsupport.layers` and `labsupport.models`.

    ``mask``, ``bias``, ``causal``, ``dropout``: it takes a bool ``mask``, a float ``bias``
    added to the scores, ``is_causal=True``, ``dropout_p``. ``exact``: softmax attention
    over the keys it reads, no approximation (a sliding window is exact on its band).
    ``module``: a trainable ``nn.Module``, used as an instance. ``fixed_length``: built for
    one key length, its ``seq_len``. ``explicit``: a function of the kernel's arguments
    returning ``(out, weights (..., L, S))``, the weights the kernel uses, formed
    explicitly; None where the kernel never forms them.
    """

    mask: bool = False
    bias: bool = False
    causal: bool = True
    dropout: bool = False
    exact: bool = False
    module: bool = False
    fixed_length: bool = False
    explicit: Callable | None = None


UNDECLARED = KernelSpec(mask=True)   # a callable without a spec gets mask and is_causal passed through


def attention_kernel(**fields):
    """Declare a kernel's `KernelSpec` where it is defined: ``@attention_kernel(mask=True, ...)``
    above a function or an ``nn.Module`` class."""
    spec = KernelSpec(**fields)

    def declare(kernel):
        kernel.spec = spec
        return kernel
    return declare
