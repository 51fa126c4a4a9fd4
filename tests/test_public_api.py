"""The public API the notebooks, the exercises and the tests call (DESIGN.md, section 4), and
the names kept where they used to live when a module moved: each importable where it is
documented, and, for a name kept at an old home, the same object as where it lives."""
import importlib

import pytest

DOCUMENTED = {     # module: the names DESIGN.md lists for it
    "attention": ["naive_attention", "flash_attention", "sdpa", "local_attention", "linear_attention",
                  "linear_attention_recurrent", "performer_attention", "LinformerAttention", "causal_mask",
                  "KERNELS"],
    "layers": ["MultiHeadAttention", "TransformerBlock"],
    "positional": ["sinusoidal_encoding", "LearnedPositionalEncoding", "RotaryEmbedding", "alibi_bias",
                   "RelativePositionBias", "time_features"],
    "memory": ["SegmentRecurrentEncoder", "CompressiveMemory"],
    "models": ["PatchTransformer", "GRUForecaster", "TCNForecaster", "LinearForecaster", "RidgeForecaster",
               "seasonal_naive"],
    "data": ["Series", "load_vic_elec", "load_ett", "load_csv", "temporal_split", "Standardizer",
             "make_windows", "patchify"],
    "train": ["fit", "evaluate", "set_seed", "pick_device"],
    "timing": ["time_call", "peak_memory", "cost_sweep", "fit_power_law"],
}
KEPT = {           # old home -> where the name lives now
    "train.set_seed": "randomstate.set_seed",
    "train.pick_device": "devices.pick_device",
    "train.SCHEDULES": "schedules.SCHEDULES",
    "train.Plateau": "schedules.Plateau",
    "compare.warmup_cosine": "schedules.warmup_cosine",
    "positional.time_features": "data.time_features",
    "report.Markdown": "markdown.Markdown",
    "timing.format_bytes": "units.format_bytes",
    "checks.core.Hint": "checks.sandbox.Hint",
    "checks.core.StudentFunction": "checks.sandbox.StudentFunction",
    "models.PatchTransformer": "models.patch.PatchTransformer",
    "data.load_csv": "data.files.load_csv",
}


def _get(dotted: str):
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(f"labsupport.{module}"), name)


@pytest.mark.parametrize("module", sorted(DOCUMENTED))
def test_every_documented_name_is_importable_where_the_design_says(module):
    found = importlib.import_module(f"labsupport.{module}")
    assert [name for name in DOCUMENTED[module] if not hasattr(found, name)] == []


def test_a_name_kept_at_its_old_home_is_the_one_where_it_lives():
    assert {old: new for old, new in KEPT.items() if _get(old) is not _get(new)} == {}
