"""The public API the notebooks, the exercises and the tests call (DESIGN.md, section 4): each
name importable where it is documented."""
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


@pytest.mark.parametrize("module", sorted(DOCUMENTED))
def test_every_documented_name_is_importable_where_the_design_says(module):
    found = importlib.import_module(f"labsupport.{module}")
    assert [name for name in DOCUMENTED[module] if not hasattr(found, name)] == []
