"""Size presets: ``cpu`` (a 2-core laptop, minutes per notebook) and ``gpu`` (bigger sweeps);
``smoke`` (the least training and the shortest sweeps, only to check that a notebook runs)
for tests.

The default is ``gpu`` when CUDA is available and ``cpu`` otherwise; the environment
variable ``LABSUPPORT_PROFILE`` overrides it (``LABSUPPORT_PROFILE=cpu`` on a GPU
machine reproduces the laptop run). A profile changes sizes only: every output that
the regression tests check is the same under both.

>>> current("cpu").name
'cpu'
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import MappingProxyType

import torch

ENV_VAR = "LABSUPPORT_PROFILE"

PRESETS = {
    "cpu": {
        # 12.1 self-attention
        "bottleneck_steps": 300,             # training steps of the recall demo
        "bill_lengths": (1024, 2048, 4096, 8192),
        # 12.2 the Transformer block and the book's forecaster, with the comparison protocol
        # (labsupport.compare; tools/experiments/README.md, heads_12_2.py, layernorm_12_2.py).
        # The lag readers (one head, four heads) train on the CPU in every profile, with the
        # same epochs, so that the checked verdicts on the heads' lags read the same model.
        "heads_epochs": 15,
        "heads_seeds": 2,
        "deep_steps": 120,                   # Adam steps per version of the 12-block stack
        "forecaster_train_stride": 1,        # every training window (the deep stack's too)
        "forecaster_max_epochs": 4,          # compare.warmup_cosine over these epochs
        "forecaster_seeds": 2,
        # 12.3 positional encodings: 7 + 1 + 3 small forecasters, each over encoding_seeds
        # (labsupport.compare): every 2nd training window, a warm-up and cosine over 3 epochs
        # (1.5 passes over the windows: test MSE 0.11 against 0.15 for 6 epochs on every 4th)
        "encoding_train_stride": 2,
        "encoding_width": 32,
        "encoding_lr": 3e-3,
        # dtype of the cost sweeps' inputs (12.4, 12.5): float32 on the CPU
        "sweep_dtype": torch.float32,
        "encoding_max_epochs": 3,
        "encoding_seeds": 2,
        # 12.4 long sequences and memory
        "wall_lengths": (512, 1024, 2048, 4096, 8192, 16384),
        "wall_budget": 1.2e9,                # bytes; skip naive points whose model exceeds it
        "fused_lengths": (1024, 2048, 4096, 8192),
        "final_lengths": (4096, 8192, 16384),
        "flash_block": 256,
        "context_days": (1, 7, 14, 28),
        "context_epochs": 5,
        "context_stride": 8,
        # with the comparison protocol: 2 series x 4 contexts x 2 seeds, every 2nd window,
        # 6 epochs (about 110 s of training on one core; tools/experiments/README.md)
        "context_train_stride": 2,
        "context_max_epochs": 6,
        "context_seeds": 2,
        "segment_totals": (512, 1024, 2048, 4096),
        "backward_lengths": (1024, 2048, 4096),   # forward + backward sweep
        # the lab: Step 4's token sweep (a training step of a 2-block encoder, batch 8, 4 heads);
        # the budget skips naive points whose predicted step, (2 + 2) x 8 x 4 x N^2 x 4 bytes,
        # exceeds it (2.1 GB at 2048 tokens)
        "lab_tokens": (64, 128, 256, 512, 1024, 2048),
        "lab_budget": 1.5e9,
        # the lab with the comparison protocol (labsupport.compare): every window, a warm-up
        # and cosine schedule over lab_max_epochs (compare.warmup_cosine), patience 3;
        # see tools/experiments/README.md for the measurements behind these sizes
        "lab_train_stride": 1,
        "lab_max_epochs": 4,
        "lab_seeds": 3,                      # PatchTransformer and DLinear
        "lab_rnn_seeds": 1,                  # GRU and TCN: the slowest per epoch
        "lab_linear_seeds": 2,               # Step 5: linear attention
        "lab_gru_hidden": 32,
        "lab_tcn_hidden": 16,
        # the lab's Transformer-XL stretch goal: one small forecaster per cache length (tokens
        # = days), one seed, every 4th window; the error falls with the cache at this budget
        "lab_xl_stride": 4,
        "lab_xl_epochs": 6,
        "lab_xl_memories": (0, 6, 12),
        # 12.5 efficient attention
        "efficient_lengths": (256, 512, 1024, 2048, 4096),
        "efficient_flash_lengths": (256, 512, 1024, 2048),  # Python tiles: slow
        "efficient_budget": 200e6,           # bytes: naive points above it are skipped
        "performer_features": (16, 32, 64, 128, 256, 512, 1024),
        "efficient_width": 32,
        "efficient_train_stride": 2,         # with the comparison protocol
        "efficient_max_epochs": 4,
        "efficient_full_seeds": 3,           # full attention (causal): the reference's spread
        "efficient_noncausal_seeds": 2,      # full attention without the mask (Linformer's reference)
        "efficient_kernel_seeds": 1,         # the other kernels borrow the widest spread measured
        "stream_steps": 150,                 # training steps of the streaming forecaster
        "stream_lengths": (1000, 2000, 4000),   # exact CPU peaks of a stream: every step recorded
    },
    # Sized so that every notebook together runs in about 5 minutes on one data-centre GPU
    # (an H200: 141 GB), which keeps `tools/ci/gpu_check.sh` with the HTML build under 8.
    # Those are estimates from operation counts, not measurements: the report of a GPU
    # run (`gpu-out/report.md`) gives each notebook's time and its slowest cells.
    "gpu": {
        "bottleneck_steps": 1500,
        "bill_lengths": (4096, 8192, 16384, 32768, 65536),
        "heads_epochs": 15,                  # as the cpu profile's: the readers train on the CPU
        "heads_seeds": 3,
        "deep_steps": 120,
        "forecaster_train_stride": 1,
        "forecaster_max_epochs": 20,         # early stopping (patience 3) usually ends sooner
        "forecaster_seeds": 3,
        # 11 small forecasters x 3 seeds: 6 epochs on every window (4x the cpu profile's
        # passes; an estimate of about 3 minutes, not a measurement)
        "encoding_train_stride": 1,
        "encoding_width": 64,
        "encoding_lr": 3e-3,
        # bfloat16 on a GPU: PyTorch's flash (and cuDNN) SDPA backends take only
        # float16/bfloat16, so float32 inputs would time the memory-efficient kernel
        "sweep_dtype": torch.bfloat16,
        "encoding_max_epochs": 6,
        "encoding_seeds": 3,
        # 12.4: no budget, so the naive sweeps run into the out-of-memory wall: the
        # forward needs 2 (causal: 3) float32 L x L matrices, 128 GiB at L = 131072
        # (causal: 192 GiB), 512 GiB at L = 262144: more than any single GPU holds
        "wall_lengths": (4096, 8192, 16384, 32768, 65536, 131072, 262144),
        "wall_budget": None,
        "fused_lengths": (4096, 8192, 16384, 32768),
        "final_lengths": (16384, 32768, 65536, 131072),
        "flash_block": 1024,
        "context_days": (1, 7, 28, 91, 364),
        "context_epochs": 8,                 # 10 forecasters, early stopping (patience 2)
        "context_stride": 2,
        "context_train_stride": 1,
        "context_max_epochs": 20,
        "context_seeds": 3,
        "segment_totals": (2048, 4096, 8192, 16384),
        "backward_lengths": (1024, 2048, 4096),
        # the lab: every window, up to 20 epochs (early stopping, patience 3); the token
        # sweep's naive encoder needs (2 + 2) x 8 x 4 x N^2 x 2 bytes (bfloat16) per training
        # step: 69 GB at 16384 tokens, 275 GB at 32768, the wall
        "lab_tokens": (256, 512, 1024, 2048, 4096, 8192, 16384, 32768),
        "lab_budget": None,
        "lab_train_stride": 1,
        "lab_max_epochs": 20,                # early stopping (patience 3) usually ends sooner
        "lab_seeds": 3,
        "lab_rnn_seeds": 3,
        "lab_linear_seeds": 3,
        "lab_gru_hidden": 64,
        "lab_tcn_hidden": 32,
        "lab_xl_stride": 1,
        "lab_xl_epochs": 10,
        "lab_xl_memories": (0, 2, 6, 12),
        # 12.5 efficient attention
        "efficient_lengths": (1024, 2048, 4096, 8192, 16384, 32768, 65536),
        "efficient_flash_lengths": (1024, 2048, 4096, 8192),
        "efficient_budget": 16e9,            # naive points above it are skipped (12.5 checks that)
        "performer_features": (16, 32, 64, 128, 256, 512, 1024, 2048),
        "efficient_width": 64,
        "efficient_train_stride": 1,
        "efficient_max_epochs": 20,
        "efficient_full_seeds": 3,
        "efficient_noncausal_seeds": 3,
        "efficient_kernel_seeds": 3,
        "stream_steps": 600,
        "stream_lengths": (2000, 4000, 8000),   # measured on the CPU, as on a laptop
    },
}
# ``smoke``: the least work that still runs every line of a notebook, to check that it runs
# top to bottom (the nbgrader test autogrades three submissions of every section with it).
# Its results are not for reading: one epoch on every 16th window trains nothing worth a
# verdict. Sweeps keep at least 3 points (the notebooks fit over the last three), each a
# length the cpu profile measures too, without the cpu sweeps' longest, costliest points.
PRESETS["smoke"] = {
    **PRESETS["cpu"],
    "bottleneck_steps": 30,
    "deep_steps": 10,
    "encoding_train_stride": 16,
    "context_epochs": 1, "context_stride": 32,
    "lab_max_epochs": 1, "lab_train_stride": 16, "lab_seeds": 1, "lab_linear_seeds": 1,
    "lab_xl_stride": 16, "lab_xl_epochs": 1, "lab_xl_memories": (0, 12),
    # warmup_cosine needs 2 epochs: a warm-up epoch and one more
    "forecaster_max_epochs": 2, "forecaster_train_stride": 16, "forecaster_seeds": 1,
    "heads_epochs": 1, "heads_seeds": 1, "encoding_max_epochs": 1, "encoding_seeds": 1,
    "context_train_stride": 32, "context_max_epochs": 2, "context_seeds": 1,   # warm-up + 1
    "efficient_train_stride": 16, "efficient_max_epochs": 2, "efficient_full_seeds": 1,   # warm-up + 1
    "efficient_noncausal_seeds": 1, "stream_lengths": (256, 512, 1024),
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
    """A named preset; its settings read as attributes (``profile.bill_lengths``)."""

    name: str
    device: torch.device
    settings: MappingProxyType = field(repr=False)

    def __getattr__(self, key):
        try:
            return self.settings[key]
        except KeyError:
            raise AttributeError(f"profile {self.name!r} has no setting {key!r}; "
                                 f"settings are {sorted(self.settings)}") from None

    def __str__(self) -> str:
        return f"profile {self.name!r} on {self.device}"


def default_name() -> str:
    return "gpu" if torch.cuda.is_available() else "cpu"


def current(name: str | None = None) -> Profile:
    """The profile ``name``, else ``$LABSUPPORT_PROFILE``, else the default for this machine."""
    name = name or os.environ.get(ENV_VAR) or default_name()
    if name not in PRESETS:
        raise ValueError(f"unknown profile {name!r} (from argument or ${ENV_VAR}); "
                         f"expected one of {sorted(PRESETS)}")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return Profile(name, device, MappingProxyType(dict(PRESETS[name])))
