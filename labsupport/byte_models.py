"""Byte models: the memory the book's attention sweeps hold at their peak, computed, not
measured. One home for each formula: the gpu profile sizes its sweeps with them
(`labsupport.profile`), `cost_sweep` takes them as ``memory_models`` to skip a point before
it runs, and the tests check them against peaks the CPU allocator measures
(tests/test_kernel_memory.py: naive attention's peak is `naive_bytes`, to the byte) and
import them rather than copy them.

Sizes are in bytes; ``size`` is the bytes of one element (4 for float32, 2 for half
precision). Letters: B batch, H heads, L length, D head dim, b a tile's side. Where a
notebook has a model of its own (12.4's and 12.5's ``naive_bytes``, 12.1's bill, the lab's
step), the function here is that model; where it has none, a bound rounded up from peaks
measured on a CPU in float32 (tests/test_gpu_profile.py measures them again): 3.3 (L, L)
matrices for 12.4's training sweep at L = 4096; 4.06 (4, T, T) matrices for one pass of the
segment recurrence at T = 1024; beside its score matrices, the lab's naive step holds 16
(8, N, 64) activations at N = 512, its SDPA step 24 and its linear step 47; 20 tensors of
the output's shape for 12.5's Performer, the largest of its other kernels.

>>> naive_bytes(1024), naive_bytes(1024, causal=True) - naive_bytes(1024)
(8650752, 1835008)
"""
from __future__ import annotations

__all__ = ["naive_bytes", "inputs_bytes", "fused_bytes", "fused_sweep_bytes", "final_bytes",
           "bill_bytes", "backward_bytes", "segment_bytes", "efficient_naive_bytes",
           "efficient_others_bytes", "lab_step_bytes", "lab_activation_bytes", "lab_fused_bytes"]


def naive_bytes(L: int, *, batch: int = 1, heads: int = 1, head_dim: int = 64, causal: bool = False,
                size: int = 4) -> int:
    """Naive attention's peak (12.4's ``naive_bytes``; 12.5's is the non-causal one).

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


def fused_sweep_bytes(L: int, *, size: int, block: int) -> int:
    """12.4's fused sweep (4 heads of 64, causal): naive attention's peak and q, k, v, or a
    fused kernel's with tiles of ``block``, whichever is larger."""
    naive = naive_bytes(L, heads=4, causal=True, size=size) + inputs_bytes(L, heads=4, size=size)
    return max(naive, fused_bytes(L, heads=4, size=size, block=block))


def final_bytes(L: int, *, size: int) -> int:
    """12.4's last step, naive attention (one head of 64, causal) and q, k, v."""
    return naive_bytes(L, causal=True, size=size) + inputs_bytes(L, size=size)


def bill_bytes(L: int) -> int:
    """12.1: naive attention, one head of 64, float32: (2 L^2 + L D) x 4, and q, k, v."""
    return naive_bytes(L) + inputs_bytes(L)


def backward_bytes(L: int) -> int:
    """12.4's training sweep, float32, one head, causal: naive attention's forward and backward
    hold at most 4 (L, L) float32 matrices and 2 bool masks, and q, k, v with their gradients."""
    return 18 * L * L + 2 * inputs_bytes(L)


def segment_bytes(T: int) -> int:
    """12.4's segment recurrence in one pass of T tokens (4 heads, width 32, float32): 4 (4, T, T)
    float32 matrices (content and position scores, the bias, the weights) and 256 floats per
    token. Math: (16 T^2 + 256 T) x 4."""
    return (16 * T * T + 256 * T) * 4


def efficient_naive_bytes(L: int, *, size: int) -> int:
    """12.5's ``naive_bytes`` (4 heads of 32): 2 H L^2 s + H L D s."""
    return naive_bytes(L, heads=4, head_dim=32, size=size)


def efficient_others_bytes(L: int, *, size: int) -> int:
    """12.5's other kernels at L (4 heads of 32): at most 24 float32 tensors of the output's
    shape (the Performer's 128 features are the most), and q, k, v."""
    return 24 * 4 * L * 32 * 4 + inputs_bytes(L, heads=4, head_dim=32, size=size)


def lab_step_bytes(N: int, *, size: int) -> int:
    """The lab's model of a training step of its naive encoder (2 blocks, batch 8, 4 heads):
    (layers + 2) score matrices, (2 + 2) x 8 x 4 x N^2 x s (the reference prediction)."""
    return (2 + 2) * 8 * 4 * N * N * size


def lab_activation_bytes(N: int) -> int:
    """What the lab's naive step holds beside its score matrices: at most 32 float32 (8, N, 64)
    activations, its input among them."""
    return 32 * 8 * N * 64 * 4


def lab_fused_bytes(N: int) -> int:
    """A training step of the lab's encoder with SDPA or linear attention: at most 64 float32
    (8, N, 64) activations."""
    return 64 * 8 * N * 64 * 4
