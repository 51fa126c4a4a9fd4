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
    added to the scores, ``is_causal=True``, ``dropout_p`` (applied to its weights). Each is
    opt-in (default False): `labsupport.layers` refuses by name what a kernel does not
    declare, e.g. a causal call to a kernel without ``causal=True``. ``exact``: softmax attention
    over the keys it reads, no approximation (a sliding window is exact on its band).
    ``module``: a trainable ``nn.Module``, used as an instance. ``fixed_length``: built for
    one key length, its ``seq_len``. ``explicit``: a function of the kernel's arguments
    returning ``(out, weights (..., L, S))``, the weights the kernel uses, formed
    explicitly; None where the kernel never forms them.
    """

    mask: bool = False
    bias: bool = False
    causal: bool = False
    dropout: bool = False
    exact: bool = False
    module: bool = False
    fixed_length: bool = False
    explicit: Callable | None = None


# A callable without a spec gets ``mask`` and ``is_causal`` passed through, unchecked (it is
# trusted to take both); no bias, dropout or explicit weights are passed to it.
UNDECLARED = KernelSpec(mask=True, causal=True)


def attention_kernel(**fields):
    """Declare a kernel's `KernelSpec` where it is defined: ``@attention_kernel(mask=True, ...)``
    above a function or an ``nn.Module`` class."""
    spec = KernelSpec(**fields)

    def declare(kernel):
        kernel.spec = spec
        return kernel
    return declare
