"""Attention kernels with one signature, and a registry that modules use by name.

Every kernel takes ``q (..., L, D)``, ``k (..., S, D)``, ``v (..., S, Dv)``, usually
``(B, H, L, D)``, and returns ``(..., L, Dv)``, exactly like
``torch.nn.functional.scaled_dot_product_attention``. Boolean masks mean
``True`` = may attend (the SDPA convention), broadcastable to ``(..., L, S)``.
Note that ``nn.MultiheadAttention`` reads boolean masks the other way round
(``True`` = blocked); `labsupport.layers` converts where it talks to it. A mask does not
hide NaN or inf (a weight of 0 times NaN is NaN, and would spread to every output, the
causal past included): every kernel refuses non-finite q, k or v, naming the first
position (`labsupport.validation.check_attention_inputs`).
``is_causal=True`` means query i sees keys j <= i, aligned at the top left as in SDPA,
in every kernel here (with S > L the last S - L keys are never seen);
`labsupport.layers.MultiHeadAttention` aligns it at the bottom right instead.

One idea per module: `exact` (naive attention, SDPA, and which SDPA backend ran), `flash`
(FlashAttention's tiled algorithm), `sparse` (sliding windows, Longformer), `lowrank`
(Linformer), `kernelized` (linear attention, Performer), `masks`, `precision` (half-precision
inputs are computed in float32), `spec` (what a kernel declares) and `registry` (`KERNELS`
by name). The package imports nothing from
`labsupport.timing` (which measures these kernels and imports them). Every public name is imported from here:
``from labsupport.attention import naive_attention, KERNELS``.
"""
from .exact import naive_attention, sdpa, sdpa_backend_used, sdpa_backends
from .flash import flash_attention
from .kernelized import (
    LinearAttentionState,
    favor_features,
    linear_attention,
    linear_attention_recurrent,
    orthogonal_random_features,
    performer_attention,
)
from .lowrank import LinformerAttention
from .masks import causal_mask
from .registry import KERNELS, explicit_attention, get_kernel, kernel_name, kernel_spec
from .sparse import band_mask, local_attention, longformer_attention, longformer_mask
from .spec import UNDECLARED, Kernel, KernelSpec, attention_kernel

__all__ = [
    # the kernels
    "naive_attention", "sdpa", "flash_attention", "local_attention", "longformer_attention",
    "LinformerAttention", "linear_attention", "linear_attention_recurrent", "performer_attention",
    # their helpers
    "causal_mask", "band_mask", "longformer_mask", "LinearAttentionState", "orthogonal_random_features",
    "favor_features", "sdpa_backends", "sdpa_backend_used",
    # what a kernel declares, and the kernels by name
    "Kernel", "KernelSpec", "UNDECLARED", "attention_kernel", "kernel_spec", "kernel_name",
    "explicit_attention", "KERNELS", "get_kernel",
]
