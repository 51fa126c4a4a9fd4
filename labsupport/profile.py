"""Size presets: ``cpu`` (a 2-core laptop, minutes per notebook), ``gpu`` (bigger sweeps and
models, sized for the card it runs on) and ``smoke`` (the least training and the shortest
sweeps, only to check that a notebook runs) for tests.

The default is ``gpu`` when CUDA is available and ``cpu`` otherwise; the environment
variable ``LABSUPPORT_PROFILE`` overrides it (``LABSUPPORT_PROFILE=cpu`` on a GPU
machine reproduces the laptop run). A profile changes sizes only: every output that
the regression tests check is the same under all of them.

The gpu profile reads its card (`Card.detect`). The card's memory sets the sweeps' lengths
and memory budgets: every point meant to run holds at most ``MEMORY_FRACTION`` of the memory
free when the profile is made, by a byte model of what that sweep allocates at its peak; the
sweeps meant to hit the out-of-memory wall end at a length the whole card cannot hold. The
card's compute capability sets the sweeps' dtype (``sweep_dtype``) and the SDPA backend their
fused kernel should run (``fused_backend``). Training sizes do not depend on the card.
``python -m labsupport.profile --card T4 --card L4 --card A100-80GB`` prints the sizes for
named cards (`CARDS`).

>>> current("cpu").name
'cpu'
>>> t4 = current("gpu", card="T4")
>>> t4.sweep_dtype, t4.fused_backend, max(t4.bill_lengths)
(torch.float16, 'efficient', 32768)
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType

import torch

from .units import format_bytes
from .validation import check_instance

ENV_VAR = "LABSUPPORT_PROFILE"
# What a sweep point meant to run may hold of the card's free memory: the rest is headroom for
# what the byte models leave out (activations of other cells, the allocator's rounding).
MEMORY_FRACTION = 0.6

# The lab's training (the races, the shuffle test's ablations, linear attention, the stretch
# goals): the same in the cpu and gpu profiles. Seconds of one thread on the 2-core machine
# (tools/experiments/README.md, the lab's race on day tokens): the day-ahead race about 80, the
# week-ahead race 120, the ablations 75, linear attention 40, the stretch goals 40.
LAB_TRAINING = {
    "lab_train_stride": 2,
    "lab_max_epochs": 30,                # a budget early stopping ends first (6-14 epochs)
    "lab_seeds": 3,                      # every network of the race
    "lab_ablation_seeds": 2,             # the shuffle test's Transformers without encoding or mask
    "lab_linear_seeds": 2,               # Step 5: linear attention
    "lab_step_reps": 7,                  # timed training steps per model (batch 128)
    # the stretch goals (encodings at 28 days, segment recurrence over 28 days): every 4th
    # training window, 2 seeds; caches of 0 and 7 day tokens per layer
    "lab_stretch_stride": 4,
    "lab_stretch_seeds": 2,
    "lab_xl_memories": (0, 7),
}

PRESETS = {
    "cpu": {
        # 12.1 self-attention
        # the encoder-decoder with one context vector or with attention (Chapter 10's seq2seq
        # on 4-hour tokens), one comparison per input length, trained on the CPU in every
        # profile so that the checked claims read the same runs; every run ends by early
        # stopping (the plateau schedule) well inside the budget
        "bottleneck_hours": (24, 72, 168, 336),
        "bottleneck_train_stride": 12,
        "bottleneck_seeds": 3,
        "bottleneck_max_epochs": 60,
        "bill_lengths": (1024, 2048, 4096, 8192),
        # 12.2 the Transformer block and the book's forecaster, with the comparison protocol
        # (labsupport.compare; tools/experiments/README.md, heads_12_2.py, layernorm_12_2.py).
        # The lag readers (one head, four heads) train on the CPU in every profile, on the
        # same windows and with the same budget, so that the checked verdicts on the heads'
        # lags read the same model; early stopping (the plateau schedule) ends them.
        "heads_epochs": 40,                  # a budget early stopping ends first (10-17 epochs)
        "heads_train_stride": 3,
        "heads_seeds": 3,
        "deep_steps": 60,                    # Adam steps per version of the 12-block stack: a
        "deep_seeds": 3,                     # short budget the text's claims are about
        # the forecaster: width 32 on every 2nd training window converges in 8-11 epochs
        # (tools/experiments/README.md, 12.2); the deep stack samples the same windows
        "forecaster_width": 32,
        "forecaster_train_stride": 2,
        "forecaster_max_epochs": 30,         # a budget early stopping ends first
        "forecaster_seeds": 3,
        # 12.3 positional encodings: 7 + 1 + 3 small forecasters (one token a day), each over
        # encoding_seeds, every 3rd training window, early stopping with the plateau schedule
        # (tools/experiments/README.md, 12.3)
        "encoding_train_stride": 3,
        "encoding_width": 32,
        "encoding_lr": 2e-3,
        # dtype of the cost sweeps' inputs (12.4, 12.5): float32 on the CPU
        "sweep_dtype": torch.float32,
        # the SDPA backend the fused sweeps run (12.4): PyTorch's CPU flash kernel takes float32
        "fused_backend": "flash",
        "encoding_max_epochs": 30,           # a budget early stopping ends first
        "encoding_seeds": 2,
        # 12.4 long sequences and memory
        "wall_lengths": (512, 1024, 2048, 4096, 8192, 16384),
        "wall_budget": 1.2e9,                # bytes; skip naive points whose model exceeds it
        "fused_lengths": (1024, 2048, 4096, 8192),
        "final_lengths": (4096, 8192, 16384),
        "flash_block": 256,
        # the context curve with the comparison protocol, every run ended by early stopping
        # (the plateau schedule, lr 5e-3, patience 2): demand, the section's lesson, over
        # context_seeds and AR(1) over context_ar1_seeds, every 2nd training window. Runs
        # converged in 4-16 epochs, so the epoch budget is never reached; about 155 s of
        # training on one core (tools/experiments/README.md, context_12_4.py)
        "context_days": (1, 7, 14, 28),
        "context_train_stride": 2,
        "context_max_epochs": 40,
        "context_seeds": 3,
        "context_ar1_seeds": 2,
        "segment_totals": (512, 1024, 2048, 4096),
        "backward_lengths": (1024, 2048, 4096),   # forward + backward sweep
        # the lab: Step 4's token sweep (a training step of a 2-block encoder, batch 8, 4 heads);
        # the budget skips naive points whose predicted step, (2 + 2) x 8 x 4 x N^2 x 4 bytes,
        # exceeds it (2.1 GB at 2048 tokens)
        "lab_tokens": (64, 128, 256, 512, 1024, 2048),
        "lab_budget": 1.5e9,
        # the lab's races with the comparison protocol (labsupport.compare): every network at
        # the width of labsupport.racers.SIZES (a sweep on validation), every 2nd training
        # window, the plateau schedule from lr 2e-3, batch 128, patience 3; every run ends by
        # early stopping (tools/experiments/README.md, the lab). The same in every profile:
        # the lab's answer is a set of checked verdicts on these races
        **LAB_TRAINING,
        # 12.5 efficient attention
        "efficient_lengths": (256, 512, 1024, 2048, 4096),
        "efficient_flash_lengths": (256, 512, 1024, 2048),  # Python tiles: slow
        "efficient_budget": 200e6,           # bytes: naive points above it are skipped
        "performer_features": (16, 32, 64, 128, 256, 512, 1024),
        # the accuracy table (labsupport.compare, tools/experiments/efficient_12_5.py): the small
        # PatchTransformer (one patch per day: 14 tokens) with each kernel, the plateau schedule
        # from lr 5e-3, batch 512, patience 2: every run ends by early stopping (6-18 epochs);
        # about 150 s of training on one core for 13 runs. The same in every profile: the
        # section's checked verdicts read this table
        "efficient_width": 32,
        "efficient_train_stride": 2,         # every 2nd window (every 3rd: weaker, not cheaper)
        "efficient_max_epochs": 30,          # a safety net: early stopping ends every run sooner
        "efficient_full_seeds": 3,           # full attention (causal): the reference of the lesson
        "efficient_seeds": 2,                # every other kernel, the non-causal reference too
        "stream_steps": 150,                 # training steps of the streaming forecaster
        "stream_lengths": (1000, 2000, 4000),   # exact CPU peaks of a stream: every step recorded
    },
}

# The gpu profile's settings that do not depend on the card: training sizes, which fit any
# card from 12 GB up (small models, batches of at most a few hundred windows).
GPU_FIXED = {
    "bottleneck_hours": (24, 72, 168, 336),   # as the cpu profile's: trained on the CPU
    "bottleneck_train_stride": 12,
    "bottleneck_seeds": 3,
    "bottleneck_max_epochs": 60,
    "heads_epochs": 40,                  # as the cpu profile's: the readers train on the CPU
    "heads_train_stride": 3,
    "heads_seeds": 3,
    "deep_steps": 60,                    # as the cpu profile's: the claims are about this budget
    "deep_seeds": 3,
    "forecaster_width": 64,              # the book's default forecaster, on every window
    "forecaster_train_stride": 1,
    "forecaster_max_epochs": 40,         # early stopping (patience 3) ends it sooner
    "forecaster_seeds": 3,
    # 11 small forecasters x 3 seeds, every window, early stopping (the plateau schedule)
    "encoding_train_stride": 1,
    "encoding_width": 64,
    "encoding_lr": 2e-3,
    "encoding_max_epochs": 40,
    "encoding_seeds": 3,
    "flash_block": 1024,                 # a (4, 1024, 1024) float32 tile: 17 MB
    # 12.4's context curve: the cpu profile's recipe (early stopping under the plateau
    # schedule) on every window, 3 seeds for both series, and on to 16 weeks; the longest
    # context sets the target hours every context trains on (112 days leave 2012's first
    # 16 weeks out). The budget lies far beyond the 4-16 epochs runs took on the CPU.
    "context_days": (1, 7, 14, 28, 56, 112),
    "context_train_stride": 1,
    "context_max_epochs": 60,
    "context_seeds": 3,
    "context_ar1_seeds": 3,
    # the lab's races and stretch goals as on the CPU: the lab's answer is a set of checked
    # verdicts on them, which other training could change
    **LAB_TRAINING,
    # 12.5 efficient attention
    "performer_features": (16, 32, 64, 128, 256, 512, 1024, 2048),
    # the accuracy table as on the CPU: its verdicts are checked claims of the text, which a
    # wider model on every window could change (the ridge, say, might then be beaten)
    "efficient_width": 32,
    "efficient_train_stride": 2,
    "efficient_max_epochs": 30,
    "efficient_full_seeds": 3,
    "efficient_seeds": 2,
    "stream_steps": 600,
    "stream_lengths": (2000, 4000, 8000),   # measured on the CPU, as on a laptop
}


# --- the card ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Card:
    """One CUDA device as the gpu profile sizes for it.

    ``total_bytes`` and ``free_bytes`` of memory (``get_device_properties(i).total_memory``,
    ``mem_get_info()``), ``capability`` ``(major, minor)``, ``bf16``: native bfloat16
    arithmetic (not emulated), ``cudnn``: the cuDNN runtime version (``91701`` is 9.17.1;
    None without cuDNN), ``cuda``: the CUDA version torch was built with (``"12.8"``).
    """

    name: str
    total_bytes: int
    free_bytes: int
    capability: tuple
    bf16: bool
    cudnn: int | None = None
    cuda: str | None = None

    @classmethod
    def detect(cls, device=None) -> Card | None:
        """The CUDA device torch computes on (``device``: an index, None for the current one), or
        None where torch has none or cannot read it."""
        if not torch.cuda.is_available():
            return None
        try:
            index = torch.cuda.current_device() if device is None else device
            total = torch.cuda.get_device_properties(index).total_memory
            free, _ = torch.cuda.mem_get_info(index)
            capability = tuple(torch.cuda.get_device_capability(index))
            name = torch.cuda.get_device_name(index)
            bf16 = capability >= (8, 0) and _bf16_supported()
        except (AssertionError, RuntimeError):     # a build without CUDA (is_available patched)
            return None
        return cls(name, int(total), int(free), capability, bf16, _cudnn_version(), torch.version.cuda)

    @property
    def usable_bytes(self) -> int:
        """The most a sweep point meant to run may hold: ``MEMORY_FRACTION`` of the free memory."""
        return int(MEMORY_FRACTION * min(self.total_bytes, self.free_bytes))

    @property
    def sweep_dtype(self) -> torch.dtype:
        """bfloat16 where the card computes it natively (8.0+), float16 on 7.x (a T4's tensor
        cores; SDPA's memory-efficient kernel, no flash), float32 on older cards."""
        if self.bf16 and self.capability >= (8, 0):
            return torch.bfloat16
        return torch.float16 if self.capability >= (7, 0) else torch.float32

    @property
    def fused_backend(self) -> str:
        """The SDPA backend the fused sweeps should run in ``sweep_dtype``: ``"flash"`` (8.0+),
        ``"cudnn"`` where torch puts cuDNN attention first (`_prefers_cudnn`), else
        ``"efficient"`` (the memory-efficient kernel: float16 and float32 from 5.0)."""
        if self.sweep_dtype in (torch.float16, torch.bfloat16) and self.capability >= (8, 0):
            return "cudnn" if _prefers_cudnn(self) else "flash"
        return "efficient" if self.capability >= (5, 0) else "math"

    def __str__(self) -> str:
        major, minor = self.capability
        return f"{self.name} ({format_bytes(self.total_bytes)}, compute capability {major}.{minor})"


def _bf16_supported() -> bool:
    """torch's bfloat16 check without emulation (torch >= 2.3 counts a T4's emulated bfloat16)."""
    try:
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    except TypeError:                                         # older torch: no emulation to leave out
        return bool(torch.cuda.is_bf16_supported())


def _cudnn_version() -> int | None:
    if torch.version.hip or not torch.backends.cudnn.is_available():
        return None
    return torch.backends.cudnn.version()


def _prefers_cudnn(card: Card) -> bool:
    """torch's rule for trying cuDNN attention first (2.13's sdp_utils.cpp,
    ``check_prefer_cudnn_attention``): a 9.x or 10.x card, cuDNN newer than 9.15.0, on CUDA 12
    builds only 9.0, 9.3, 10.0 and 10.3; ``TORCH_CUDNN_SDPA_DEPRIORITIZED=1`` turns it off."""
    if os.environ.get("TORCH_CUDNN_SDPA_DEPRIORITIZED", "").lower() in ("1", "true", "yes", "on"):
        return False
    major, minor = card.capability
    if card.cudnn is None or card.cudnn <= 91500 or major not in (9, 10):
        return False
    cuda_major = int(card.cuda.split(".")[0]) if card.cuda else 0
    return cuda_major >= 13 or minor in (0, 3)


def _named(name: str, total: int, capability: tuple) -> Card:
    """A card by what torch reports for it, with about 400 MiB held by the CUDA context."""
    return Card(name, total, total - 400 * 2 ** 20, capability, bf16=capability >= (8, 0),
                cudnn=91002, cuda="12.8")


# Cards to size the gpu profile for by name (README's table, `current(card=...)`): memory as
# torch reports it, which is a little below the nominal size.
CARDS = {
    "RTX3060": _named("NVIDIA GeForce RTX 3060", 12_622_168_064, (8, 6)),
    "T4": _named("Tesla T4", 15_828_320_256, (7, 5)),
    "L4": _named("NVIDIA L4", 23_802_478_592, (8, 9)),
    "A100-40GB": _named("NVIDIA A100-SXM4-40GB", 42_298_834_944, (8, 0)),
    "H100": _named("NVIDIA H100 80GB HBM3", 84_986_691_584, (9, 0)),
    "A100-80GB": _named("NVIDIA A100-SXM4-80GB", 85_051_572_224, (8, 0)),
    "H200": _named("NVIDIA H200", 150_110_011_392, (9, 0)),
}
# PRESETS["gpu"], and the gpu profile where no card can be read
REFERENCE_CARD = "A100-80GB"


# --- byte models: what each sweep holds at its peak ------------------------------------------
# The notebooks' own models where they have one; where they have none, bounds rounded up from
# peaks measured on a CPU in float32 (tests/test_gpu_profile.py measures them again): 3.3
# (L, L) matrices for 12.4's training sweep at L = 4096; 4.06 (4, T, T) matrices for one pass
# of the segment recurrence at T = 1024; beside its score matrices, the lab's naive step holds
# 16 (8, N, 64) activations at N = 512, its SDPA step 24 and its linear step 47; 20 tensors of
# the output's shape for 12.5's Performer, the largest of its other kernels.

def _naive(L, *, heads=1, head_dim=64, causal=False, size=4) -> int:
    """12.4's ``naive_bytes`` (12.5's is the non-causal one): naive attention's peak.

    Math: scores and weights and the output, 2 H L^2 s + H L D s; causal adds the (L, L) bool
    mask and its negation: 2 H L^2 s + L^2 + max(L^2, H L D s).
    """
    scores, out = heads * L * L * size, heads * L * head_dim * size
    return 2 * scores + out if not causal else 2 * scores + L * L + max(L * L, out)


def _inputs(L, *, heads=1, head_dim=64, size=4) -> int:
    """q, k, v: 3 H L D s."""
    return 3 * heads * L * head_dim * size


def _fused(L, *, heads, size, block, head_dim=64) -> int:
    """A fused kernel (SDPA) or our tiled loop: the inputs and the output, float32 row
    statistics and a few float32 tiles. Math: 4 H L D s + 16 H L + 20 H b^2."""
    return 4 * heads * L * head_dim * size + 16 * heads * L + 20 * heads * block * block


def _fused_sweep(L, *, size) -> int:
    """12.4's fused sweep (4 heads of 64, causal): naive attention's peak and q, k, v, or a
    fused kernel's, whichever is larger."""
    naive = _naive(L, heads=4, causal=True, size=size) + _inputs(L, heads=4, size=size)
    return max(naive, _fused(L, heads=4, size=size, block=GPU_FIXED["flash_block"]))


def _final(L, *, size) -> int:
    """12.4's last step, naive attention (one head of 64, causal) and q, k, v."""
    return _naive(L, causal=True, size=size) + _inputs(L, size=size)


def _bill(L) -> int:
    """12.1: naive attention, one head of 64, float32: (2 L^2 + L D) x 4, and q, k, v."""
    return _naive(L) + _inputs(L)


def _backward(L) -> int:
    """12.4's training sweep, float32, one head, causal: naive attention's forward and backward
    hold at most 4 (L, L) float32 matrices and 2 bool masks, and q, k, v with their gradients."""
    return 18 * L * L + 2 * _inputs(L)


def _segment(T) -> int:
    """12.4's segment recurrence in one pass of T tokens (4 heads, width 32, float32): 4 (4, T, T)
    float32 matrices (content and position scores, the bias, the weights) and 256 floats per
    token. Math: (16 T^2 + 256 T) x 4."""
    return (16 * T * T + 256 * T) * 4


def _efficient_naive(L, *, size) -> int:
    """12.5's ``naive_bytes`` (4 heads of 32): 2 H L^2 s + H L D s."""
    return _naive(L, heads=4, head_dim=32, size=size)


def _efficient_others(L, *, size) -> int:
    """12.5's other kernels at L (4 heads of 32): at most 24 float32 tensors of the output's
    shape (the Performer's 128 features are the most), and q, k, v."""
    return 24 * 4 * L * 32 * 4 + _inputs(L, heads=4, head_dim=32, size=size)


def _lab_step(N, *, size) -> int:
    """The lab's model of a training step of its naive encoder (2 blocks, batch 8, 4 heads):
    (layers + 2) score matrices, (2 + 2) x 8 x 4 x N^2 x s (the reference prediction)."""
    return (2 + 2) * 8 * 4 * N * N * size


def _lab_activations(N) -> int:
    """What the lab's naive step holds beside its score matrices: at most 32 float32 (8, N, 64)
    activations, its input among them."""
    return 32 * 8 * N * 64 * 4


def _lab_fused(N) -> int:
    """A training step of the lab's encoder with SDPA or linear attention: at most 64 float32
    (8, N, 64) activations."""
    return 64 * 8 * N * 64 * 4


# --- sizing the gpu profile for a card --------------------------------------------------------

def _powers(lo: int, hi: int) -> tuple:
    """The powers of two from lo to hi."""
    return tuple(1 << k for k in range(lo.bit_length() - 1, hi.bit_length()))


def _fitting(card: Card, what: str, lo: int, hi: int, floor: int, fits) -> tuple:
    """Powers of two from ``lo`` to the longest ``L <= hi`` with ``fits(L)``, at least three:
    where fewer fit, the three ending at the longest that fits, but none below ``floor``."""
    top = hi
    while top >= floor and not fits(top):
        top //= 2
    start = min(lo, top // 4)
    if start < floor:
        room = "" if fits.room == card.usable_bytes else f"{format_bytes(fits.room)} of "
        raise ValueError(
            f"{card} has too little memory for the gpu profile: its {what} need "
            f"{format_bytes(fits.model(4 * floor))} at L = {4 * floor} (three lengths from "
            f"{floor}) within {room}{format_bytes(card.usable_bytes)} ({MEMORY_FRACTION:.0%} of "
            "the free memory); use LABSUPPORT_PROFILE=cpu")
    return _powers(start, top)


class _Fits:
    """``fits(L)``: the byte model ``model(L)`` within ``room`` bytes."""

    def __init__(self, model, room: int):
        self.model, self.room = model, room

    def __call__(self, L: int) -> bool:
        return self.model(L) <= self.room


def _with_wall(runs: tuple, model, card: Card) -> tuple:
    """``runs`` and then the first longer power of two whose model exceeds the whole card: it
    runs out of memory there (cost_sweep catches it). Lengths between, which might run or
    not, are left out."""
    L = 2 * runs[-1]
    while model(L) <= card.total_bytes:
        L *= 2
    return (*runs, L)


def _budgeted(card: Card, what: str, lo: int, hi: int, floor: int, naive, extra, others):
    """(lengths, budget) of a sweep that skips naive points over its budget: the budget leaves
    ``extra(top)`` of the usable memory for what naive attention holds beside its model; at
    least 3 naive points run, the longest length is skipped; ``others(L)``, every other
    kernel, runs at every length (at most ``hi`` unless naive still runs there)."""
    room = card.usable_bytes
    top = hi
    while naive(top) <= room - extra(top):                   # naive skips at least the longest
        top *= 2
    while others(top) > room and top > lo:                   # the others run at every length
        top //= 2
    if others(top) > room or naive(top) <= room - extra(top):
        raise ValueError(f"{card} has too little memory for the gpu profile: its {what} need "
                         f"{format_bytes(others(top))} at L = {top} within {format_bytes(room)}; "
                         "use LABSUPPORT_PROFILE=cpu")
    budget = int((room - extra(top)) // 10 ** 8 * 10 ** 8)   # whole 100 MB, rounded down
    runs = _fitting(card, what, lo, top, floor, _Fits(naive, budget))
    return _powers(runs[0], top), budget


def _sweeps(card: Card) -> dict:
    """The gpu profile's sweep settings for ``card``: lengths from the byte models; ``lo`` and
    ``hi`` are each sweep's shortest and longest on an 80 GB card, ``floor`` the cpu
    profile's shortest."""
    dtype = card.sweep_dtype
    s, room = torch.finfo(dtype).bits // 8, card.usable_bytes
    # 12.4's wall is the same call as 12.1's bill: naive attention, one head of 64, float32
    wall = _fitting(card, "wall lengths", 4096, 262144, 512, _Fits(_bill, room))
    last = _fitting(card, "final lengths", 16384, 131072, 4096, _Fits(partial(_final, size=s), room))
    last = _with_wall(last, partial(_naive, causal=True, size=s), card)
    if _fused(last[-1], heads=1, size=s, block=GPU_FIXED["flash_block"]) > room:
        raise ValueError(f"{card} has too little memory for SDPA at L = {last[-1]}; "
                         "use LABSUPPORT_PROFILE=cpu")
    efficient, efficient_budget = _budgeted(
        card, "efficient lengths", 1024, 65536, 256, partial(_efficient_naive, size=s),
        partial(_inputs, heads=4, head_dim=32, size=s), partial(_efficient_others, size=s))
    tokens, lab_budget = _budgeted(card, "lab tokens", 256, 32768, 64, partial(_lab_step, size=s),
                                   _lab_activations, _lab_fused)
    return {
        # dtype of the cost sweeps' inputs (12.4, 12.5, the lab) and the SDPA backend the fused
        # sweeps should run: flash and cuDNN take only float16/bfloat16, so float32 inputs would
        # time the memory-efficient kernel
        "sweep_dtype": dtype,
        "fused_backend": card.fused_backend,
        # 12.1: the bill of naive attention, every point within the usable memory
        "bill_lengths": _fitting(card, "bill lengths", 4096, 65536, 1024, _Fits(_bill, room)),
        # 12.4: no budget, so the naive wall and the last step run into the out-of-memory wall
        # (cost_sweep catches it) at a length the whole card cannot hold; the fused sweep
        # (naive too) fits at every length
        "wall_lengths": _with_wall(wall, _naive, card),
        "wall_budget": None,
        "fused_lengths": _fitting(card, "fused lengths", 4096, 32768, 1024,
                                  _Fits(partial(_fused_sweep, size=s), room)),
        "final_lengths": last,
        "segment_totals": _fitting(card, "segment totals", 2048, 16384, 512, _Fits(_segment, room)),
        "backward_lengths": _fitting(card, "backward lengths", 1024, 4096, 256,
                                     _Fits(_backward, room)),
        # the lab's token sweep: naive points over the budget are skipped; SDPA and linear
        # attention run at every length
        "lab_tokens": tokens,
        "lab_budget": lab_budget,
        # 12.5: naive points over the budget are skipped (12.5 checks that), the rest run
        "efficient_lengths": efficient,
        "efficient_flash_lengths": _fitting(card, "efficient flash lengths", 1024, 8192, 256,
                                            _Fits(partial(_efficient_others, size=s), room)),
        "efficient_budget": efficient_budget,
    }


def _gpu_settings(card: Card) -> dict:
    """Every setting of the gpu profile sized for ``card``."""
    return {**GPU_FIXED, **_sweeps(card)}


# The gpu profile as sized for the reference card; `current` sizes it for the card it finds.
# Every notebook together is meant to run in minutes on a data-centre card: estimates from
# operation counts; the report of a GPU run (`gpu-out/report.md`) gives each notebook's time.
PRESETS["gpu"] = _gpu_settings(CARDS[REFERENCE_CARD])


# ``smoke``: the least work that still runs every line of a notebook, to check that it runs
# top to bottom (the nbgrader test autogrades three submissions of every section with it).
# Its results are not for reading: one epoch on every 16th window trains nothing worth a
# verdict. Sweeps keep at least 3 points (the notebooks fit over the last three), each a
# length the cpu profile measures too, without the cpu sweeps' longest, costliest points.
PRESETS["smoke"] = {
    **PRESETS["cpu"],
    "bottleneck_hours": (24, 168, 336), "bottleneck_train_stride": 48, "bottleneck_seeds": 2,
    "bottleneck_max_epochs": 2,
    "deep_steps": 10,
    "encoding_train_stride": 16,
    "lab_max_epochs": 1, "lab_train_stride": 16, "lab_seeds": 1, "lab_linear_seeds": 1,
    "lab_ablation_seeds": 1, "lab_step_reps": 2, "lab_stretch_stride": 16, "lab_stretch_seeds": 1,
    "lab_xl_memories": (0, 7),
    # warmup_cosine needs 2 epochs: a warm-up epoch and one more
    "forecaster_max_epochs": 2, "forecaster_train_stride": 16, "forecaster_seeds": 1,
    "heads_epochs": 1, "heads_seeds": 1, "heads_train_stride": 16, "deep_seeds": 1,
    "encoding_max_epochs": 1, "encoding_seeds": 1,
    "context_train_stride": 32, "context_max_epochs": 2, "context_seeds": 1,   # warm-up + 1
    "context_ar1_seeds": 1,
    "efficient_train_stride": 16, "efficient_max_epochs": 2, "efficient_full_seeds": 1,
    "efficient_seeds": 1, "stream_lengths": (256, 512, 1024),
    "stream_steps": 10,
    "bill_lengths": (2048, 4096, 8192),
    "wall_lengths": (512, 1024, 2048),
    "fused_lengths": (1024, 2048, 4096),
    "final_lengths": (1024, 2048, 4096),
    "segment_totals": (512, 1024, 2048),
    "backward_lengths": (256, 512, 1024),
    "lab_tokens": (64, 128, 256),
    "efficient_lengths": (256, 512, 1024),
    "efficient_flash_lengths": (256, 512, 1024),
}


@dataclass(frozen=True)
class Profile:
    """A named preset; its settings read as attributes (``profile.bill_lengths``).

    ``card``: the card the gpu profile was sized for (None for cpu and smoke); ``source``: why
    this profile runs; ``card_note``: "" for this machine's card, else why another was used.
    """

    name: str
    device: torch.device
    settings: MappingProxyType = field(repr=False)
    card: Card | None = None
    source: str = ""
    card_note: str = ""

    def __getattr__(self, key):
        if key.startswith("__") or key == "settings":       # copy and pickle look these up first
            raise AttributeError(key)
        try:
            return self.settings[key]
        except KeyError:
            raise AttributeError(f"profile {self.name!r} has no setting {key!r}; "
                                 f"settings are {sorted(self.settings)}") from None

    def __str__(self) -> str:
        if self.card is None:
            return f"profile {self.name!r} on {self.device}"
        card = str(self.card)
        if self.card_note:
            card = f"{card[:-1]}; {self.card_note})"
        dtype = _dtype_name(self.sweep_dtype)
        return f"profile {self.name!r} on {self.device}, sized for {card}: {dtype} sweeps"

    def describe(self) -> str:
        """Two lines for a reader: which profile runs and why (device, memory, dtype), and how
        to pick another."""
        other = "gpu" if self.name == "cpu" else "cpu"
        choose = (f'Another profile: LABSUPPORT_PROFILE={other} before starting Jupyter, or '
                  f'os.environ["LABSUPPORT_PROFILE"] = "{other}" before the imports '
                  f"(profiles: {', '.join(sorted(PRESETS))}).")
        return f"{self._what()}\n{choose}"

    def _what(self) -> str:
        head = f"Profile {self.name!r} ({self.source})" if self.source else f"Profile {self.name!r}"
        dtype = _dtype_name(self.sweep_dtype)
        if self.card is None:
            if self.name == "smoke":
                return f"{head}: the least work that runs every line; its results are not for reading."
            return f"{head}: sizes for a 2-core laptop, minutes per notebook; sweeps in {dtype}."
        card, note = self.card, f"; {self.card_note}" if self.card_note else ""
        major, minor = card.capability
        return (f"{head}: sized for {card.name} ({format_bytes(card.total_bytes)}, "
                f"{format_bytes(card.free_bytes)} free, compute capability {major}.{minor}{note}): "
                f"sweeps in {dtype} with SDPA's {self.fused_backend} backend, each point within "
                f"{MEMORY_FRACTION:.0%} of the free memory ({format_bytes(card.usable_bytes)}).")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def default_name() -> str:
    return "gpu" if torch.cuda.is_available() else "cpu"


def current(name: str | None = None, *, card: Card | str | None = None) -> Profile:
    """The profile ``name``, else ``$LABSUPPORT_PROFILE``, else the default for this machine.

    The gpu profile is sized for ``card`` (a `Card`, or a name in `CARDS`: sizes for that card
    on any machine), else for this machine's card, else for the reference card
    (``CARDS[REFERENCE_CARD]``) where none can be read.
    """
    name, source = _choose(name)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name != "gpu":
        if card is not None:
            raise ValueError(f"card= sizes the gpu profile; profile {name!r} has fixed sizes; "
                             "pass name='gpu' with a card, or no card")
        return Profile(name, device, MappingProxyType(dict(PRESETS[name])), source=source)
    sized_for, note = _card(card)
    return Profile("gpu", device, MappingProxyType(_gpu_settings(sized_for)), card=sized_for,
                   source=source, card_note=note)


def _choose(name: str | None) -> tuple[str, str]:
    """The profile's name and why it was chosen."""
    if name:
        source = "asked for by name"
    elif os.environ.get(ENV_VAR):
        name, source = os.environ[ENV_VAR], f"from ${ENV_VAR}"
    else:
        name = default_name()
        source = "the default with CUDA" if name == "gpu" else "the default without CUDA"
    if name not in PRESETS:
        raise ValueError(f"unknown profile {name!r} (from argument or ${ENV_VAR}); "
                         f"expected one of {sorted(PRESETS)}")
    return name, source


def _card(card: Card | str | None) -> tuple[Card, str]:
    """The card to size the gpu profile for, and a note unless it is this machine's."""
    if card is None:
        found = Card.detect()
        if found is not None:
            return found, ""
        return CARDS[REFERENCE_CARD], "the reference card: no CUDA device could be read here"
    if isinstance(card, str):
        if card not in CARDS:
            raise ValueError(f"unknown card {card!r}; expected one of {sorted(CARDS)} "
                             "or a profile.Card")
        return CARDS[card], "named, not this machine's"
    check_instance("card", card, Card, f"a profile.Card or a card's name in {sorted(CARDS)}")
    return card, "given, not this machine's"


# --- the sizes per card, for a reader ----------------------------------------------------------

_TABLE = ("sweep_dtype", "fused_backend", "bill_lengths", "wall_lengths", "wall_budget",
          "fused_lengths", "final_lengths", "backward_lengths", "segment_totals",
          "efficient_lengths", "efficient_flash_lengths", "efficient_budget", "lab_tokens",
          "lab_budget")


def _short(n: int) -> str:
    return f"{n // 1024}k" if n % 1024 == 0 else str(n)


def _cell(P: Profile, key: str) -> str:
    """One setting of ``P`` as the table shows it."""
    value = P.settings[key]
    if isinstance(value, torch.dtype):
        return _dtype_name(value)
    if key.endswith("_budget"):
        return "none: the OOM is caught" if value is None else format_bytes(value)
    if key in ("wall_lengths", "final_lengths") and P.wall_budget is None:    # the last: the wall
        return f"{' '.join(map(_short, value[:-1]))}, then {_short(value[-1])}: OOM"
    if isinstance(value, tuple):
        return " ".join(map(_short, value))
    return str(value)


def _sizes_table(profiles) -> str:
    """A Markdown table of the card-dependent settings, one column per profile."""
    head = ["setting", *(str(P.card) if P.card else P.name for P in profiles)]
    rows = [["usable memory", *(format_bytes(P.card.usable_bytes) if P.card else "-"
                                for P in profiles)]]
    rows += [[key, *(_cell(P, key) for P in profiles)] for key in _TABLE]
    lines = [head, ["---"] * len(head), *rows]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def _main(argv=None) -> None:
    """``python -m labsupport.profile [--card NAME ...]``: the gpu profile's sizes for named
    cards, or this machine's profile."""
    parser = argparse.ArgumentParser(prog="python -m labsupport.profile",
                                     description="The gpu profile's sizes for named cards.")
    parser.add_argument("--card", action="append", choices=sorted(CARDS),
                        help="a card to size for (repeat for several); default: this machine")
    args = parser.parse_args(argv)
    if args.card:
        print(_sizes_table([current("gpu", card=name) for name in args.card]))
        return
    P = current()
    print(P.describe())
    print(_sizes_table([P]))


if __name__ == "__main__":
    _main()
