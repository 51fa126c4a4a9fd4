"""The sizes every notebook reads, as named fields (`Sizes`), and the presets that do not
depend on a card: ``cpu`` (`CPU`), ``smoke`` (`SMOKE`) and the gpu profile's training
(`GPU_FIXED`); the gpu profile's sweeps are sized for its card (`labsupport.profile.sizing`).

A preset that misses a setting or names one that `Sizes` lacks fails when the package is
imported: every field is required and keyword-only.

A new setting is its field in `Sizes` (under its section, with a comment) and one edit per
preset, all in this module: its value in `CPU`, in `GPU_FIXED` (a setting that depends on
the card goes instead in the dict that `labsupport.profile.sizing` returns) and, only where
smoke should differ from cpu, one keyword in `SMOKE`, which starts from `CPU`. Removing a
setting is the same places.

>>> CPU.bill_lengths, SMOKE.bill_lengths
((1024, 2048, 4096, 8192), (2048, 4096, 8192))
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from types import MappingProxyType
from typing import Any

import torch

__all__ = ["Sizes", "SETTINGS", "CPU", "SMOKE", "GPU_FIXED", "LAB_TRAINING"]


@dataclass(frozen=True, kw_only=True)
class Sizes:
    """Every size a notebook reads, by section. Lengths are powers of two, shortest first;
    budgets are bytes (None: no budget, the out-of-memory error is caught); strides take
    every n-th training window; epochs are budgets that early stopping ends first."""

    # 12.1 self-attention
    # 12.1: the encoder-decoder with one context vector or with attention (Chapter 10's seq2seq
    # on 4-hour tokens), one comparison per input length, every run ended by early stopping
    bottleneck_hours: tuple[int, ...]     # the input lengths compared
    bottleneck_train_stride: int
    bottleneck_seeds: int
    bottleneck_max_epochs: int
    bill_lengths: tuple[int, ...]         # naive attention's bill (one head of 64, float32)
    # 12.2 the Transformer block and the book's forecaster (labsupport.compare)
    heads_epochs: int                     # the lag readers (one head, four heads), trained on the CPU
    heads_train_stride: int
    heads_seeds: int
    deep_steps: int                       # Adam steps per version of the 12-block stack
    deep_seeds: int                       # initialisations per version
    forecaster_width: int
    forecaster_train_stride: int          # the deep stack samples the same windows
    forecaster_max_epochs: int
    forecaster_seeds: int
    # 12.3 positional encodings: 7 + 1 + 3 small forecasters, one token a day
    encoding_train_stride: int
    encoding_width: int
    encoding_lr: float
    encoding_max_epochs: int
    encoding_seeds: int
    # 12.4 long sequences and memory
    sweep_dtype: torch.dtype              # the cost sweeps' inputs (12.4, 12.5, the lab)
    fused_backend: str                    # the SDPA backend the fused sweeps run
    wall_lengths: tuple[int, ...]         # naive attention until the out-of-memory wall
    wall_budget: float | None             # bytes: naive points whose model exceeds it are skipped
    fused_lengths: tuple[int, ...]        # naive against fused kernels, 4 heads, causal
    final_lengths: tuple[int, ...]        # the last step, one head, causal
    flash_block: int                      # the tiled loop's block size, in elements
    context_days: tuple[int, ...]         # the context curve (demand)
    context_ar1_days: tuple[int, ...]     # the context curve (AR(1))
    context_train_stride: int
    context_max_epochs: int
    context_seeds: int                    # demand
    context_ar1_seeds: int                # AR(1)
    segment_totals: tuple[int, ...]       # tokens through the segment recurrence
    backward_lengths: tuple[int, ...]     # forward + backward sweep
    # 12.5 efficient attention
    efficient_lengths: tuple[int, ...]
    efficient_flash_lengths: tuple[int, ...]   # our tiled loop in Python: slow
    efficient_budget: float               # bytes: naive points above it are skipped
    performer_features: tuple[int, ...]
    efficient_width: int                  # the accuracy table's PatchTransformer
    efficient_train_stride: int
    efficient_max_epochs: int
    efficient_full_seeds: int             # full attention (causal): the lesson's reference
    efficient_seeds: int                  # every other kernel, the non-causal reference too
    stream_steps: int                     # training steps of the streaming forecaster
    stream_lengths: tuple[int, ...]       # a stream's exact CPU peaks, every step recorded
    # the lab
    lab_tokens: tuple[int, ...]           # Step 4's token sweep (2-block encoder, batch 8, 4 heads)
    lab_budget: float                     # bytes: naive steps whose predicted peak exceeds it are skipped
    lab_train_stride: int
    lab_max_epochs: int
    lab_seeds: int                        # every network of the race
    lab_ablation_seeds: int               # the shuffle test's Transformers without encoding or mask
    lab_linear_seeds: int                 # Step 5: linear attention
    lab_step_reps: int                    # timed training steps per model (batch 128)
    lab_stretch_stride: int               # the stretch goals: encodings at 28 days, segment recurrence
    lab_stretch_seeds: int
    lab_xl_memories: tuple[int, ...]      # cached day tokens per layer

    @property
    def settings(self) -> Mapping[str, Any]:
        """The sizes by name, read-only, for code that walks them (``settings["bill_lengths"]``)."""
        return MappingProxyType({name: getattr(self, name) for name in SETTINGS})


SETTINGS = tuple(f.name for f in fields(Sizes))    # every setting's name, in the fields' order

# The lab's training (the races, the shuffle test's ablations, linear attention, the stretch
# goals): the same in the cpu and gpu profiles, since the lab's answer is a set of checked
# verdicts on these races. Every network at the width of labsupport.racers.SIZES (a sweep on
# validation), the plateau schedule from lr 2e-3, batch 128, patience 3; every run ends by
# early stopping (tools/experiments/README.md, the lab). Seconds of one thread on the 2-core
# machine: the day-ahead race about 80, the week-ahead race 120, the ablations 75, linear
# attention 40, the stretch goals 40.
LAB_TRAINING = MappingProxyType(dict(
    lab_train_stride=2,
    lab_max_epochs=30,                    # early stopping ends it first (6-14 epochs)
    lab_seeds=3,
    lab_ablation_seeds=2,
    lab_linear_seeds=2,
    lab_step_reps=5,
    # the stretch goals: every 4th training window, 2 seeds; caches of 0 and 7 day tokens
    lab_stretch_stride=4,
    lab_stretch_seeds=2,
    lab_xl_memories=(0, 7),
))

# ``cpu``: a 2-core laptop, minutes per notebook.
CPU = Sizes(
    # 12.1: trained on the CPU in every profile, so that the checked claims read the same runs;
    # every run ends by early stopping (the plateau schedule) well inside the budget
    bottleneck_hours=(24, 72, 168, 336),
    bottleneck_train_stride=12,
    bottleneck_seeds=3,
    bottleneck_max_epochs=60,
    bill_lengths=(1024, 2048, 4096, 8192),
    # 12.2 with the comparison protocol (tools/experiments/README.md, heads_12_2.py,
    # layernorm_12_2.py). The lag readers train on the CPU in every profile, on the same windows
    # and with the same budget, so that the checked verdicts on the heads' lags read the same
    # model; early stopping (the plateau schedule) ends them.
    heads_epochs=40,                      # early stopping ends it first (10-17 epochs)
    heads_train_stride=3,
    heads_seeds=3,
    deep_steps=60,                        # a short budget the text's claims are about
    deep_seeds=3,
    # the forecaster: width 32 on every 2nd training window converges in 8-11 epochs
    # (tools/experiments/README.md, 12.2)
    forecaster_width=32,
    forecaster_train_stride=2,
    forecaster_max_epochs=30,
    forecaster_seeds=3,
    # 12.3: each forecaster over encoding_seeds, every 4th training window, early stopping with
    # the plateau schedule (tools/experiments/README.md, 12.3)
    encoding_train_stride=4,
    encoding_width=32,
    encoding_lr=2e-3,
    encoding_max_epochs=30,
    encoding_seeds=2,
    # 12.4: float32 sweeps; PyTorch's CPU flash kernel takes float32
    sweep_dtype=torch.float32,
    fused_backend="flash",
    wall_lengths=(512, 1024, 2048, 4096, 8192, 16384),
    wall_budget=1.2e9,
    fused_lengths=(1024, 2048, 4096, 8192),
    final_lengths=(4096, 8192, 16384),
    flash_block=256,
    # the context curve with the comparison protocol, every run ended by early stopping (the
    # plateau schedule, lr 5e-3, patience 2) over every 2nd training window, demand to 28 days
    # and AR(1) to 14. Runs converged in 4-16 epochs, so the epoch budget is never reached;
    # about 140 s of training on one core (tools/experiments/README.md, context_12_4.py)
    context_days=(1, 7, 14, 28),
    context_ar1_days=(1, 7, 14),
    context_train_stride=2,
    context_max_epochs=40,
    context_seeds=3,
    context_ar1_seeds=2,
    segment_totals=(512, 1024, 2048, 4096),
    backward_lengths=(1024, 2048, 4096),
    # 12.5
    efficient_lengths=(256, 512, 1024, 2048, 4096),
    efficient_flash_lengths=(256, 512, 1024, 2048),
    efficient_budget=200e6,
    performer_features=(16, 32, 64, 128, 256, 512, 1024),
    # the accuracy table (labsupport.compare, tools/experiments/efficient_12_5.py): one patch per
    # day (14 tokens), the plateau schedule from lr 5e-3, batch 512, patience 2: every run ends by
    # early stopping (6-18 epochs); about 150 s of training on one core for 13 runs. The same in
    # every profile: the section's checked verdicts read this table
    efficient_width=32,
    efficient_train_stride=2,             # every 3rd window: weaker, not cheaper
    efficient_max_epochs=30,              # a safety net: early stopping ends every run sooner
    efficient_full_seeds=3,
    efficient_seeds=2,
    stream_steps=150,
    stream_lengths=(1000, 2000, 4000),
    # the lab: the budget skips naive points whose predicted step, (2 + 2) x 8 x 4 x N^2 x 4
    # bytes, exceeds it (2.1 GB at 2048 tokens)
    lab_tokens=(64, 128, 256, 512, 1024, 2048),
    lab_budget=1.5e9,
    **LAB_TRAINING,
)

# The gpu profile's settings that do not depend on the card: training sizes, which fit any
# card from 12 GB up (small models, batches of at most a few hundred windows). The rest, its
# sweeps, are sized for the card (`labsupport.profile.sizing`).
GPU_FIXED = MappingProxyType(dict(
    bottleneck_hours=(24, 72, 168, 336),  # as the cpu profile's: trained on the CPU
    bottleneck_train_stride=12,
    bottleneck_seeds=3,
    bottleneck_max_epochs=60,
    heads_epochs=40,                      # as the cpu profile's: the readers train on the CPU
    heads_train_stride=3,
    heads_seeds=3,
    deep_steps=60,                        # as the cpu profile's: the claims are about this budget
    deep_seeds=3,
    forecaster_width=64,                  # the book's default forecaster, on every window
    forecaster_train_stride=1,
    forecaster_max_epochs=40,             # early stopping (patience 3) ends it sooner
    forecaster_seeds=3,
    # 9 small forecasters x 3 seeds, every window, early stopping (the plateau schedule)
    encoding_train_stride=1,
    encoding_width=64,
    encoding_lr=2e-3,
    encoding_max_epochs=40,
    encoding_seeds=3,
    flash_block=1024,                     # a (4, 1024, 1024) float32 tile: 17 MB
    # 12.4's context curve: the cpu profile's recipe (early stopping under the plateau
    # schedule) on every window, 3 seeds for both series, and on to 16 weeks; the longest
    # context sets the target hours every context trains on (112 days leave 2012's first
    # 16 weeks out). The budget lies far beyond the 4-16 epochs runs took on the CPU.
    context_days=(1, 7, 14, 28, 56, 112),
    context_ar1_days=(1, 7, 14, 28, 56, 112),
    context_train_stride=1,
    context_max_epochs=60,
    context_seeds=3,
    context_ar1_seeds=3,
    # 12.5
    performer_features=(16, 32, 64, 128, 256, 512, 1024, 2048),
    # the accuracy table as on the CPU: its verdicts are checked claims of the text, which a
    # wider model on every window could change (the ridge, say, might then be beaten)
    efficient_width=32,
    efficient_train_stride=2,
    efficient_max_epochs=30,
    efficient_full_seeds=3,
    efficient_seeds=2,
    stream_steps=600,
    stream_lengths=(2000, 4000, 8000),    # measured on the CPU, as on a laptop
    # the lab's races and stretch goals as on the CPU: the lab's answer is a set of checked
    # verdicts on them, which other training could change
    **LAB_TRAINING,
))

# ``smoke``: the least work that still runs every line of a notebook, to check that it runs
# top to bottom (the nbgrader test autogrades three submissions of every section with it).
# Its results are not for reading: one epoch on every 16th window trains nothing worth a
# verdict. Sweeps keep at least 3 points (the notebooks fit over the last three), each a
# length the cpu profile measures too, without the cpu sweeps' longest, costliest points.
SMOKE = replace(
    CPU,
    bottleneck_hours=(24, 168, 336), bottleneck_train_stride=48, bottleneck_seeds=2,
    bottleneck_max_epochs=2,
    bill_lengths=(2048, 4096, 8192),
    heads_epochs=1, heads_seeds=1, heads_train_stride=16, deep_steps=10, deep_seeds=1,
    # warmup_cosine needs 2 epochs: a warm-up epoch and one more
    forecaster_max_epochs=2, forecaster_train_stride=16, forecaster_seeds=1,
    encoding_train_stride=16, encoding_max_epochs=1, encoding_seeds=1,
    wall_lengths=(512, 1024, 2048),
    fused_lengths=(1024, 2048, 4096),
    final_lengths=(1024, 2048, 4096),
    context_train_stride=32, context_max_epochs=2, context_seeds=1,    # warm-up + 1
    context_ar1_seeds=1,
    segment_totals=(512, 1024, 2048),
    backward_lengths=(256, 512, 1024),
    efficient_lengths=(256, 512, 1024),
    efficient_flash_lengths=(256, 512, 1024),
    efficient_train_stride=16, efficient_max_epochs=2, efficient_full_seeds=1, efficient_seeds=1,
    stream_steps=10,
    stream_lengths=(256, 512, 1024),
    lab_tokens=(64, 128, 256),
    lab_max_epochs=1, lab_train_stride=16, lab_seeds=1, lab_linear_seeds=1,
    lab_ablation_seeds=1, lab_step_reps=2, lab_stretch_stride=16, lab_stretch_seeds=1,
    lab_xl_memories=(0, 7),
)
