"""Byte models of attention kernels: the memory a kernel holds at its peak, computed, not
measured. The sections size their gpu sweeps with them (each section's ``sizes`` module adds
its own models of what its sweeps hold beside), `cost_sweep` takes them as ``memory_models``
to skip a point before it runs, and the tests check them against peaks the CPU allocator
measures (tests/test_kernel_memory.py: naive attention's peak is `naive_bytes`, to the byte).

Sizes are in bytes; ``size`` is the bytes of one element (4 for float32, 2 for half
precision). Letters: B batch, H heads, L length, D head dim, b a tile's side.

>>> naive_bytes(1024), naive_bytes(1024, causal=True) - naive_bytes(1024)
(8650752, 1835008)
"""
from __future__ import annotations

__all__ = ["naive_bytes", "inputs_bytes", "fused_bytes"]


def naive_bytes(L: int, *, batch: int = 1, heads: int = 1, head_dim: int = 64, causal: bool = False,
                size: int = 4) -> int:
    """Naive attention's peak.

    Math: the scores and the weights, two (B, H, L, L) matrices alive together, and the
    output, 2 B H L^2 s + B H L D s; causal adds the (L, L) bool mask and, while the scores
    are masked, its negation (later the output, if that is larger):
    2 B H L^2 s + L^2 + max(L^2, B H L D s).
    """
    scores, out = batch * heads * L * L * size, batch * heads * L * head_dim * size
    return 2 * scores + out if not causal else 2 * scores + L * L + max(L * L, out)


def inputs_bytes(L: int, *, heads: int = 1, head_dim: int = 64, size: int = 4) -> int:
    """q, k, v: 3 H L D s."""
    return 3 * heads * L * head_dim * size


def fused_bytes(L: int, *, heads: int, size: int, block: int, head_dim: int = 64) -> int:
    """A fused kernel (SDPA) or the tiled loop (`flash_attention`): the inputs and the output,
    float32 row statistics and a few float32 tiles. Math: 4 H L D s + 16 H L + 20 H b^2."""
    return 4 * heads * L * head_dim * size + 16 * heads * L + 20 * heads * block * block
