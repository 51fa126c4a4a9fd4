"""The code of 12.2 The Transformer Block (chapters/12_2_transformer.ipynb): its sizes
(``P.transformer``, `sizes`), its exercises' self-checks (`checks`) and its two diagrams
(`diagrams`: the block, the encoder-decoder)."""
from . import checks, diagrams, sizes

__all__ = ["checks", "diagrams", "sizes"]
