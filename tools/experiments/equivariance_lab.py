"""Lab Step 2: which encoders are permutation-equivariant? Shuffle 27 random tokens and
compare the encoder's outputs with the shuffled outputs, for a non-causal and a causal
encoder, with and without a positional encoding (PatchTransformer.encode, dropout 0).

    python -m tools.experiments.equivariance_lab
"""
from __future__ import annotations

import torch

from labsupport.data import HORIZON, LOOKBACK
from labsupport.models import PatchTransformer
from labsupport.train import set_seed


def equivariant(pos_encoding: str, causal: bool) -> bool:
    """Whether the encoder's outputs of shuffled tokens equal its shuffled outputs."""
    set_seed(0)
    model = PatchTransformer(lookback=LOOKBACK, horizon=HORIZON, d_model=64, dropout=0.0,
                             pos_encoding=pos_encoding, causal=causal).eval()
    tokens = torch.randn(1, model.n_patches, 64)                       # (1, 27, 64)
    perm = torch.randperm(model.n_patches, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return torch.allclose(model.encode(tokens[:, perm]), model.encode(tokens)[:, perm], atol=1e-5)


def main():
    for causal in (False, True):
        for kind in ("none", "sinusoidal", "learned", "rope"):
            print(f"causal={causal!s:5s} pos_encoding={kind:10s} outputs of shuffled tokens = "
                  f"shuffled outputs: {equivariant(kind, causal)}")


if __name__ == "__main__":
    main()
